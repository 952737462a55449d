"""`purgatory perf scale` runs each mode against broker processes (small here) and reports
its figures next to the targets; a wrong mode is a usage error, not a traceback."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import purgatory_cli

pytestmark = pytest.mark.cluster


def perf(*options: str) -> subprocess.CompletedProcess[str]:
    return purgatory_cli("perf", "scale", *options)


def test_every_mode_reports_its_figures_and_targets() -> None:
    run = perf(
        "--modes", "partitions,connections,parked-fetches,start,brokers",
        "--partition-counts", "1,20",
        "--connection-counts", "1,30",
        "--requests", "300",
        "--fetches", "40",
        "--runs", "1",
        "--brokers", "3",
        "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert "partitions 20:" in run.stderr and "connections 30:" in run.stderr  # progress
    partitions = result["partitions"]
    assert [r["partitions"] for r in partitions["rows"]] == [1, 20]
    assert all(
        r["requests_per_sec"] > 0 and r["metadata_ms"]["median"] > 0 for r in partitions["rows"]
    )
    assert partitions["slowdown"] > 0 and isinstance(partitions["metadata_met"], bool)
    connections = result["connections"]
    assert [r["idle_connections"] for r in connections["rows"]] == [1, 30]
    assert all(r["broker_rss_mb"] > 0 for r in connections["rows"])
    parked = result["parked-fetches"]
    assert parked["fetches"] == 40 and parked["answered_early"] == 0
    assert 0 <= parked["broker_wait_late_ms"]["p50"] <= parked["late_ms"]["max"] + 1
    floor = parked["machine_wake_late_ms"]  # a process that only slept, beside the fetches
    assert floor["samples"] > 100 and 0 <= floor["p50"] <= floor["p99"] <= floor["max"]
    assert "a process that only sleeps woke p99" in run.stderr
    # Both are times of one run on a busy machine: their order is not asserted.
    assert result["start"]["ms"]["median"] > 0 and result["start"]["import_only_ms"] > 0
    brokers = result["brokers"]
    assert brokers["brokers"] == 3 and brokers["idle_rss_mb"]["median"] > 0
    assert result["targets"]["start_ms"] == 500.0


def test_an_unknown_mode_is_a_usage_error() -> None:
    run = perf("--modes", "partitions,bogus")
    assert run.returncode == 2
    assert "unknown mode bogus" in run.stderr and "Traceback" not in run.stderr
