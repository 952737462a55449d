"""`purgatory perf rebalance-join` measures a member joining a consumer group with the classic
protocol (eager range, cooperative-sticky) and KIP-848's, small: every protocol measured on
every measure, and every acknowledged record consumed in every round."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from purgatory.testing.rebalance_bench import MEASURES, PROTOCOLS, longest_gap, markdown

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    run = subprocess.run(
        [
            *(sys.executable, "-m", "purgatory", "perf", "rebalance-join", "--runs", "1"),
            *("--brokers", "1", "--partitions", "8", "--rate", "200"),
            *("--steady", "1", "--settle", "1", "--timeout", "60", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_every_protocol_is_measured_on_every_measure(result: dict[str, Any]) -> None:
    assert result["benchmark"] == "rebalance-join" and result["kafka_version"] is None
    assert set(result["median"]) == {"purgatory"}
    assert set(result["median"]["purgatory"]) == set(PROTOCOLS)
    for protocol, figures in result["median"]["purgatory"].items():
        assert set(figures) == {name for name, _label in MEASURES}, protocol
        assert figures["first_record_ms"] > 0, (protocol, figures)
        # The new member's partitions were taken from the others, whatever the protocol.
        assert figures["revoked"] >= 2, (protocol, figures)
    # Eager: every existing member gives up everything it held.
    assert result["median"]["purgatory"]["classic-range"]["revoked"] == 8


def test_every_acknowledged_record_is_consumed_in_every_round(result: dict[str, Any]) -> None:
    for protocol, samples in result["samples"]["purgatory"].items():
        assert len(samples) == 1, protocol
        sample = samples[0]
        assert sample["records_produced"] > 0, (protocol, sample)
        assert sample["records_consumed"] == sample["records_produced"], (protocol, sample)
        assert sample["produce_failures"] == 0, (protocol, sample)


def test_the_markdown_table_has_a_row_per_protocol(result: dict[str, Any]) -> None:
    table = markdown(result).splitlines()
    assert table[0].startswith("| system | protocol | rebalance round (ms) |")
    assert table[0].count("|") == 3 + len(MEASURES)
    assert [row.split(" | ")[1] for row in table[2:]] == [
        "classic, eager range",
        "classic, cooperative-sticky",
        "KIP-848 consumer",
    ]


def test_a_gap_is_the_longest_silence_that_meets_the_round() -> None:
    times = [0.0, 0.1, 0.2, 1.5, 1.6, 1.7, 2.5, 5.0]
    assert longest_gap(times, 1.0, 2.0) == pytest.approx((1.3, 0.2))  # spans the start
    assert longest_gap(times, 2.6, 3.0) == pytest.approx((2.5, 2.5))  # spans the round
    assert longest_gap([0.0, 0.1], 0.05, 2.0) == pytest.approx((1.9, 0.1))  # none after 0.1
    assert longest_gap([], 1.0, 3.0) == pytest.approx((2.0, 1.0))


def test_bad_arguments_are_refused_with_a_reason() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "purgatory", "perf", "rebalance-join", "--protocols", "eager"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--protocols takes" in run.stderr
    assert "Traceback" not in run.stderr
