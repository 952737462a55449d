"""`purgatory perf tls` measures one broker's PLAINTEXT, SSL and SASL_SSL listeners with
the same produce workload, small: every measure for each listener and the TLS cost of each
TLS listener against PLAINTEXT."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from purgatory.testing.tls_bench import LISTENERS, MEASURES

pytestmark = pytest.mark.cluster
RUNS = 2


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("trustme")
    run = subprocess.run(
        [
            *(sys.executable, "-m", "purgatory", "perf", "tls", "--runs", str(RUNS)),
            *("--num-records", "2000", "--record-size", "200", "--rate", "100"),
            *("--seconds", "0.5", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_every_listener_is_measured_on_every_measure_each_round(result: dict[str, Any]) -> None:
    assert set(result["median"]) == set(LISTENERS)
    for listener, figures in result["median"].items():
        assert set(figures) == set(MEASURES), listener
        assert figures["records_per_s"] > 0 and figures["mb_per_s"] > 0, (listener, figures)
        assert 0 < figures["produce_p50_ms"] <= figures["produce_p99_ms"], (listener, figures)
        assert figures["broker_cpu_s_per_mb"] >= 0, (listener, figures)
        assert len(result["samples"][listener]) == RUNS


def test_the_tls_cost_compares_each_tls_listener_with_plaintext(result: dict[str, Any]) -> None:
    cost = result["tls_cost_vs_plaintext"]
    assert set(cost) == {"SSL", "SASL_SSL"}
    for listener, measures in cost.items():
        assert set(measures) == set(MEASURES), listener
        rate = measures["records_per_s"]
        assert rate["ratio"] > 0, (listener, rate)


def test_bad_arguments_are_refused_with_a_reason() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "purgatory", "perf", "tls", "--listeners", "SSL,SASL_PLAINTEXT"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--listeners takes PLAINTEXT" in run.stderr
    assert "Traceback" not in run.stderr
