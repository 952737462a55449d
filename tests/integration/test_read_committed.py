"""read_committed against in-process brokers, without a transaction coordinator:
transactional v2 batches (a real producer's wire format) appended on the leader, markers
written with ``ReplicaManager.append_txn_markers`` as the coordinator will, and
confluent-kafka reading from the Kafka listener. read_committed stops at the last stable
offset and drops aborted transactions; read_uncommitted sees every record; no control
record reaches the application; ListOffsets read_committed answers the LSO. A follower
knows the open transactions it replicated: after the leader goes, its successor holds the
LSO at the open one and still drops the aborted one."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.clients import Consumer
from purgatory.protocol import kafka_records
from tests.support import bootstrap, running_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST = {
    "auto.leader.rebalance.enable": False,
    "broker.heartbeat.interval.ms": 50,
    "broker.session.timeout.ms": 1000,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
}


def create(brokers: list[Broker], topic: str, replicas: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replicas)])[
        topic
    ].result(15)


def leader_of(brokers: list[Broker], topic: str) -> Broker | None:
    for broker in brokers:
        partition = broker.replica_manager.partitions.get((topic, 0))
        if partition is not None and partition.is_leader:
            return broker
    return None


async def append(broker: Broker, topic: str, batch: bytes) -> None:
    """Append one batch on the leader with acks=-1, as a producer's Produce would."""
    responses, done = broker.replica_manager.append_records(5_000, -1, [((topic, 0), batch)])
    if done is not None:
        responses = await done
    assert responses[0][1].error == 0, responses


async def end_txn(broker: Broker, topic: str, producer_id: int, commit: bool) -> None:
    responses, done = broker.replica_manager.append_txn_markers(
        5_000, [((topic, 0), producer_id, 0, commit, 0)]
    )
    if done is not None:
        responses = await done
    assert responses[0][1].error == 0, responses


def txn(producer_id: int, sequence: int, *values: bytes) -> bytes:
    now = int(time.time() * 1000)
    return kafka_records.encode(
        [(now, None, v, []) for v in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
    )


def plain(*values: bytes) -> bytes:
    now = int(time.time() * 1000)
    return kafka_records.encode([(now, None, v, []) for v in values])


def read(brokers: list[Broker], topic: str, isolation: str) -> tuple[list[bytes], int]:
    """Every record confluent-kafka hands the application up to the end the partition's
    watermarks give for ``isolation`` (ListOffsets with that isolation level: the LSO for
    read_committed), and that end."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap(brokers),
            "group.id": f"read-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    partition = TopicPartition(topic, 0, 0)
    got: list[bytes] = []
    try:
        _, end = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
        consumer.assign([partition])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            position = consumer.position([partition])[0].offset
            if position >= end:
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got, end


async def read_async(brokers: list[Broker], topic: str, isolation: str) -> tuple[list[Any], int]:
    return await asyncio.to_thread(read, brokers, topic, isolation)


async def test_read_committed_sees_committed_records_and_stops_at_the_last_stable_offset() -> None:
    async with running_cluster(1) as brokers:
        topic = "txn"
        await asyncio.to_thread(create, brokers, topic, 1)
        await wait_until(lambda: leader_of(brokers, topic) is not None, message="a leader")
        leader = leader_of(brokers, topic)
        assert leader is not None
        await append(leader, topic, txn(1, 0, b"c0", b"c1"))  # 0-1, committed below
        await append(leader, topic, txn(2, 0, b"a0", b"a1"))  # 2-3, aborted below
        await append(leader, topic, txn(1, 2, b"c2"))  # 4
        await append(leader, topic, plain(b"p0"))  # 5
        assert await read_async(brokers, topic, "read_committed") == ([], 0)
        assert await read_async(brokers, topic, "read_uncommitted") == (
            [b"c0", b"c1", b"a0", b"a1", b"c2", b"p0"],
            6,
        )
        await end_txn(leader, topic, 1, commit=True)  # 6; the LSO stays at pid 2's start
        assert await read_async(brokers, topic, "read_committed") == ([b"c0", b"c1"], 2)
        await end_txn(leader, topic, 2, commit=False)  # 7
        committed = await read_async(brokers, topic, "read_committed")
        assert committed == ([b"c0", b"c1", b"c2", b"p0"], 8)
        uncommitted = await read_async(brokers, topic, "read_uncommitted")
        assert uncommitted == ([b"c0", b"c1", b"a0", b"a1", b"c2", b"p0"], 8)
        # Our own consumer (read_uncommitted): every record, no marker, and its fetch
        # position moves past the markers that end the log.
        async with Consumer(
            bootstrap(brokers), auto_offset_reset="earliest", fetch_max_wait_ms=50
        ) as consumer:
            consumer.assign([(topic, 0)])
            got: list[bytes | None] = []
            deadline = time.monotonic() + 20
            while len(got) < 6 and time.monotonic() < deadline:
                got += [m.value for m in await consumer.poll(timeout_ms=200)]
            assert got == [b"c0", b"c1", b"a0", b"a1", b"c2", b"p0"]
            await wait_until(
                lambda: consumer.fetch_position((topic, 0)) == 8, message="past the markers"
            )


async def test_a_new_leader_holds_the_open_transaction_and_still_drops_the_aborted_one() -> None:
    async with running_cluster(3, **FAST) as brokers:
        topic = "txn-failover"
        await asyncio.to_thread(create, brokers, topic, 3)

        def fully_replicated() -> bool:
            leader = leader_of(brokers, topic)
            return (
                leader is not None and len(leader.replica_manager.partitions[(topic, 0)].isr) == 3
            )

        await wait_until(fully_replicated, message="a leader with 3 in-sync replicas")
        leader = leader_of(brokers, topic)
        assert leader is not None
        await append(leader, topic, plain(b"p0"))  # 0
        await append(leader, topic, txn(1, 0, b"open"))  # 1: never ended here
        await append(leader, topic, txn(2, 0, b"aborted"))  # 2
        await end_txn(leader, topic, 2, commit=False)  # 3
        await append(leader, topic, plain(b"p1"))  # 4
        followers = [b for b in brokers if b is not leader]

        def followers_know_it() -> bool:
            for broker in followers:
                log = broker.replica_manager.partitions[(topic, 0)].log
                if log.log_end_offset != 5 or log.producer_state.ongoing != {1: 1}:
                    return False
            return True

        await wait_until(followers_know_it, message="followers replicated the transactions")
        for broker in followers:
            log = broker.replica_manager.partitions[(topic, 0)].log
            assert log.aborted_transactions(0, 5) == [(2, 2)]
        await leader.stop()
        alive = followers

        def new_leader() -> Broker | None:
            return leader_of(alive, topic)

        await wait_until(lambda: new_leader() is not None, timeout=20, message="a new leader")
        successor = new_leader()
        assert successor is not None
        partition = successor.replica_manager.partitions[(topic, 0)]
        await wait_until(lambda: partition.high_watermark == 5, message="the high watermark")
        assert partition.last_stable_offset == 1
        assert await read_async(alive, topic, "read_committed") == ([b"p0"], 1)
        await end_txn(successor, topic, 1, commit=True)
        committed = await read_async(alive, topic, "read_committed")
        assert committed == ([b"p0", b"open", b"p1"], 6)
        uncommitted = await read_async(alive, topic, "read_uncommitted")
        assert uncommitted == ([b"p0", b"open", b"aborted", b"p1"], 6)
