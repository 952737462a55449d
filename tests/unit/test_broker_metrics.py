"""BrokerMetrics's scrape: families several components yield under one name come out as one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from purgatory.broker.ops.metrics import BrokerMetrics, merged


def waiting(name: str, value: float) -> Iterator[Metric]:
    family = GaugeMetricFamily("purgatory_size", "Entries.", labels=["purgatory"])
    family.add_metric([name], value)
    yield family
    yield GaugeMetricFamily(f"purgatory_only_{name.lower()}", "One source's own.", value=1)


def test_a_name_two_sources_yield_is_scraped_once_with_both_samples() -> None:
    metrics = BrokerMetrics(0)
    metrics.register(lambda: waiting("Fetch", 3))
    metrics.register(lambda: waiting("Rebalance", 1))
    text = generate_latest(metrics.registry).decode()
    assert text.count("# HELP purgatory_size ") == 1 and text.count("# TYPE purgatory_size ") == 1
    block = text[text.index("# HELP purgatory_size ") :].splitlines()[2:4]
    assert block == [
        'purgatory_size{purgatory="Fetch"} 3.0',
        'purgatory_size{purgatory="Rebalance"} 1.0',
    ]
    # Order of first appearance: the merged family stays where its first source put it.
    assert text.index("purgatory_size") < text.index("purgatory_only_fetch")
    assert text.index("purgatory_only_fetch") < text.index("purgatory_only_rebalance")


def test_a_name_yielded_as_two_types_is_a_programming_error() -> None:
    families = [
        GaugeMetricFamily("purgatory_x", "Some.", value=1),
        CounterMetricFamily("purgatory_x", "Some.", value=1),
    ]
    with pytest.raises(ValueError, match="purgatory_x as different families: gauge"):
        merged(families)


def test_a_sample_two_sources_both_yield_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="the sample purgatory_size"):
        merged([*waiting("Fetch", 3), *waiting("Fetch", 4)])


def test_the_process_and_interpreter_families_are_on_every_broker_s_registry() -> None:
    texts = [generate_latest(BrokerMetrics(i).registry).decode() for i in (0, 1)]
    for text in texts:
        assert "\npython_info{" in text and "\npython_gc_collections_total{" in text
