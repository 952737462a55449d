"""`purgatory perf cluster-start` starts clusters in both modes, times them ready and
their per-test topics, and reports the targets next to a container broker's figure."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import purgatory_cli

pytestmark = pytest.mark.cluster


def perf(*options: str) -> subprocess.CompletedProcess[str]:
    return purgatory_cli("perf", "cluster-start", *options)


def test_the_cluster_start_benchmark_measures_both_modes() -> None:
    run = perf("--runs", "2", "--topics", "3", "--brokers", "2", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert "process mode, run 2/2: ready in" in run.stderr  # progress
    for mode in ("thread", "process"):
        figures = result[mode]
        assert 0 < figures["ready_ms"]["median"] <= figures["first_topic_ms"]["median"]
        assert 0 < figures["topic_ms"]["median"] <= figures["topic_ms"]["max"]
        assert set(result["met"]) >= {f"{mode}_ready", f"{mode}_topic"}
    assert result["brokers"] == 2 and result["topics_per_run"] == 3
    assert result["container_broker"]["source"].startswith("https://")


def test_bad_options_are_refused_with_a_reason() -> None:
    bad = perf("--modes", "docker")
    assert bad.returncode == 2 and "thread and/or process" in bad.stderr
    assert "Traceback" not in bad.stderr
