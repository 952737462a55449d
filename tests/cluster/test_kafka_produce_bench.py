"""`purgatory perf kafka-produce` drives a real broker process and the echo ceiling and
prints JSON with the broker's CPU per request."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("records", ["1", "20"])
def test_the_kafka_produce_benchmark_measures_the_broker_beside_the_echo(records: str) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "purgatory",
            "perf",
            "kafka-produce",
            "--num-requests",
            "3000",
            "--records-per-batch",
            records,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert result["broker"]["requests_per_s"] > 0 and result["echo"]["requests_per_s"] > 0
    assert result["broker"]["broker_cpu_us_per_request"] > 0
    assert result["records_per_batch"] == int(records)
