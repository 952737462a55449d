"""Leader failover with real broker processes: a killed leader is replaced from the ISR,
and a broker that restarts (its in-memory logs gone) never leads or truncates records that
were acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from purgatory.clients import AdminClient, Consumer, Producer
from tests.cluster.process_cluster import ProcessCluster, produce_while, running
from tests.support import wait_until

pytestmark = pytest.mark.cluster


async def read_all(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    """Every record of a partition below ``end``, by offset; fails on a gap or a repeat."""
    seen: dict[int, bytes] = {}
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, partition)])
        while len(seen) < end:
            batch = await c.poll(timeout_ms=5000)
            assert batch, f"{topic}-{partition} ends at {len(seen)}, before offset {end}"
            for record in batch:
                assert record.offset not in seen
                seen[record.offset] = record.value or b""
    assert list(seen) == list(range(end))
    return seen


async def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    async with AdminClient(bootstrap) as admin:
        meta = await admin.describe_topics([topic])
    return {p.partition_index: p.leader_id for p in meta.topics[0].partitions}


async def created(cluster: ProcessCluster, topic: str, min_isr: str) -> tuple[int, int]:
    """Create an RF 3 topic of 3 partitions; return one partition led by another broker than
    the active controller, and its leader."""
    async with AdminClient(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 3, 3, {"min.insync.replicas": min_isr})
    controller = cluster.controller()
    led = (await leaders(cluster.bootstrap, topic)).items()
    return next((p, b) for p, b in led if b != controller)


@pytest.mark.parametrize("victim", [0, 1], ids=["the-controller", "another-broker"])
async def test_a_restarted_leader_never_leads_again_nor_makes_acknowledged_records_vanish(
    victim: int,
) -> None:
    """The case from the issue: RF 3, min ISR 2, records acknowledged with acks=all, their
    leader killed and restarted at once (within the session timeout). It comes back
    empty: it must not lead, and the followers must keep every acknowledged record."""
    async with running() as cluster:
        async with AdminClient(cluster.bootstrap) as admin:
            await admin.create_topic("acked", 3, 3, {"min.insync.replicas": "2"})
        acked: dict[int, dict[int, bytes]] = {p: {} for p in range(3)}
        async with Producer(cluster.bootstrap, acks=-1, linger_ms=0) as producer:
            for p in range(3):
                for i in range(5):
                    value = f"p{p}-{i}".encode()
                    acked[p][(await producer.send_and_wait("acked", value, partition=p)).offset] = (
                        value
                    )
        led = [
            p
            for p, leader in (await leaders(cluster.bootstrap, "acked")).items()
            if leader == victim
        ]
        assert led
        cluster.kill(victim)
        cluster.start(victim)
        await wait_until(lambda: cluster.healthy(victim), timeout=30, message="restarted")
        await wait_until(
            lambda: all(p["role"] == "follower" for p in cluster.state(victim)["partitions"]),
            timeout=30,
            message="the restarted broker leads nothing",
        )
        bootstrap = cluster.bootstrap
        async with Producer(
            bootstrap, acks=-1, linger_ms=0, delivery_timeout_ms=30_000
        ) as producer:
            for p in range(3):
                after = await producer.send_and_wait("acked", b"after", partition=p)
                assert after.offset == 5, "an offset was reused"
        for p in range(3):
            seen = await read_all(bootstrap, "acked", p, 6)
            assert all(seen[offset] == value for offset, value in acked[p].items())
        # The restarted broker catches up from the new leaders and rejoins every ISR.
        await wait_until(
            lambda: all(
                victim in p["isr"] and p["log_end_offset"] == 6
                for p in cluster.state(victim)["partitions"]
            ),
            timeout=30,
            message="the restarted broker back in every ISR with every record",
        )


def load_producer(bootstrap: str) -> Producer:
    """acks=all, retrying retriable errors for up to 30 s."""
    return Producer(
        bootstrap,
        acks=-1,
        linger_ms=1,
        request_timeout_ms=3000,
        delivery_timeout_ms=30_000,
        retry_backoff_ms=50,
    )


async def test_killing_a_leader_under_acks_all_load_loses_nothing() -> None:
    async with running() as cluster:
        partition, leader = await created(cluster, "load", min_isr="2")
        async with load_producer(cluster.bootstrap) as producer:
            acked, failed = await produce_while(
                producer, "load", partition, lambda: cluster.kill(leader)
            )
        assert failed == 0, f"{failed} records not delivered (retriable errors are retried)"
        new_leader = (await leaders(cluster.bootstrap, "load"))[partition]
        assert new_leader not in (-1, leader)
        # The active controller (the leader killed was another) counts what it did.
        active = cluster.controller()
        controller = cluster.metrics(active)
        assert controller[("purgatory_active_controller", ())] == 1
        assert controller[("purgatory_leader_elections_total", (("kind", "clean"),))] >= 1
        assert controller[("purgatory_fenced_brokers", ())] == 1
        assert controller[("purgatory_active_brokers", ())] == 2
        assert controller[("purgatory_offline_partitions", ())] == 0
        assert controller[("purgatory_preferred_replica_imbalance", ())] >= 1
        other = next(b for b in range(3) if b not in (leader, active))
        assert cluster.metrics(other)[("purgatory_active_controller", ())] == 0
        seen = await read_all(cluster.bootstrap, "load", partition, max(acked) + 1)
        assert all(seen[offset] == value for offset, value in acked.items())
        # The producer is idempotent (acks=all): no retry across the failover wrote twice.
        assert len(set(seen.values())) == len(seen)


def confluent_through_failover(
    bootstrap: str, topic: str, partition: int, kill: Callable[[], None]
) -> dict[str, Any]:
    """An idempotent confluent-kafka producer sends 1500 records, the leader killed after
    500; then a confluent-kafka consumer reads the partition back."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka import TopicPartition

    producer = CKProducer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1}
    )
    reports: dict[bytes, tuple[str | None, int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        reports[msg.value()] = (None if err is None else err.name(), msg.offset())

    for i in range(1500):
        producer.produce(topic, f"record-{i}".encode(), partition=partition, on_delivery=delivered)
        if i == 500:
            kill()
        if i % 50 == 0:
            producer.flush(60)
    left = producer.flush(60)
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "failover"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    read: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(read) < 1500 and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            if msg.error() is None:
                read.append((msg.offset(), msg.value()))
    consumer.close()
    return {"left": left, "reports": reports, "read": read}


async def test_a_kafka_client_carries_on_through_a_leader_failover_without_duplicates() -> None:
    async with running() as cluster:
        partition, leader = await created(cluster, "ckload", min_isr="2")
        out = await asyncio.to_thread(
            confluent_through_failover,
            cluster.bootstrap,
            "ckload",
            partition,
            lambda: cluster.kill(leader),
        )
        assert out["left"] == 0
        errors = [e for e, _ in out["reports"].values() if e is not None]
        assert errors == [] and len(out["reports"]) == 1500  # every record acknowledged
        new_leader = (await leaders(cluster.bootstrap, "ckload"))[partition]
        assert new_leader not in (-1, leader)
        offsets = [offset for offset, _ in out["read"]]
        assert offsets == list(range(1500))  # no gap, and nothing written twice
        values = [value for _, value in out["read"]]
        assert values == [f"record-{i}".encode() for i in range(1500)]  # in order
        assert all(out["read"][offset][1] == v for v, (_, offset) in out["reports"].items())


def partition_on(
    cluster: ProcessCluster, broker_id: int, topic: str, partition: int
) -> dict[str, Any]:
    return next(
        p
        for p in cluster.state(broker_id)["partitions"]
        if (p["topic"], p["partition"]) == (topic, partition)
    )


def add_fault(cluster: ProcessCluster, broker_id: int, spec: dict[str, object]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{cluster.admin_ports[broker_id]}/v1/faults",
        data=json.dumps(spec).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status in (200, 201)


async def test_a_former_leader_truncates_its_divergent_suffix_and_then_equals_the_leader() -> None:
    """The leader takes acks=1 records its followers never get (their fetches stall), then
    freezes; a follower is elected, takes new records at the same offsets. When the former
    leader resumes (its log intact: same incarnation) it follows the new leader, cuts the
    suffix that never reached the ISR (OffsetForLeaderEpoch) and ends with the leader's
    log, record for record."""
    async with running(**{"replica.lag.time.max.ms": "30000"}) as cluster:
        partition, leader = await created(cluster, "fork", min_isr="1")
        async with Producer(cluster.bootstrap, acks=-1, linger_ms=0) as producer:
            for i in range(3):
                await producer.send_and_wait("fork", b"committed-%d" % i, partition=partition)
        followers = [b for b in range(3) if b != leader]
        # Stall only the followers' fetches from this leader (not the controller's traffic).
        fetchers: list[object] = [f"replica-fetcher-{b}" for b in followers]
        add_fault(
            cluster,
            leader,
            {"name": "stall", "kind": "latency", "delay_ms": 60_000, "peers": fetchers,
             "duration_ms": 20_000},
        )  # fmt: skip
        async with Producer(cluster.bootstrap, acks=1, linger_ms=0) as producer:
            for i in range(4):
                await producer.send_and_wait("fork", b"divergent-%d" % i, partition=partition)
        state = partition_on(cluster, leader, "fork", partition)
        # (A fetch parked at the leader when the stall began may still carry the first.)
        assert state["log_end_offset"] == 7 and state["high_watermark"] <= 4
        os.kill(cluster.procs[leader].pid, signal.SIGSTOP)
        try:
            # Both followers know of the election: the producer asks either for metadata, and
            # one still naming the frozen leader would send it where nothing answers.
            await wait_until(
                lambda: all(
                    partition_on(cluster, b, "fork", partition)["leader"] not in (-1, leader)
                    for b in followers
                ),
                timeout=20,
                message="a follower elected, as both followers know",
            )
            async with Producer(
                ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in followers),
                acks=-1,
                linger_ms=0,
                delivery_timeout_ms=30_000,
            ) as producer:
                for i in range(2):
                    await producer.send_and_wait("fork", b"new-%d" % i, partition=partition)
        finally:
            os.kill(cluster.procs[leader].pid, signal.SIGCONT)
        # (A follower knows the election; the former leader, just resumed, may not yet.)
        new_leader = partition_on(cluster, followers[0], "fork", partition)["leader"]
        end = partition_on(cluster, new_leader, "fork", partition)["log_end_offset"]

        def former_leader() -> dict[str, Any]:
            return partition_on(cluster, leader, "fork", partition)

        await wait_until(
            lambda: (
                former_leader()["role"] == "follower" and former_leader()["log_end_offset"] == end
            ),
            timeout=30,
            message="the former leader truncated and caught up",
        )
        truncations = cluster.metrics(leader)[
            ("purgatory_log_truncations_total", (("source_broker", str(new_leader)),))
        ]
        assert truncations >= 1
        values = list((await read_all(cluster.bootstrap, "fork", partition, end)).values())
        assert values[:3] == [b"committed-0", b"committed-1", b"committed-2"]
        assert values[-2:] == [b"new-0", b"new-1"]
        assert all(v.startswith(b"divergent-") for v in values[3:-2]) and len(values) <= 6
        # The same batches on both (a divergent one is longer than a new one).
        current = partition_on(cluster, new_leader, "fork", partition)
        assert (former_leader()["size_bytes"], former_leader()["batches"]) == (
            current["size_bytes"],
            current["batches"],
        )


async def test_a_controlled_shutdown_under_load_hands_leadership_over_and_loses_nothing() -> None:
    """SIGTERM to a leader: it asks the controller to move its leaderships first. The
    session timeout is a minute, so a new leader within the test's bounds can only come
    from the handover, and the producer sees nothing but retriable errors."""
    async with running(**{"broker.session.timeout.ms": "60000"}) as cluster:
        partition, leader = await created(cluster, "handover", min_isr="2")
        async with load_producer(cluster.bootstrap) as producer:
            acked, failed = await produce_while(
                producer, "handover", partition, lambda: cluster.procs[leader].terminate()
            )
        assert failed == 0, f"{failed} records not delivered"
        assert cluster.procs[leader].wait(30) == 0, "the broker did not stop cleanly"
        new_leader = (await leaders(cluster.bootstrap, "handover"))[partition]
        assert new_leader not in (-1, leader)
        assert leader not in partition_on(cluster, new_leader, "handover", partition)["isr"]
        seen = await read_all(cluster.bootstrap, "handover", partition, max(acked) + 1)
        assert all(seen[offset] == value for offset, value in acked.items())


def elect_leaders_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "purgatory", "admin", "elect-leaders", "--bootstrap", bootstrap,
         *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_elect_leaders_moves_leadership_back_to_the_preferred_replica() -> None:
    async with running(**{"auto.leader.rebalance.enable": "false"}) as cluster:
        partition, preferred = await created(cluster, "pref", min_isr="2")
        observer = cluster.controller()  # not the preferred leader, which is killed
        cluster.kill(preferred)
        await wait_until(
            lambda: (
                partition_on(cluster, observer, "pref", partition)["leader"] not in (-1, preferred)
            ),
            timeout=20,
            message="a new leader",
        )
        cluster.start(preferred)
        await wait_until(
            lambda: (
                cluster.healthy(preferred)
                and preferred in partition_on(cluster, observer, "pref", partition)["isr"]
            ),
            timeout=30,
            message="the preferred replica back in the ISR",
        )
        assert (
            cluster.metrics(cluster.controller())[("purgatory_preferred_replica_imbalance", ())]
            >= 1
        )
        done = await asyncio.to_thread(
            elect_leaders_cli, cluster.bootstrap, "--election-type", "preferred",
            "--all-topic-partitions",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"pref-{partition}" in done.stdout and "Successfully completed" in done.stdout
        assert (await leaders(cluster.bootstrap, "pref"))[partition] == preferred
        assert (
            cluster.metrics(cluster.controller())[("purgatory_preferred_replica_imbalance", ())]
            == 0
        )
        again = await asyncio.to_thread(
            elect_leaders_cli, cluster.bootstrap, "--election-type", "preferred",
            "--topic", "pref", "--partition", str(partition),
        )  # fmt: skip
        assert again.returncode == 0 and "Valid replica already elected" in again.stdout


async def test_an_offline_partition_returns_with_its_last_isr_member_or_by_unclean_election() -> (
    None
):
    """The ISR shrinks to the leader, then the leader freezes (fenced, its log intact): the
    partition is offline, not led by a replica that lacks records. It is led again when
    that leader returns; frozen once more, an unclean election on request gives it a
    live replica as leader."""
    async with running(**{"auto.leader.rebalance.enable": "false"}) as cluster:
        partition, leader = await created(cluster, "lonely", min_isr="1")
        observer = cluster.controller()  # not the leader, which is frozen
        followers = [b for b in range(3) if b != leader]
        async with Producer(cluster.bootstrap, acks=-1, linger_ms=0) as producer:
            for i in range(3):
                await producer.send_and_wait("lonely", b"r%d" % i, partition=partition)
        add_fault(
            cluster,
            leader,
            {"name": "stall", "kind": "latency", "delay_ms": 60_000,
             "peers": [f"replica-fetcher-{b}" for b in followers], "duration_ms": 60_000},
        )  # fmt: skip
        await wait_until(
            lambda: partition_on(cluster, leader, "lonely", partition)["isr"] == [leader],
            timeout=20,
            message="the ISR shrunk to the leader",
        )
        live = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in followers)
        os.kill(cluster.procs[leader].pid, signal.SIGSTOP)
        try:
            await wait_until(
                lambda: partition_on(cluster, observer, "lonely", partition)["leader"] == -1,
                timeout=20,
                message="the partition offline",
            )
            assert (await leaders(live, "lonely"))[partition] == -1
            assert cluster.metrics(cluster.controller())[("purgatory_offline_partitions", ())] == 1
        finally:
            os.kill(cluster.procs[leader].pid, signal.SIGCONT)
        await wait_until(
            lambda: partition_on(cluster, observer, "lonely", partition)["leader"] == leader,
            timeout=20,
            message="the last ISR member leads again",
        )
        seen = await read_all(cluster.bootstrap, "lonely", partition, 3)
        assert list(seen.values()) == [b"r0", b"r1", b"r2"]
        os.kill(cluster.procs[leader].pid, signal.SIGSTOP)
        try:
            await wait_until(
                lambda: partition_on(cluster, observer, "lonely", partition)["leader"] == -1,
                timeout=20,
                message="the partition offline again",
            )
            done = await asyncio.to_thread(
                elect_leaders_cli, live, "--election-type", "unclean", "--topic", "lonely",
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            assert (await leaders(live, "lonely"))[partition] in followers
            elections = cluster.metrics(cluster.controller())[
                ("purgatory_leader_elections_total", (("kind", "unclean"),))
            ]
            assert elections == 1
        finally:
            os.kill(cluster.procs[leader].pid, signal.SIGCONT)
