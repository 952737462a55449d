"""`purgatory perf soak` (an hour by hand) run for seconds: a row per interval with latency
percentiles and every broker's RSS, every acknowledged record consumed, a plot; bad
arguments are a usage error, not a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import purgatory_cli

pytestmark = pytest.mark.cluster


def soak(*options: str) -> subprocess.CompletedProcess[str]:
    return purgatory_cli("perf", "soak", *options)


def test_a_short_soak_reports_each_interval_and_loses_nothing(tmp_path: Path) -> None:
    run = soak(
        "--duration", "9",
        "--interval", "3",
        "--rate", "300",
        "--churn-every", "4",
        "--long-polls", "5",
        "--retention-bytes", str(1 << 20),
        "--record-size", "10000",
        "--out", str(tmp_path),
        "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)  # stdout is the JSON alone
    assert "soak 9/9 s:" in run.stderr  # progress, one line per interval
    rows = result["rows"]
    assert [r["interval"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert len(row["broker_rss_mb"]) == 3 and min(row["broker_rss_mb"]) > 10
        assert len(row["broker_log_mb"]) == 3 and min(row["broker_log_mb"]) > 0
        assert row["acknowledged"] > 0 and row["produce_ms"]["p50"] > 0
        assert row["produce_ms"]["p50"] <= row["produce_ms"]["p99"] <= row["produce_ms"]["max"]
        assert row["long_polls"] > 0  # each waits 1-3 s, five connections
    # The long polls waited out their deadlines: none came back early.
    assert min(r["long_poll_late_ms"]["p50"] for r in rows) >= 0
    # The total also holds what the producers' last flush had acknowledged after the last row.
    assert result["acknowledged"] >= sum(r["acknowledged"] for r in rows) > 2000
    assert result["lost"] == 0 and result["drained"]
    assert result["consumed"] >= result["acknowledged"]
    assert result["rebalances"] >= 3 + 2  # the first generation, then a member replaced
    assert result["errors"] == 0, result["first_error"]
    # Retention deleted segments: each broker holds about 6 partitions x (--retention-bytes
    # plus an active segment), well under what was written (~4.5 MiB a partition).
    written_mb = result["acknowledged"] * 10_000 / 2**20
    assert max(rows[-1]["broker_log_mb"]) < min(6 * 3, 0.7 * written_mb)
    saved = json.loads((tmp_path / "soak.json").read_text())
    assert saved["rows"] == rows
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_bad_duration_is_a_usage_error() -> None:
    run = soak("--duration", "0")
    assert run.returncode == 2
    assert "--duration and --interval must be positive" in run.stderr
    assert "Traceback" not in run.stderr
