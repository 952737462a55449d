"""`purgatory cluster` as real processes, driven through the CLI as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from purgatory.broker.ops.supervisor import get_json
from purgatory.experiments.processes import free_port_range
from tests.promtool import promtool_problems
from tests.support import PURGATORY, purgatory_cli

pytestmark = pytest.mark.cluster
cli = purgatory_cli


def test_the_cluster_reports_three_healthy_brokers(cluster: dict) -> None:
    assert len(cluster["bootstrap"].split(",")) == 3
    for admin in cluster["admin"]:
        with urllib.request.urlopen(f"{admin}/healthz", timeout=5) as r:
            assert r.status == 200


def test_create_produce_consume_and_describe_through_the_cli(cluster: dict) -> None:
    bootstrap = cluster["bootstrap"]
    one, two = bootstrap.split(",")[1], bootstrap.split(",")[2]
    created = cli("topics", "create", "events", "--partitions", "4", "--bootstrap", one)
    assert created.returncode == 0, created.stderr
    lines = "".join(f"key{i % 7}:value-{i}\n" for i in range(500))
    produced = cli(
        "produce",
        "events",
        "--key-separator",
        ":",
        "--acks",
        "all",
        "--bootstrap",
        two,
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 500 of 500" in produced.stderr
    consumed = cli(
        "consume", "events", "--from-beginning", "--max-records", "500", "--bootstrap", one
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == sorted(f"value-{i}" for i in range(500))
    described = cli("topics", "describe", "events", "--json", "--bootstrap", two)
    topic = json.loads(described.stdout)[0]
    assert [p["leader"] for p in topic["partitions"]] and {
        p["leader"] for p in topic["partitions"]
    } <= {0, 1, 2}
    listed = cli("topics", "list", "--bootstrap", one)
    assert "events" in listed.stdout.split()
    with urllib.request.urlopen(f"{cluster['admin'][0]}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    assert (
        'purgatory_requests_total{listener="PURGATORY",request="FetchConsumer"' in metrics
    )  # it leads partitions
    # A broker process's text as Prometheus reads it (without promtool on PATH this check
    # is tests/integration/test_metrics_exposition.py's to skip or, under CI, fail).
    problems = promtool_problems(metrics)
    assert not problems, problems


def test_cli_errors_are_clear(cluster: dict) -> None:
    bootstrap = cluster["bootstrap"]
    again = cli("topics", "create", "dup", "--bootstrap", bootstrap)
    assert again.returncode == 0
    dup = cli("topics", "create", "dup", "--bootstrap", bootstrap)
    assert dup.returncode == 1 and "TOPIC_ALREADY_EXISTS" in dup.stderr
    missing = cli("consume", "no-such-topic", "--timeout-ms", "100", "--bootstrap", bootstrap)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_perf_produce_reports_a_json_summary(cluster: dict) -> None:
    run = cli(
        "perf",
        "produce",
        "--num-records",
        "2000",
        "--batch-size",
        "10",
        "--json",
        "--bootstrap",
        cluster["bootstrap"],
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["records"] == 2000 and summary["errors"] == 0
    assert set(summary["latency_ms"]) >= {"p50", "p99", "p999"}
    # A rate limit can only slow a run down, so this bound cannot flake on a slow machine.
    limited = cli(
        "perf",
        "produce",
        "--num-records",
        "600",
        "--throughput",
        "1000",
        "--json",
        "--bootstrap",
        cluster["bootstrap"],
    )
    assert limited.returncode == 0, limited.stderr
    assert json.loads(limited.stdout)["elapsed_s"] >= 0.5
    consume = cli(
        "perf", "consume", "--num-records", "2000", "--json", "--bootstrap", cluster["bootstrap"]
    )
    assert consume.returncode == 0, consume.stderr
    assert json.loads(consume.stdout)["records"] == 2000


def test_a_broker_with_a_bad_config_fails_at_start_naming_the_key() -> None:
    bad = cli("broker", "--set", "num.partition=3")
    assert bad.returncode == 2 and "unknown config 'num.partition'" in bad.stderr
    bad_env = subprocess.run(
        [*PURGATORY, "broker"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PURGATORY_SOCKET_REQUEST_MAX_BYTES": "lots"},
    )
    assert bad_env.returncode == 2 and "socket.request.max.bytes" in bad_env.stderr
    no_lifeline = cli("broker", "--port", "0", "--admin-port", "0", "--lifeline-fd", "999")
    assert no_lifeline.returncode == 2 and "--lifeline-fd 999 is not open" in no_lifeline.stderr


def test_help_lists_every_command() -> None:
    out = cli("--help").stdout
    for command in ("broker", "cluster", "topics", "produce", "consume", "perf"):
        assert command in out
    assert "echo" in cli("perf", "--help").stdout


def test_the_purgatory_benchmark_runs_from_the_cli(tmp_path: Path) -> None:
    single = cli(
        "perf", "purgatory", "--num", "1000", "--rate", "20000", "--impl", "heap", "--json"
    )
    assert single.returncode == 0, single.stderr
    assert json.loads(single.stdout)["impl"] == "heap"
    sweep = cli(
        "perf",
        "purgatory",
        "--sweep",
        "--num",
        "500",
        "--rates",
        "20000",
        "--impls",
        "wheel",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert sweep.returncode == 0, sweep.stderr
    summary = json.loads(sweep.stdout)
    assert set(summary["saturation"]) == {"low", "high"}
    assert (tmp_path / "purgatory-sweep.png").stat().st_size > 0
    assert len(json.loads((tmp_path / "purgatory-sweep.json").read_text())) == 2
    bad = cli("perf", "purgatory", "--num", "10", "--pct50", "0")
    assert bad.returncode == 2 and "pct50" in bad.stderr


def test_consumer_groups_describe_shows_committed_offset_log_end_lag_and_owner(
    cluster: dict,
) -> None:
    bootstrap = cluster["bootstrap"]
    assert (
        cli("topics", "create", "grouped", "--partitions", "1", "--bootstrap", bootstrap).returncode
        == 0
    )
    produced = cli(
        "produce",
        "grouped",
        "--acks",
        "all",
        "--bootstrap",
        bootstrap,
        stdin="".join(f"{i}\n" for i in range(50)),
    )
    assert produced.returncode == 0, produced.stderr
    consumed = cli(
        "consume",
        "grouped",
        "--from-beginning",
        "--group",
        "g1",
        "--max-records",
        "20",
        "--bootstrap",
        bootstrap,
    )
    assert consumed.returncode == 0 and consumed.stdout.split() == [str(i) for i in range(20)]
    described = cli(
        "consumer-groups", "--describe", "--group", "g1", "--json", "--bootstrap", bootstrap
    )
    assert described.returncode == 0, described.stderr
    [row] = json.loads(described.stdout)
    assert (row["topic"], row["partition"], row["offset"], row["log_end_offset"], row["lag"]) == (
        "grouped",
        0,
        20,
        50,
        30,
    )
    assert row["owner"].startswith("purgatory-consumer@")
    table = cli("consumer-groups", "--describe", "--group", "g1", "--bootstrap", bootstrap)
    assert "LOG-END-OFFSET" in table.stdout and "30" in table.stdout
    # The group resumes where it committed.
    more = cli(
        "consume", "grouped", "--group", "g1", "--max-records", "5", "--bootstrap", bootstrap
    )
    assert more.stdout.split() == [str(i) for i in range(20, 25)]
    bad = cli("consumer-groups", "--describe", "--group", "", "--bootstrap", bootstrap)
    assert bad.returncode == 1 and "INVALID_GROUP_ID" in bad.stderr


def test_two_console_consumers_of_one_group_split_the_partitions(cluster: dict) -> None:
    bootstrap = cluster["bootstrap"]
    assert (
        cli("topics", "create", "split", "--partitions", "4", "--bootstrap", bootstrap).returncode
        == 0
    )
    consumers = [
        subprocess.Popen(
            [
                *PURGATORY,
                "consume",
                "split",
                "--group",
                "halves",
                "--from-beginning",
                "--timeout-ms",
                "10000",
                "--print-offset",
                "--bootstrap",
                bootstrap,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 60
    members: list[dict] = []
    while time.monotonic() < deadline:
        described = cli(
            "consumer-groups", "--describe", "--members", "--group", "halves", "--json",
            "--bootstrap", bootstrap,
        )  # fmt: skip
        members = json.loads(described.stdout) if described.returncode == 0 else []
        if len(members) == 2 and all(m["partitions"] == 2 for m in members):
            break
        time.sleep(0.1)
    assert [m["partitions"] for m in members] == [2, 2], members
    produced = cli(
        "produce", "split", "--acks", "all", "--bootstrap", bootstrap,
        "--key-separator", ":", stdin="".join(f"k{i}:{i}\n" for i in range(40)),
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    outputs = [c.communicate(timeout=60)[0] for c in consumers]
    values = [line.split("\t")[1] for out in outputs for line in out.splitlines()]
    assert sorted(values, key=int) == [str(i) for i in range(40)]  # each record once
    assert all(out.split() for out in outputs)  # both read some
    listed = cli("consumer-groups", "--list", "--json", "--bootstrap", bootstrap)
    assert {
        "group": "halves",
        "type": "classic",
        "state": "Empty",
        "protocol_type": "consumer",
    } in json.loads(listed.stdout)
    # Back to the start, then gone.
    dry = cli(
        "consumer-groups", "--reset-offsets", "--group", "halves", "--topic", "split",
        "--to-earliest", "--json", "--bootstrap", bootstrap,
    )  # fmt: skip
    assert {r["new_offset"] for r in json.loads(dry.stdout)} == {0}
    described = cli(
        "consumer-groups", "--describe", "--group", "halves", "--json", "--bootstrap", bootstrap
    )
    assert sum(r["offset"] for r in json.loads(described.stdout)) == 40  # a dry run
    reset = cli(
        "consumer-groups", "--reset-offsets", "--group", "halves", "--topic", "split",
        "--shift-by", "-3", "--execute", "--json", "--bootstrap", bootstrap,
    )  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    described = cli(
        "consumer-groups", "--describe", "--group", "halves", "--json", "--bootstrap", bootstrap
    )
    assert sum(r["lag"] for r in json.loads(described.stdout)) == 12
    deleted = cli("consumer-groups", "--delete", "--group", "halves", "--bootstrap", bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    listed = cli("consumer-groups", "--list", "--json", "--bootstrap", bootstrap)
    assert all(g["group"] != "halves" for g in json.loads(listed.stdout))


def test_admin_config_get_and_set_change_a_running_broker(cluster: dict) -> None:
    # The active controller applies num.partitions to a new topic: change it there.
    controller_admin = next(
        a for a in cluster["admin"] if get_json(f"{a}/v1/state")["is_controller"]
    )
    got = cli("admin", "config", "get", "num.partitions", "--json", "--admin", controller_admin)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)[0]["value"] == 3  # from the cluster's --set
    changed = cli("admin", "config", "set", "num.partitions", "5", "--admin", controller_admin)
    assert changed.returncode == 0 and "3 -> 5" in changed.stdout
    created = cli("topics", "create", "five", "--bootstrap", cluster["bootstrap"])
    assert created.returncode == 0 and "5 partition(s)" in created.stdout
    refused = cli("admin", "config", "set", "listeners", "x:1", "--admin", controller_admin)
    assert refused.returncode == 1 and "read at start only" in refused.stderr


def test_topics_delete_removes_a_topic_and_its_records_everywhere(cluster: dict) -> None:
    bootstrap = cluster["bootstrap"]
    one = bootstrap.split(",")[1]
    assert cli("topics", "create", "--topic", "doomed", "--bootstrap", bootstrap).returncode == 0
    assert (
        cli("produce", "--topic", "doomed", "--bootstrap", bootstrap, stdin="old\n").returncode == 0
    )
    deleted = cli("topics", "delete", "--topic", "doomed", "--bootstrap", one)
    assert deleted.returncode == 0 and "deleted topic doomed" in deleted.stdout, deleted.stderr
    for admin in cluster["admin"]:
        with urllib.request.urlopen(f"{admin}/v1/state", timeout=5) as r:
            state = json.load(r)
        assert not any(p["topic"] == "doomed" for p in state["partitions"]), admin
    assert "doomed" not in cli("topics", "list", "--bootstrap", bootstrap).stdout.split()
    again = cli("topics", "delete", "doomed", "--bootstrap", bootstrap)
    assert again.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in again.stderr
    assert (
        cli("topics", "delete", "doomed", "--if-exists", "--bootstrap", bootstrap).returncode == 0
    )
    # Created again, it starts empty.
    assert cli("topics", "create", "doomed", "--bootstrap", bootstrap).returncode == 0
    assert cli("produce", "doomed", "--bootstrap", bootstrap, stdin="new\n").returncode == 0
    read = cli("consume", "--topic", "doomed", "--from-beginning", "--timeout-ms", "1500",
               "--bootstrap", bootstrap)  # fmt: skip
    assert read.stdout.split() == ["new"], read.stderr


def test_topics_alter_adds_partitions_as_kafka_topics_does(cluster: dict) -> None:
    bootstrap = cluster["bootstrap"]
    one = bootstrap.split(",")[1]
    made = cli("topics", "create", "widen", "--partitions", "2", "--replication-factor", "2",
               "--bootstrap", bootstrap)  # fmt: skip
    assert made.returncode == 0, made.stderr
    grown = cli("topics", "alter", "--topic", "widen", "--partitions", "3", "--bootstrap", one)
    assert grown.returncode == 0 and "now has 3 partition(s)" in grown.stdout, grown.stderr
    # kafka-topics.sh's --replica-assignment lists every partition; existing ones are skipped.
    placed = cli("topics", "alter", "widen", "--partitions", "4",
                 "--replica-assignment", "0:1,1:2,2:0,2:1", "--bootstrap", bootstrap)  # fmt: skip
    assert placed.returncode == 0, placed.stderr
    described = json.loads(cli("topics", "describe", "widen", "--json", "--bootstrap", one).stdout)
    partitions = described[0]["partitions"]
    assert len(partitions) == 4 and partitions[3]["replicas"] == [2, 1]
    shrink = cli("topics", "alter", "widen", "--partitions", "2", "--bootstrap", bootstrap)
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr
    assert "can only be added" in shrink.stderr
    garbled = cli("topics", "alter", "widen", "--partitions", "5",
                  "--replica-assignment", "0;1", "--bootstrap", bootstrap)  # fmt: skip
    assert garbled.returncode == 1 and "--replica-assignment expects" in garbled.stderr
    sent = cli("produce", "widen", "--partition", "3", "--bootstrap", bootstrap, stdin="new\n")
    assert sent.returncode == 0, sent.stderr


def test_argument_errors_show_the_subcommand_usage() -> None:
    bad = cli("consume", "t", "--no-such-flag")
    assert bad.returncode == 2
    assert "usage: purgatory consume" in bad.stderr and "--no-such-flag" in bad.stderr
    both = cli("produce", "a", "--topic", "b")
    assert both.returncode == 2 and "usage: purgatory produce" in both.stderr
    offset = cli("consume", "t", "--offset", "3")
    assert offset.returncode == 2 and "--offset needs --partition" in offset.stderr
    assert "usage: purgatory consume" in offset.stderr
    unknown = cli("consume", "t", "--consumer-property", "sesion.timeout.ms=1")
    assert unknown.returncode == 2 and "'sesion.timeout.ms' is not a consumer config" in (
        unknown.stderr
    )
    assert "session.timeout.ms" in unknown.stderr  # the known names are listed
    not_number = cli("consume", "t", "--consumer-property", "session.timeout.ms=10s")
    assert not_number.returncode == 2 and "'10s' is not a number" in not_number.stderr


def test_kafka_habits_fault_remove_and_perf_produce_help(cluster: dict) -> None:
    admin = cluster["admin"][0]
    added = cli("admin", "fault", "add", "x", "--kind", "pause", "--duration-ms", "60000",
                "--admin", admin)  # fmt: skip
    assert added.returncode == 0, added.stderr
    removed = cli("admin", "fault", "remove", "x", "--admin", admin)
    assert removed.returncode == 0, removed.stderr
    assert (
        json.loads(cli("admin", "fault", "list", "--json", "--admin", admin).stdout)["faults"] == []
    )
    help_text = " ".join(cli("perf", "produce", "--help").stdout.split())
    assert "running cluster" in help_text and "default perf" in help_text


# Stops the module's cluster: keep it last.
def test_sigterm_stops_every_broker(cluster: dict) -> None:
    proc = cluster["proc"]
    pids = []
    for admin in cluster["admin"]:
        with urllib.request.urlopen(f"{admin}/v1/state", timeout=5) as r:
            pids.append(json.load(r)["broker_id"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    for admin in cluster["admin"]:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{admin}/healthz", timeout=2)


def test_the_cluster_survives_a_killed_broker_and_brings_it_back_on_request(
    tmp_path: Path,
) -> None:
    """`kill -9` of one broker of `purgatory cluster`: the others keep running and the
    cluster says so; `purgatory admin broker start` brings it back, `stop` stops it with a
    controlled shutdown, `list` shows each state."""
    base = free_port_range(6)
    proc = subprocess.Popen(
        [*PURGATORY, "cluster", "--brokers", "3", "--base-port", str(base),
         "--admin-base-port", str(base + 3), "--control-port", "0", "--log-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        info = json.loads(next(line for line in proc.stdout if line.startswith("{")))
        control = info["control"]

        def brokers() -> list[dict]:
            out = cli("admin", "broker", "list", "--json", "--control", control)
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)["brokers"]

        victim = brokers()[1]
        assert victim["state"] == "running"
        os.kill(victim["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while brokers()[1]["state"] != "exited":
            assert time.monotonic() < deadline, "the kill was not noticed"
            time.sleep(0.1)
        assert proc.poll() is None, "the cluster stopped with one broker"
        for admin in (info["admin"][0], info["admin"][2]):
            with urllib.request.urlopen(f"{admin}/healthz", timeout=5) as r:
                assert r.status == 200
        started = cli("admin", "broker", "start", "1", "--control", control)
        assert started.returncode == 0, started.stderr
        assert "running" in started.stdout
        with urllib.request.urlopen(f"{info['admin'][1]}/healthz", timeout=5) as r:
            assert r.status == 200
        again = cli("admin", "broker", "start", "1", "--control", control)
        assert again.returncode == 1 and "already running" in again.stderr
        stopped = cli("admin", "broker", "stop", "1", "--control", control, "--json")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["exit_code"] == 0  # a clean, controlled stop
        assert [b["state"] for b in brokers()] == ["running", "stopped", "running"]
        assert cli("admin", "broker", "pause", "2", "--control", control).returncode == 0
        assert brokers()[2]["state"] == "paused"
        assert cli("admin", "broker", "resume", "2", "--control", control).returncode == 0
        assert brokers()[2]["state"] == "running"
        unknown = cli("admin", "broker", "kill", "7", "--control", control)
        assert unknown.returncode == 1 and "no broker 7" in unknown.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "broker 1 exited with code -9" in err
