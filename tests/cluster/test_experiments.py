"""`purgatory experiment run|analyze|plot` end to end: short real runs of every scenario
(brokers as real processes), their figures, and the Spark analysis of a grey failure."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PURGATORY = [sys.executable, "-m", "purgatory"]


def run(*argv: str, timeout: float = 180) -> dict:
    done = subprocess.run(
        [*PURGATORY, *argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def plots(out: Path) -> list[str]:
    made = run("experiment", "plot", str(out))["plots"]
    for path in made:
        assert Path(path).stat().st_size > 10_000, f"{path} looks empty"
    return sorted(Path(p).name for p in made)


def test_grey_failure_shows_the_culprit_in_true_latency_only(
    tmp_path: Path, spark_ready: None
) -> None:
    out = tmp_path / "grey"
    result = run(
        "experiment",
        "run",
        "grey-failure",
        "--out",
        str(out),
        "--duration",
        "8",
        "--param",
        "delay_ms=40",
        "--no-progress",
    )
    assert result["results"]["culprit"] == 0
    m = manifest(out)
    assert m["completed"] and [p["name"] for p in m["phases"]] == ["baseline", "fault"]
    assert m["sample_counts"]["follower_fetch"] > 100 and m["sample_counts"]["produce"] > 20
    assert (out / "metrics.jsonl").stat().st_size > 0
    assert len(list((out / "logs").glob("broker-*.log"))) == 3
    analysis = run("experiment", "analyze", str(out), "--master", "local[2]", "--window", "2")
    assert analysis["culprit"] == "broker-0"
    assert "**The slow broker: broker-0**" in (out / "analysis" / "report.md").read_text()
    assert plots(out) == ["fetch-latency-pairs.png"]


def test_purgatory_scenario_runs_the_sweep_and_draws_the_curves(tmp_path: Path) -> None:
    out = tmp_path / "purgatory"
    result = run(
        "experiment",
        "run",
        "purgatory",
        "--out",
        str(out),
        "--records",
        "2000",
        "--param",
        "rates=20000,40000",
        "--no-progress",
    )
    assert result["results"]["runs"] == 2 * 3 * 2  # cases x implementations x rates
    rows = [json.loads(line) for line in (out / "purgatory.jsonl").read_text().splitlines()]
    assert {r["impl"] for r in rows} == {"wheel", "wheel-purge", "heap"}
    assert plots(out) == ["purgatory-sweep.png"]


def test_remote_backfill_expires_with_a_short_timeout_and_not_with_a_long_one(
    tmp_path: Path,
) -> None:
    out = tmp_path / "backfill"
    result = run(
        "experiment",
        "run",
        "remote-backfill",
        "--out",
        str(out),
        "--partitions",
        "4",
        "--records",
        "200",
        "--param",
        "timeouts=40,3000",
        "--param",
        "remote_p50_ms=60",
        "--param",
        "remote_p99_ms=300",
        "--no-progress",
    )
    short, long = result["results"]["runs"]
    assert short["records"] == long["records"] == 4 * 200  # both backfills complete
    assert short["expirations"] > 0 and long["expirations"] == 0
    assert manifest(out)["sample_counts"]["consumer_fetch"] > 0
    assert plots(out) == ["consumer-fetch-latency.png", "remote-backfill.png"]


def test_consumer_lag_contrasts_maxlag_with_the_checker_and_stops_cleanly_on_ctrl_c(
    tmp_path: Path,
) -> None:
    out = tmp_path / "lag"
    result = run(
        "experiment",
        "run",
        "consumer-lag",
        "--out",
        str(out),
        "--records",
        "400",
        "--duration",
        "6",
        "--param",
        "shapes=1x1024,1000x65536",
        "--no-progress",
    )
    small, large = result["results"]["runs"]
    # A one-chunk queue shows the slow application in MaxLag; a large one hides it,
    # while the checker's lag (log end - committed) sees it in both.
    assert small["median_max_lag"] > 0 and large["median_max_lag"] == 0
    assert small["median_checker_lag"] > 0 and large["median_checker_lag"] > 0
    assert plots(out) == ["consumer-lag.png"]

    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(
        [
            *PURGATORY,
            "experiment",
            "run",
            "consumer-lag",
            "--out",
            str(stopped),
            "--records",
            "400",
            "--duration",
            "120",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (stopped / "lag.jsonl").exists() or not (stopped / "lag.jsonl").stat().st_size:
        assert proc.poll() is None and time.monotonic() < deadline, "no samples written"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err[-2000:]
    m = manifest(stopped)
    assert m["completed"] is False and m["finished_at"] is not None
    assert (stopped / "lag.jsonl").read_text().strip()  # what was written is kept


def test_leader_failover_loses_nothing_acknowledged_cleanly_and_shows_what_unclean_loses(
    tmp_path: Path, spark_ready: None
) -> None:
    out = tmp_path / "failover"
    session_ms = 2000
    result = run(
        "experiment",
        "run",
        "leader-failover",
        "--out",
        str(out),
        "--duration",
        "9",
        "--partitions",
        "4",
        "--param",
        f"session_timeout_ms={session_ms}",
        "--param",
        "replica_lag_time_max_ms=1000",
        "--no-progress",
    )["results"]
    clean, unclean = result["clean"], result["unclean"]
    # A clean election from the ISR: every acknowledged record is there, once, in order.
    assert clean["acked"] > 300 and clean["failed"] == 0
    assert clean["lost"] == 0 and clean["out_of_order"] == 0 and clean["offsets_reused"] == 0
    assert clean["partitions_led"] and clean["elections"]["clean"] >= len(clean["partitions_led"])
    # The dead leader's partitions wait for its session to expire, counted from its last
    # heartbeat (every quarter of the session), then carry on.
    for window in clean["window_ms"].values():
        assert session_ms * 3 / 4 <= window <= session_ms + 5000
    # Unclean: what only the dead leader held is gone, and its offsets were given again.
    assert unclean["elections"]["unclean"] >= len(unclean["partitions_led"])
    assert unclean["acked_by_the_leader_alone"] > 0
    assert 0 < unclean["lost"] == unclean["lost_of_those"] <= unclean["acked_by_the_leader_alone"]
    assert unclean["offsets_reused"] > 0
    assert set(unclean["lost_by_partition"]) <= {str(p) for p in unclean["partitions_led"]}
    m = manifest(out)
    assert m["completed"] and [p["name"] for p in m["phases"]] == [
        "clean-baseline",
        "clean-leader-killed",
        "clean-restarted",
        "unclean-baseline",
        "unclean-followers-cut-off",
        "unclean-isr-is-the-leader",
        "unclean-leader-killed",
        "unclean-restarted",
    ]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] in ("kill", "restart")] == [
        "kill",
        "restart",
        "kill",
        "restart",
    ]
    analysis = run("experiment", "analyze", str(out), "--master", "local[2]", "--window", "1")
    report = Path(analysis["report"]).read_text()
    assert "## Longest wait between two acknowledgements" in report
    assert "leader-failover.png" in plots(out)


@pytest.mark.timeout(900)
def test_chaos_breaks_no_promise_under_every_nemesis(tmp_path: Path, spark_ready: None) -> None:
    """CI's bounded chaos run: each nemesis in turn (kill -9, SIGSTOP, two restarted
    together, isolation, a split, one-way loss, a leader move) on three broker processes
    under our and confluent-kafka's idempotent acks=all producers and consumers; the
    checker's every promise holds (the command fails otherwise), then Spark and a figure."""
    out = tmp_path / "chaos"
    result = run(
        "experiment",
        "run",
        "chaos",
        "--out",
        str(out),
        "--duration",
        "90",
        "--param",
        "schedule=cycle",
        "--param",
        "seed=41",
        "--param",
        "pause_s=1-8",
        "--param",
        "down_s=1-4",
        "--param",
        "hold_s=2-6",
        "--no-progress",
        timeout=600,
    )["results"]
    assert result["violations"] == []
    kinds = {f["kind"] for f in result["fault_list"]}
    assert kinds == {"kill", "pause", "restart-two", "isolate", "split", "one-way", "move-leader"}
    assert result["acked"] > 5000 and result["lost"] == 0 and result["duplicates"] == 0
    assert result["acked_by_client"]["ours"] > 0 and result["acked_by_client"]["confluent"] > 0
    assert all(c["read"] == result["records_in_log"] for c in result["consumed"].values())
    assert result["replicas"]["batches_compared"] > 1000
    assert result["controllers"]["quorum_epochs_with_a_leader"] >= 3
    failovers = [f["failover_ms"] for f in result["fault_list"] if f["kind"] in ("kill", "pause")]
    assert failovers and all(ms is not None for ms in failovers)
    analysis = run("experiment", "analyze", str(out), "--master", "local[2]", timeout=300)
    assert {r["kind"] for r in analysis["fault_kinds"]} == kinds
    assert "## Faults, per kind" in Path(analysis["report"]).read_text()
    assert "chaos.png" in plots(out)


@pytest.mark.parametrize("argv", [["experiment", "run", "nope", "--out", "x"]])
def test_an_unknown_scenario_is_refused(argv: list[str]) -> None:
    done = subprocess.run([*PURGATORY, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_leader_failover_refuses_brokers_it_cannot_kill(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *PURGATORY,
            "experiment",
            "run",
            "leader-failover",
            "--out",
            str(tmp_path / "x"),
            "--bootstrap",
            "127.0.0.1:9",
            "--admin",
            "http://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "drop --bootstrap" in done.stderr
    assert "Traceback" not in done.stderr
