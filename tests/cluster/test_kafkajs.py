"""KafkaJS (the Node.js client, unmodified, the version tests/js/package-lock.json locks)
against a 3-broker Purgatory: an idempotent producer, two group members splitting a topic
and one taking it all when the other leaves, the admin client with its errors, a producer
that keeps sending while the leader of a partition is killed, and transactions (commit,
abort, offsets sent to a transaction, a zombie fenced).

Each scenario is one Node process running one script of tests/js (`make js-clients`
installs KafkaJS there), which prints what the client saw as JSON on stdout and KafkaJS's
log on stderr. KAFKAJS_LOG_LEVEL=DEBUG puts every request and response in that
log, shown on a failure."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from purgatory.testing import Cluster

pytestmark = pytest.mark.cluster

JS = Path(__file__).resolve().parents[1] / "js"
LOG_LEVEL = os.environ.get("KAFKAJS_LOG_LEVEL", "WARN")
PARTITIONS = 3
COUNT = 30


def kafkajs_version() -> str:
    """The KafkaJS version the lock file names, once it is installed; or skip."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(
            "no node or npm on PATH: the KafkaJS tests need Node.js 18+ and npm "
            "(Debian: apt-get install nodejs npm)"
        )
    locked = json.loads((JS / "package-lock.json").read_text())
    wanted = str(locked["packages"]["node_modules/kafkajs"]["version"])
    installed = JS / "node_modules" / "kafkajs" / "package.json"
    found = json.loads(installed.read_text())["version"] if installed.is_file() else None
    if found != wanted:
        pytest.skip(
            f"KafkaJS {wanted} is not installed in tests/js (found: {found}): `make js-clients` "
            "installs it (npm ci; the npm registry the first time)"
        )
    return wanted


def command(script: str, cluster: Cluster, **options: object) -> list[str]:
    line = ["node", str(JS / f"{script}.js"), "--bootstrap", cluster.bootstrap_servers]
    for name, value in options.items():
        line += [f"--{name.replace('_', '-')}", str(value)]
    return line


def environment() -> dict[str, str]:
    return {**os.environ, "KAFKAJS_LOG_LEVEL": LOG_LEVEL}


def answer(script: str, returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    """The script's JSON answer (its last line); a failed run shows KafkaJS's log."""
    lines = stdout.strip().splitlines()
    assert returncode == 0 and lines, (
        f"{script}.js exited {returncode}:\n{stdout[-5000:]}\n{stderr[-20000:]}"
    )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run(script: str, cluster: Cluster, **options: object) -> dict[str, Any]:
    done = subprocess.run(
        command(script, cluster, **options),
        capture_output=True,
        text=True,
        timeout=90,
        env=environment(),
    )
    return answer(script, done.returncode, done.stdout, done.stderr)


# Kafka's answer to a cluster's first FindCoordinator, while it creates __consumer_offsets.
COORDINATOR_NOT_AVAILABLE = "The group coordinator is not available"


def errors_but(result: dict[str, Any], *expected: str) -> list[dict[str, Any]]:
    """The ERRORs KafkaJS logged whose error is none of ``expected`` (it logs every error
    response at ERROR, expected ones included), nor COORDINATOR_NOT_AVAILABLE."""
    allowed = {*expected, COORDINATOR_NOT_AVAILABLE}
    return [e for e in result["logged_errors"] if e.get("error") not in allowed]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    kafkajs_version()  # skip before anything starts
    with Cluster(brokers=3) as started:
        yield started


@pytest.fixture(scope="module")
def produced(cluster: Cluster) -> dict[str, Any]:
    topic = "kafkajs-produce"
    cluster.create_topic(topic, partitions=PARTITIONS)
    result = run("produce", cluster, topic=topic, count=COUNT, batch=10)
    result["topic"] = topic
    return result


def test_an_idempotent_producer_has_every_keyed_record_acknowledged_at_consecutive_offsets(
    produced: dict[str, Any], cluster: Cluster
) -> None:
    records = produced["records"]
    assert [r["key"] for r in records] == [f"key-{i}" for i in range(COUNT)]
    for send in produced["sends"]:
        assert {s["error_code"] for s in send} == {0}
    for partition in range(PARTITIONS):
        sent = [r for r in records if r["partition"] == partition]
        assert sent, f"no key went to partition {partition}"
        # Base offset plus position, in the order sent: nothing lost, nothing twice.
        assert [r["offset"] for r in sent] == list(range(len(sent)))
        stored = cluster.records(produced["topic"], partition)
        assert stored == [(r["offset"], r["key"].encode(), r["value"].encode()) for r in sent]
    # Each send reports one base offset per partition it wrote to, where its records began.
    first_send = produced["sends"][0]
    assert sorted(s["partition"] for s in first_send) == list(range(PARTITIONS))
    assert {s["base_offset"] for s in first_send} == {"0"}
    assert not produced["logged_errors"]


def test_two_members_split_the_partitions_and_one_takes_them_all_when_the_other_leaves(
    cluster: Cluster,
) -> None:
    topic, partitions, per_partition = "kafkajs-group", 4, 5
    cluster.create_topic(topic, partitions=partitions)
    result = run(
        "group",
        cluster,
        topic=topic,
        group="kafkajs-group",
        partitions=partitions,
        per_partition=per_partition,
    )
    everything = list(range(partitions))
    assert result["alone"] == everything
    first, second = result["split"]["first"], result["split"]["second"]
    assert first and second and sorted(first + second) == everything
    # Each member reads only its own partitions, every record once, with its headers.
    for member, owned in (("first", first), ("second", second)):
        read = result["split_read"][member]
        assert sorted((r["partition"], r["offset"]) for r in read) == [
            (p, i) for p in owned for i in range(per_partition)
        ], member
        for r in read:
            assert r["key"] == f"split-{r['partition']}-{r['offset']}"
            assert r["value"] == f"value-{r['key']}"
            assert r["headers"] == [["round", "split"], ["tag", "a"], ["tag", "b"]]
            assert r["timestamp"] == 1_700_000_000_000 + r["partition"] * 1000 + r["offset"]
    split_ends = {str(p): per_partition for p in everything}
    assert result["ends_after_split"] == split_ends
    assert result["committed_after_split"] == split_ends
    # The second leaves: the first is given its partitions and reads on from the second's
    # committed offsets, so only what came after the leave, nothing twice.
    assert result["after_leave"] == everything
    assert result["assignments"]["first"][-1] == everything
    assert result["assignments"]["second"] == [second]
    after = result["after_leave_read"]
    assert sorted((r["partition"], r["offset"]) for r in after) == [
        (p, per_partition + i) for p in everything for i in range(per_partition)
    ]
    for r in after:
        assert r["key"] == f"after-leave-{r['partition']}-{r['offset'] - per_partition}"
        assert r["headers"] == [["round", "after-leave"], ["tag", "a"], ["tag", "b"]]
    assert result["committed_after_leave"] == {str(p): 2 * per_partition for p in everything}
    assert result["crashes"] == {"first": [], "second": []}
    assert result["group_after"] == [{"state": "Empty", "members": 0}]
    # A member learns of a rebalance from its heartbeat, which KafkaJS logs as an error.
    assert not errors_but(result, "The group is rebalancing, so a rejoin is needed")


def test_the_admin_client_manages_topics_and_reads_offsets_and_names_errors_as_kafka_does(
    cluster: Cluster,
) -> None:
    topic, group, missing = "kafkajs-admin", "kafkajs-admin", "kafkajs-no-such-topic"
    result = run(
        "admin", cluster, topic=topic, group=group, partitions=PARTITIONS, missing_topic=missing
    )
    assert (result["created"], result["created_again"]) == (True, False)
    [described] = result["metadata"]
    assert described["name"] == topic
    assert [p["partition"] for p in described["partitions"]] == list(range(PARTITIONS))
    for p in described["partitions"]:
        assert p["error_code"] == 0 and p["offline"] == []
        assert sorted(p["replicas"]) == [0, 1, 2] and sorted(p["isr"]) == [0, 1, 2]
        assert p["leader"] == p["replicas"][0]
    assert topic in result["list_topics"]
    ports = [int(a.rsplit(":", 1)[1]) for a in cluster.bootstrap_servers.split(",")]
    described_cluster = result["describe_cluster"]
    assert described_cluster["brokers"] == [
        {"id": i, "host": "127.0.0.1", "port": port} for i, port in enumerate(ports)
    ]
    assert described_cluster["controller"] == cluster.controller()
    assert described_cluster["cluster_id"]
    assert result["topic_offsets"] == [
        {"partition": p, "low": 0, "high": high, "offset": high}
        for p, high in enumerate([5] + [0] * (PARTITIONS - 1))
    ]
    # Committed by the group's member: partition 0's 5 records; none for the empty ones.
    assert result["group_offsets"] == [
        {"partition": p, "offset": offset} for p, offset in enumerate([5] + [-1] * (PARTITIONS - 1))
    ]
    [stable] = result["describe_group"]
    assert (stable["group"], stable["state"], stable["protocol_type"]) == (
        group,
        "Stable",
        "consumer",
    )
    assert stable["protocol"] == "RoundRobinAssigner"
    assert [m["client_id"] for m in stable["members"]] == ["kafkajs-admin"]
    assert result["list_groups"] == [{"groupId": group, "protocolType": "consumer"}]
    assert topic not in result["list_topics_after_delete"]

    errors = {e["operation"]: e for e in result["errors"]}
    unknown: dict[str, Any] = {
        "name": "KafkaJSProtocolError",
        "type": "UNKNOWN_TOPIC_OR_PARTITION",
        "message": "This server does not host this topic-partition",
        "retriable": True,
    }
    assert errors["create_existing_and_invalid"]["error"] == {
        "name": "KafkaJSAggregateError",
        "type": None,
        "message": "Topic creation errors",
        "errors": [
            {
                "name": "KafkaJSCreateTopicError",
                "type": "TOPIC_ALREADY_EXISTS",
                "message": "Topic with this name already exists",
                "retriable": False,
                "topic": topic,
            },
            {
                "name": "KafkaJSCreateTopicError",
                "type": "INVALID_REPLICATION_FACTOR",
                "message": "Replication-factor is invalid",
                "retriable": False,
                "topic": f"{topic}-rf4",
            },
        ],
    }
    assert errors["fetch_metadata_missing"]["error"] == unknown
    assert errors["fetch_metadata_deleted"]["error"] == unknown
    for operation in ("fetch_offsets_missing", "delete_missing"):
        assert errors[operation]["error"] == {
            "name": "KafkaJSNumberOfRetriesExceeded",
            "type": None,
            "message": unknown["message"],
            "retriable": False,
            "cause": unknown,
        }, operation
    # The error responses KafkaJS logs: the two CreateTopics and the unknown topic's.
    assert not errors_but(result, "Topic creation errors", unknown["message"])
    assert [e["message"] for e in result["logged_errors"]][:2] == [
        "Response CreateTopics(key: 19, version: 3)"
    ] * 2


class Lines:
    """A process's stdout, line by line, each waited for with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def next(self, timeout: float) -> str | None:
        """The next line; None at the end of the stream; queue.Empty after ``timeout``."""
        return self._lines.get(timeout=timeout)


def send_through_kill(
    cluster: Cluster, topic: str, victim: int, log: Path, after: int, retries: int = 5
) -> dict[str, Any]:
    """Run failover.js until 30 records are acknowledged, kill ``victim``, tell the script,
    and return its answer once it has sent ``after`` records more (each send tried
    ``retries`` times more at most)."""
    with log.open("w+") as stderr:
        process = subprocess.Popen(
            command("failover", cluster, topic=topic, batch=5, after=after, retries=retries),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=environment(),
        )
        assert process.stdin is not None and process.stdout is not None
        lines, out = Lines(process.stdout), []
        try:
            while (line := lines.next(timeout=30)) is not None:
                out.append(line)
                if json.loads(line)["progress"]["acked"] >= 30:
                    break
            cluster.kill(victim)
            process.stdin.write("killed\n")
            process.stdin.flush()
            while (line := lines.next(timeout=60)) is not None:
                out.append(line)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        return answer("failover", process.returncode, "".join(out), stderr.read())


def seq(record: dict[str, Any]) -> int:
    return int(record["key"].removeprefix("key-"))


def check_delivery(
    result: dict[str, Any], stored: dict[int, list[tuple[int, bytes | None, bytes | None]]]
) -> None:
    """Every record sent was acknowledged or reported failed; every one a broker
    acknowledged is in the log at its offset; no record is there twice, nor one that was
    not sent. (A record KafkaJS reports sent with no broker answer for its partition, its
    offset null, was acknowledged by no broker: KafkaJS's retry can skip a broker that
    answered an earlier attempt, tulios/kafkajs#1798; it may be absent.)"""
    acked, failed = result["acked"], result["failed"]
    assert sorted(seq(r) for r in acked + failed) == list(range(result["sent"]))
    held = {(p, offset): (k, v) for p, records in stored.items() for offset, k, v in records}
    for r in acked:
        if r["offset"] is None:
            continue
        assert held.get((r["partition"], r["offset"])) == (r["key"].encode(), r["value"].encode())
    keys = [key for key, _ in held.values()]
    assert len(keys) == len(set(keys)), "a record is in the log twice"
    assert {k.decode() for k in keys if k is not None} <= {r["key"] for r in acked + failed}


@dataclass
class Failover:
    """What failover.js answered, the partitions' records afterwards, the broker killed
    (partition 0's leader) and partition 0's leader afterwards."""

    result: dict[str, Any]
    stored: dict[int, list[tuple[int, bytes | None, bytes | None]]]
    victim: int
    leader_after: int


def kill_a_leader_while_sending(
    log: Path, config: dict[str, Any], after: int, retries: int
) -> Failover:
    """failover.js against a topic of its own on 3 broker processes, partition 0's leader
    killed (SIGKILL) while it sends."""
    kafkajs_version()
    topic = "kafkajs-failover"
    with Cluster(brokers=3, mode="process") as cluster:
        cluster.create_topic(topic, partitions=PARTITIONS, config=config)
        victim = cluster.partition(topic, 0).leader
        result = send_through_kill(cluster, topic, victim, log, after=after, retries=retries)
        stored = {p: cluster.records(topic, p) for p in range(PARTITIONS)}
        return Failover(result, stored, victim, cluster.partition(topic, 0).leader)


def test_a_producer_sending_through_a_leader_kill_loses_no_acknowledged_record(
    tmp_path: Path,
) -> None:
    run = kill_a_leader_while_sending(tmp_path / "kafkajs.log", {}, after=60, retries=5)
    result = run.result
    assert result["killed_at"] is not None and result["sent"] >= result["killed_at"] + 60
    check_delivery(result, run.stored)
    for r in result["failed"]:
        assert r["error"]["name"].startswith("KafkaJS"), r
    # Partition 0 moved to a survivor and took records sent after the kill.
    assert run.leader_after != run.victim
    after_kill = [
        r for r in result["acked"] if r["partition"] == 0 and seq(r) >= result["killed_at"]
    ]
    assert after_kill, "no record to partition 0 was acknowledged after its leader was killed"


def test_a_producer_that_cannot_reach_min_insync_replicas_reports_every_record_it_could_not_deliver(
    tmp_path: Path,
) -> None:
    # Every replica must be in sync: once one broker is gone no acks=-1 produce succeeds.
    run = kill_a_leader_while_sending(
        tmp_path / "kafkajs.log", {"min.insync.replicas": 3}, after=10, retries=2
    )
    result = run.result
    check_delivery(result, run.stored)
    killed_at = result["killed_at"]
    assert not [r for r in result["acked"] if seq(r) >= killed_at]
    failed = result["failed"]
    assert {seq(r) for r in failed} >= set(range(killed_at, result["sent"]))
    # KafkaJS retried each send (NOT_ENOUGH_REPLICAS is retriable), then gave up on it.
    for r in failed:
        error = r["error"]
        assert (error["name"], error["message"]) == (
            "KafkaJSNumberOfRetriesExceeded",
            error["cause"]["message"],
        )
        assert error["cause"]["name"] == "KafkaJSProtocolError"
        assert error["cause"]["type"] in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    assert "NOT_ENOUGH_REPLICAS" in {r["error"]["cause"]["type"] for r in failed}


def test_transactions_commit_abort_send_offsets_and_fence_a_zombie(cluster: Cluster) -> None:
    """transactions.js: a transaction of 10 committed and one of 5 aborted, read by a
    consumer with readUncommitted false (the 10) and true (all 15); consume-transform-
    produce with the offsets in the transaction (transaction.sendOffsets), the group's offset
    moving only when it commits; a second producer of a transactional id fencing the first."""
    name = "kafkajs-txn"
    topics = {"topic": name, "input": f"{name}-input", "output": f"{name}-output"}
    for topic in [*topics.values(), f"{name}-output-fence"]:
        cluster.create_topic(topic, partitions=1)
    result = run("transactions", cluster, group=f"{name}-group", **topics)
    committed = [f"committed-{i}" for i in range(10)]
    assert result["commit_abort"] == {
        "read_committed": committed,
        "read_uncommitted": committed + [f"aborted-{i}" for i in range(5)],
    }
    sent = result["send_offsets"]
    first = [f"in-{i}" for i in range(3)]
    assert sent["abort"] == {"read": first, "next": 3, "during": -1, "after": -1}
    assert sent["commit"] == {"read": first, "next": 3, "during": -1, "after": 3}
    transformed = [f"out-{v}" for v in first]
    assert sent["output"] == {
        "read_committed": transformed,
        "read_uncommitted": transformed * 2,
    }
    fence = result["fence"]
    # KafkaJS's EndTxn is v1, which Kafka answers INVALID_PRODUCER_EPOCH (PRODUCER_FENCED
    # from v2 on).
    assert fence["zombie_commit"]["type"] == "INVALID_PRODUCER_EPOCH"
    assert (fence["read_committed"], fence["read_uncommitted"]) == (
        ["successor"],
        ["zombie", "successor"],
    )
    # KafkaJS logs each error response at ERROR: here the zombie's, and those it retries as
    # Kafka's clients do: a transaction begun, or a producer initialised, while the markers
    # of the one before are still being written.
    assert not [
        e
        for e in errors_but(result, CONCURRENT_TRANSACTIONS, fence["zombie_commit"]["message"])
        if CONCURRENT_TRANSACTIONS not in e["message"]
    ]


CONCURRENT_TRANSACTIONS = (
    "The producer attempted to update a transaction while another concurrent operation on the "
    "same transaction was ongoing"
)
