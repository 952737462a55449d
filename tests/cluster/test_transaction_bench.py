"""`purgatory perf transactions` measures Purgatory beside Apache Kafka with the same
client, small: commit latency, visibility to read_committed, and transactional against
idempotent throughput, for each."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from purgatory.testing.compare_bench import unavailable
from purgatory.testing.transaction_bench import MEASURES, markdown

pytestmark = pytest.mark.cluster
SYSTEMS = ("purgatory", "kafka")


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    for system in SYSTEMS:
        if (reason := unavailable(system)) is not None:
            pytest.skip(reason)
    run = subprocess.run(
        [
            *(sys.executable, "-m", "purgatory", "perf", "transactions"),
            *("--systems", ",".join(SYSTEMS), "--brokers", "1", "--runs", "1"),
            *("--transactions", "10", "--num-records", "2000", "--batch", "200", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_each_system_is_measured_on_every_measure(result: dict[str, Any]) -> None:
    assert set(result["median"]) == set(SYSTEMS)
    for system, figures in result["median"].items():
        assert set(figures) == {name for name, _label in MEASURES}, system
        assert all(value > 0 for value in figures.values()), (system, figures)
        assert figures["commit_p50_ms"] <= figures["commit_p99_ms"], (system, figures)
        assert figures["visible_p50_ms"] <= figures["visible_p99_ms"], (system, figures)


def test_the_markdown_table_has_a_row_per_measure(result: dict[str, Any]) -> None:
    table = markdown(result).splitlines()
    assert table[0] == "| | purgatory | kafka |"
    assert len(table) == 2 + len(MEASURES)


def test_bad_arguments_are_refused_with_a_reason() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "purgatory", "perf", "transactions", "--systems", "nats"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--systems takes" in run.stderr
    assert "Traceback" not in run.stderr
