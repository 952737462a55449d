"""`purgatory perf kafka-mock` runs both targets with real processes and prints JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster


def test_the_kafka_mock_benchmark_measures_both_targets_side_by_side() -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "purgatory",
            "perf",
            "kafka-mock",
            "--num-records",
            "3000",
            "--rate",
            "100",
            "--seconds",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    for target in ("mock", "purgatory"):
        for acks in ("acks=1", "acks=all"):
            assert result[target][acks]["failed"] == 0 and result[target][acks]["records_per_s"] > 0
        assert result[target]["end_to_end"]["received"] == 100
    assert set(result["vs_mock"]) == {"acks=1", "acks=all"}
