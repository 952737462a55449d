"""The Spark analysis: the culprit rule, and the job on generated samples (real PySpark)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from purgatory.experiments.analyze import analyze, find_culprit
from purgatory.experiments.recorder import Recorder


def pair(phase: str, source: str, destination: str, true_p50: float) -> dict[str, object]:
    return {
        "phase": phase,
        "source": source,
        "destination": destination,
        "kind": "follower_fetch",
        "true_p50_ms": true_p50,
    }


def test_the_culprit_is_the_broker_common_to_every_pair_whose_true_latency_rose() -> None:
    brokers = ("broker-0", "broker-1", "broker-2")
    pairs = [pair("baseline", s, d, 1.0) for s in brokers for d in brokers if s != d]
    pairs += [
        pair("fault", s, d, 52.0 if "broker-1" in (s, d) else 1.2)
        for s in brokers
        for d in brokers
        if s != d
    ]
    found = find_culprit(pairs, ["baseline", "fault"])
    assert found["culprit"] == "broker-1" and len(found["slow_pairs"]) == 4


def test_no_culprit_when_nothing_rose_or_everything_did() -> None:
    calm = [
        pair("baseline", "broker-0", "broker-1", 1.0),
        pair("fault", "broker-0", "broker-1", 1.5),
    ]
    assert find_culprit(calm, ["baseline", "fault"])["culprit"] is None
    everywhere = [
        pair("baseline", "broker-0", "broker-1", 1.0),
        pair("baseline", "broker-2", "broker-3", 1.0),
        pair("fault", "broker-0", "broker-1", 40.0),
        pair("fault", "broker-2", "broker-3", 40.0),
    ]
    found = find_culprit(everywhere, ["baseline", "fault"])
    assert found["culprit"] is None and len(found["slow_pairs"]) == 2


def generated_run(directory: Path, culprit: int, scenario: str = "grey-failure") -> None:
    """A grey-failure run on paper: 3 brokers, then 40 ms more on every pair with ``culprit``;
    every fetch waits in purgatory (so total latency rises nowhere in particular)."""
    rng = random.Random(1)
    recorder = Recorder(directory, scenario, {"generated": True})
    start = 1_700_000_000.0
    recorder.manifest["phases"] = [
        {"name": "baseline", "started_at": start},
        {"name": "fault", "started_at": start + 30},
    ]
    for second in range(60):
        for s in range(3):
            for d in range(3):
                if s == d:
                    continue
                for i in range(20):
                    ts = start + second + i / 20
                    true = rng.uniform(0.5, 2.0)
                    if second >= 30 and culprit in (s, d):
                        true += 40 + rng.uniform(0, 5)
                    wait = rng.uniform(400, 500) - true
                    recorder.sample(
                        "follower_fetch", f"broker-{s}", f"broker-{d}", wait + true, wait, ts
                    )
    recorder.write(
        "metrics.jsonl", {"ts": start, "broker": 0, "metric": "m", "labels": {}, "value": 1.0}
    )
    recorder.close(completed=True)


def test_the_spark_job_finds_a_known_culprit_and_writes_parquet_and_a_report(
    tmp_path: Path, spark_ready: None
) -> None:
    generated_run(tmp_path, culprit=2)
    summary = analyze(tmp_path, "local[2]", window_s=10)
    assert summary["culprit"]["culprit"] == "broker-2"
    slow = {(p["source"], p["destination"]) for p in summary["culprit"]["slow_pairs"]}
    assert slow == {
        ("broker-2", "broker-0"),
        ("broker-2", "broker-1"),
        ("broker-0", "broker-2"),
        ("broker-1", "broker-2"),
    }
    assert summary["samples"] == 60 * 6 * 20
    # Percentiles per pair and phase: the total latency hides the culprit, the true one shows it.
    by = {(p["phase"], p["source"], p["destination"]): p for p in summary["pairs"]}
    assert 400 <= by[("fault", "broker-0", "broker-1")]["latency_p50_ms"] <= 500
    assert by[("fault", "broker-0", "broker-2")]["true_p50_ms"] > 40
    assert by[("fault", "broker-0", "broker-1")]["true_p50_ms"] < 3
    analysis = tmp_path / "analysis"
    for table in ("windows", "pairs", "metrics"):
        assert list((analysis / table).glob("*.parquet")), f"no Parquet in {table}"
    report = (analysis / "report.md").read_text()
    assert "**The slow broker: broker-2**" in report
    assert json.loads((tmp_path / "manifest.json").read_text())["completed"] is True


def test_the_spark_job_reads_its_own_parquet_back(tmp_path: Path, spark_ready: None) -> None:
    from purgatory.experiments.analyze import spark_session

    generated_run(tmp_path, culprit=0)
    analyze(tmp_path, "local[1]", window_s=30)
    spark = spark_session("local[1]")
    try:
        windows = spark.read.parquet(str(tmp_path / "analysis" / "windows"))
        assert windows.filter("window_s = 30 AND source = 'broker-0'").count() == 2
        assert set(windows.columns) >= {"latency_p999_ms", "true_p99_ms", "count", "window_s"}
    finally:
        spark.stop()


def test_only_a_slow_broker_scenario_names_a_culprit(tmp_path: Path, spark_ready: None) -> None:
    generated_run(tmp_path, culprit=1, scenario="remote-backfill")
    summary = analyze(tmp_path, "local[1]", window_s=30)
    assert "culprit" not in summary
    report = (tmp_path / "analysis" / "report.md").read_text().lower()
    assert "culprit" not in report and "slow broker" not in report


def test_a_failover_history_gives_records_per_phase_and_each_partitions_longest_stall(
    tmp_path: Path, spark_ready: None
) -> None:
    """Two partitions, a record acknowledged every 100 ms on each; partition 0 stalls for
    2.5 s after 10 s (its leader died), and its queued records then arrive late."""
    recorder = Recorder(tmp_path, "leader-failover", {"generated": True})
    start = recorder.manifest["started_at"]
    recorder.manifest["phases"] = [
        {"name": "clean-baseline", "started_at": start},
        {"name": "clean-leader-killed", "started_at": start + 10},
    ]
    for i in range(200):
        sent = start + i / 10
        for partition in (0, 1):
            stalled = partition == 0 and 10 <= i / 10 < 12.5
            ts = start + 12.5 if stalled else sent + 0.002
            recorder.write(
                "history.jsonl",
                {
                    "ts": ts,
                    "phase": recorder.phase_at(ts),
                    "topic": "failover",
                    "partition": partition,
                    "producer": 0,
                    "seq": i,
                    "sent_ts": sent,
                    "offset": i,
                    "error": None,
                },
            )
    recorder.close(completed=True)
    summary = analyze(tmp_path, "local[1]", window_s=5)
    phases = {r["phase"]: r for r in summary["outcomes"]}
    assert phases["clean-baseline"]["acked"] == 2 * 100
    assert phases["clean-leader-killed"]["acked"] == 2 * 100
    assert phases["clean-leader-killed"]["latency_max_ms"] == pytest.approx(2500, abs=1)
    gaps = {r["partition"]: r for r in summary["gaps"]}
    assert gaps[0]["gap_ms"] == pytest.approx(2598, abs=1)  # 9.902 s -> 12.5 s
    assert gaps[0]["gap_began_s"] == pytest.approx(9.9, abs=0.01)
    assert gaps[1]["gap_ms"] == pytest.approx(100, abs=1)
    assert list((tmp_path / "analysis" / "gaps").glob("*.parquet"))
    report = (tmp_path / "analysis" / "report.md").read_text()
    assert "| failover | 0 | 2598.0 | 9.9 |" in report
