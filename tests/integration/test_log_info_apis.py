"""The read-only record APIs on the Kafka listener (broker/api/kafka/log_info.py), with
exact requests and with real clients: OffsetForLeaderEpoch after a leader change (KIP-320)
with its fencing, DescribeLogDirs, DescribeProducers and DescribeTopicPartitions' cursor."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.differential.harness import body
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until

OFFSET_FOR_LEADER_EPOCH = 4
DESCRIBE_LOG_DIRS = 4
DESCRIBE_PRODUCERS = 0
DESCRIBE_TOPIC_PARTITIONS = 0


async def call(broker: Broker, api_key: ApiKey, version: int, **values: Any) -> Any:
    wire = await KafkaWire.open(broker.port)
    try:
        return await wire.call(api_key, version, body(api_key, version, **values))
    finally:
        await wire.close()


async def create(broker: Broker, name: str, partitions: int = 1, rf: int = 1) -> None:
    answer = await call(
        broker,
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=10_000,
        validate_only=False,
    )
    assert answer.topics[0].error_code.value == 0, answer


async def produce(broker: Broker, topic: str, batch: bytes, partition: int = 0) -> Any:
    answer = await call(
        broker,
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    )
    return answer.responses[0].partition_responses[0]


def batch(*values: bytes, ts: int = 1_700_000_000_000, **producer: int) -> bytes:
    return kafka_records.encode(
        [(ts + i, None, v, []) for i, v in enumerate(values)],
        **producer,
    )


async def epoch_end(
    broker: Broker, topic: str, leader_epoch: int, current_leader_epoch: int = -1
) -> tuple[str, int, int]:
    answer = await call(
        broker,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        OFFSET_FOR_LEADER_EPOCH,
        replica_id=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": current_leader_epoch,
                        "leader_epoch": leader_epoch,
                    }
                ],
            }
        ],
    )
    p = answer.topics[0].partitions[0]
    return ErrorCode(p.error_code.value).name, p.leader_epoch, p.end_offset


async def new_leader_elected(brokers: list[Broker], topic: str, after_epoch: int) -> None:
    """Wait until every broker knows a live leader of ``topic``-0 newer than ``after_epoch``."""

    def elected() -> bool:
        state = brokers[0].metadata.partition(topic, 0)
        return (
            state is not None
            and state.leader_epoch > after_epoch
            and state.leader_id in brokers[0].metadata.live_brokers
            and all(b.metadata.partition(topic, 0) == state for b in brokers)
        )

    await wait_until(elected, message="a new leader")


def leader_of(brokers: list[Broker], topic: str) -> tuple[Broker, int]:
    """The broker leading ``topic``-0, and its leader epoch."""
    state = brokers[0].metadata.partition(topic, 0)
    assert state is not None
    return next(b for b in brokers if b.broker_id == state.leader_id), state.leader_epoch


async def fail_over(brokers: list[Broker], topic: str) -> Broker:
    """Stop the leader of ``topic``-0 (and forget it); the new leader, once all know it."""
    leader, epoch = leader_of(brokers, topic)
    await leader.stop()
    brokers.remove(leader)
    await new_leader_elected(brokers, topic, epoch)
    return leader_of(brokers, topic)[0]


def requests_served(brokers: list[Broker]) -> set[str]:
    """The Kafka APIs the brokers were sent (names, as in purgatory_requests_total)."""
    return {stats.name for b in brokers for stats in b.metrics._requests.values() if stats.count}


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------


@pytest.fixture
async def three() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, num_partitions=1) as brokers:
        yield brokers


async def test_offset_for_leader_epoch_says_where_each_epoch_ends_after_a_leader_change(
    three: list[Broker],
) -> None:
    await create(three[0], "t", rf=3)
    await wait_until(
        lambda: all(("t", 0) in b.replica_manager.partitions for b in three), message="replicas"
    )
    leader, before = leader_of(three, "t")
    assert (await produce(leader, "t", batch(b"a", b"b"))).error_code.value == 0
    await wait_until(
        lambda: all(b.replica_manager.partitions[("t", 0)].log.log_end_offset == 2 for b in three),
        message="replicated",
    )
    new_leader = await fail_over(three, "t")
    epoch = leader_of(three, "t")[1]
    follower = next(b for b in three if b is not new_leader)
    assert (await produce(new_leader, "t", batch(b"c"))).base_offset == 2

    # The old epoch ends where the new one's first record went; the new one at the log end.
    assert await epoch_end(new_leader, "t", before, epoch) == ("NONE", before, 2)
    assert await epoch_end(new_leader, "t", epoch, epoch) == ("NONE", epoch, 3)
    assert await epoch_end(new_leader, "t", epoch, -1) == ("NONE", epoch, 3)  # not checked
    # Epochs the log never saw: none after the latest, and none at all (-1).
    assert await epoch_end(new_leader, "t", epoch + 5, epoch) == ("NONE", -1, -1)
    assert await epoch_end(new_leader, "t", -1, epoch) == ("NONE", -1, -1)
    # Fenced by the asker's view of the leader epoch (Kafka's Partition.getLocalLog), on a
    # follower's replica too; the right epoch at a follower is NOT_LEADER_OR_FOLLOWER.
    stale = ("FENCED_LEADER_EPOCH", -1, -1)
    assert await epoch_end(new_leader, "t", before, before) == stale
    assert await epoch_end(new_leader, "t", epoch, epoch + 1) == ("UNKNOWN_LEADER_EPOCH", -1, -1)
    assert await epoch_end(follower, "t", before, before) == stale
    assert await epoch_end(follower, "t", epoch, epoch) == ("NOT_LEADER_OR_FOLLOWER", -1, -1)
    assert await epoch_end(new_leader, "nope", 0) == ("UNKNOWN_TOPIC_OR_PARTITION", -1, -1)


async def test_a_new_leader_s_epoch_ends_at_its_log_end_before_it_writes_anything(
    three: list[Broker],
) -> None:
    """Kafka's makeLeader puts the new epoch in the cache at once: a consumer asking about
    the current epoch of a leader that has not appended yet is told the log end."""
    await create(three[0], "quiet", rf=3)
    await wait_until(
        lambda: all(("quiet", 0) in b.replica_manager.partitions for b in three),
        message="replicas",
    )
    leader, epoch = leader_of(three, "quiet")
    assert await epoch_end(leader, "quiet", epoch) == ("NONE", epoch, 0)


async def test_a_confluent_consumer_validates_its_position_after_a_leader_change(
    three: list[Broker],
) -> None:
    """librdkafka sends OffsetForLeaderEpoch once it is advertised and a partition's leader
    epoch moves (KIP-320), and goes on reading without a reset."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    await create(three[0], "v", rf=3)
    await wait_until(
        lambda: all(("v", 0) in b.replica_manager.partitions for b in three), message="replicas"
    )
    servers = bootstrap(three)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "validating",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 200,
            "enable.auto.commit": False,
        }
    )
    producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": "all"})

    def send(value: bytes) -> None:
        producer.produce("v", value, partition=0)
        assert producer.flush(10) == 0

    def read(count: int) -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
        return got

    try:
        consumer.assign([confluent_kafka.TopicPartition("v", 0, 0)])
        await asyncio.to_thread(send, b"one")
        assert await asyncio.to_thread(read, 1) == [b"one"]
        await fail_over(three, "v")
        await asyncio.to_thread(send, b"two")
        assert await asyncio.to_thread(read, 1) == [b"two"]
    finally:
        await asyncio.to_thread(consumer.close)
    assert "OffsetForLeaderEpoch" in requests_served(three)


async def test_a_kafka_python_consumer_validates_its_position_after_a_leader_change(
    three: list[Broker],
) -> None:
    """kafka-python 3 validates its position too (its fetcher's KIP-320 path) once the
    partition's leader epoch moves, and reads on without a reset or a repeat."""
    consumer_module = pytest.importorskip("kafka")
    await create(three[0], "kp-v", rf=3)
    await wait_until(
        lambda: all(("kp-v", 0) in b.replica_manager.partitions for b in three),
        message="replicas",
    )
    consumer = await asyncio.to_thread(  # it bootstraps at once: not on the brokers' loop
        consumer_module.KafkaConsumer,
        bootstrap_servers=bootstrap(three),
        metadata_max_age_ms=200,
        enable_auto_commit=False,
    )
    partition = consumer_module.TopicPartition("kp-v", 0)

    def read(count: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend((r.offset, r.value) for r in records)
        return got

    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        await produce(leader_of(three, "kp-v")[0], "kp-v", batch(b"one"))
        assert await asyncio.to_thread(read, 1) == [(0, b"one")]
        new_leader = await fail_over(three, "kp-v")
        await produce(new_leader, "kp-v", batch(b"two"))
        assert await asyncio.to_thread(read, 1) == [(1, b"two")]
    finally:
        await asyncio.to_thread(consumer.close)
    assert "OffsetForLeaderEpoch" in requests_served(three)


# -- DescribeLogDirs, DescribeProducers, DescribeTopicPartitions -------------------------------


@pytest.fixture
async def one() -> AsyncIterator[Broker]:
    async with running_cluster(1, num_partitions=1) as brokers:
        yield brokers[0]


async def test_describe_log_dirs_reports_every_replica_in_one_in_memory_dir(one: Broker) -> None:
    await create(one, "a", partitions=2)
    await create(one, "b")
    await wait_until(lambda: len(one.replica_manager.partitions) >= 3, message="replicas")
    stored = batch(b"x" * 100, b"y")
    await produce(one, "a", stored, partition=1)
    answer = await call(
        one,
        ApiKey.DESCRIBE_LOG_DIRS,
        DESCRIBE_LOG_DIRS,
        topics=[{"topic": "a", "partitions": [0, 1, 7]}, {"topic": "gone", "partitions": [0]}],
    )
    assert answer.error_code.value == 0
    (result,) = answer.results
    assert result.log_dir == "memory:/broker-0" and result.error_code.value == 0
    (topic,) = result.topics  # partitions not held are left out, as Kafka does
    sizes = {
        p.partition_index: (p.partition_size, p.offset_lag, p.is_future_key)
        for p in topic.partitions
    }
    assert topic.name == "a" and sizes == {0: (0, 0, False), 1: (len(stored), 0, False)}
    assert result.total_bytes == one.config["log.memory.max.bytes"]
    assert result.usable_bytes == result.total_bytes - len(stored)

    every = await call(one, ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS, topics=None)
    assert {t.name for t in every.results[0].topics} >= {"a", "b"}


async def test_kafka_python_describes_log_dirs(one: Broker) -> None:
    admin_module = pytest.importorskip("kafka.admin")
    await create(one, "kp")
    await wait_until(lambda: ("kp", 0) in one.replica_manager.partitions, message="replica")
    await produce(one, "kp", batch(b"v"))

    def describe() -> Any:
        admin = admin_module.KafkaAdminClient(bootstrap_servers=bootstrap([one]))
        try:
            return admin.describe_log_dirs()
        finally:
            admin.close()

    answer = await asyncio.to_thread(describe)
    text = repr(answer)
    assert "memory:/broker-0" in text and "kp" in text, text


async def test_describe_producers_lists_each_idempotent_producer_of_a_partition(
    one: Broker,
) -> None:
    await create(one, "p", partitions=2)
    await wait_until(lambda: len(one.replica_manager.partitions) >= 2, message="replicas")
    await produce(one, "p", batch(b"a", b"b", producer_id=7, producer_epoch=3, base_sequence=0))
    last = batch(b"c", ts=1_700_000_000_500, producer_id=7, producer_epoch=3, base_sequence=2)
    await produce(one, "p", last)
    await produce(one, "p", batch(b"d", producer_id=9, producer_epoch=0, base_sequence=0))
    await produce(one, "p", batch(b"e"))  # not idempotent: not a producer the log keeps
    answer = await call(
        one,
        ApiKey.DESCRIBE_PRODUCERS,
        DESCRIBE_PRODUCERS,
        topics=[
            {"name": "p", "partition_indexes": [0, 1, 5]},
            {"name": "nope", "partition_indexes": [0]},
        ],
    )
    p0, p1, p5 = answer.topics[0].partitions
    producers = {
        s.producer_id: (
            s.producer_epoch,
            s.last_sequence,
            s.last_timestamp,
            s.coordinator_epoch,
            s.current_txn_start_offset,
        )
        for s in p0.active_producers
    }
    assert p0.error_code.value == 0
    assert producers == {7: (3, 2, 1_700_000_000_500, -1, -1), 9: (0, 0, 1_700_000_000_000, -1, -1)}
    assert (p1.error_code.value, p1.active_producers) == (0, ())
    assert p5.error_code.value == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answer.topics[1].partitions[0].error_code.value == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def describe_partitions(
    broker: Broker, names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> Any:
    return await call(
        broker,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        DESCRIBE_TOPIC_PARTITIONS,
        topics=[{"name": n} for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    )


def pages(answer: Any) -> tuple[list[tuple[str, list[int]]], tuple[str, int] | None]:
    listed = [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics]
    c = answer.next_cursor
    return listed, None if c is None else (c.topic_name, c.partition_index)


async def test_describe_topic_partitions_pages_through_topics_in_name_order_by_cursor(
    one: Broker,
) -> None:
    await create(one, "dtp-b", partitions=2)
    await create(one, "dtp-a", partitions=3)
    await wait_until(lambda: len(one.replica_manager.partitions) >= 5, message="replicas")
    names = ["dtp-b", "dtp-a", "dtp-missing"]
    first = await describe_partitions(one, names, 2)
    assert pages(first) == ([("dtp-a", [0, 1])], ("dtp-a", 2))
    second = await describe_partitions(one, names, 2, ("dtp-a", 2))
    assert pages(second) == ([("dtp-a", [2]), ("dtp-b", [0])], ("dtp-b", 1))
    third = await describe_partitions(one, names, 2, ("dtp-b", 1))
    assert pages(third) == ([("dtp-b", [1]), ("dtp-missing", [])], None)
    assert third.topics[1].error_code.value == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # A topic that fills the page exactly: the next one is where the cursor points.
    exact = await describe_partitions(one, names, 3)
    assert pages(exact) == ([("dtp-a", [0, 1, 2])], ("dtp-b", 0))

    a = first.topics[0]
    state = one.metadata.topics["dtp-a"]
    assert (a.error_code.value, a.topic_id.hex, a.is_internal) == (0, state.topic_id, False)
    p = a.partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (0, 0, (0,), (0,))
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ((), (), ())

    # No names: every topic, none missing; a cursor outside the names asked is refused.
    every = await describe_partitions(one, [], 2000)
    assert [t.name for t in every.topics] == sorted(one.metadata.topics)
    refused = await describe_partitions(one, ["dtp-b"], 10, ("dtp-a", 0))
    assert [(t.name, ErrorCode(t.error_code.value).name) for t in refused.topics] == [
        ("dtp-b", "INVALID_REQUEST")
    ]
    bad_index = await describe_partitions(one, ["dtp-a"], 10, ("dtp-a", -1))
    assert bad_index.topics[0].error_code.value == ErrorCode.INVALID_REQUEST


async def test_confluent_admin_describes_topics(one: Broker) -> None:
    """What confluent-kafka's describe_topics sends, and that it reads the answer."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    await create(one, "described", partitions=3)
    await wait_until(lambda: len(one.replica_manager.partitions) >= 3, message="replicas")

    def describe() -> Any:
        admin = AdminClient({"bootstrap.servers": bootstrap([one])})
        names = confluent_kafka.TopicCollection(["described"])
        return admin.describe_topics(names, request_timeout=10)["described"].result(timeout=15)

    topic = await asyncio.to_thread(describe)
    assert [p.id for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader.id == 0 and [r.id for r in p.isr] == [0] for p in topic.partitions)
    print("confluent-kafka describe_topics sent:", sorted(requests_served([one])))
