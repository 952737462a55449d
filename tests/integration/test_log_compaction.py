"""Log compaction seen by an unmodified Kafka client (confluent-kafka): a compacted topic of
three in-process replicas, each cleaned by its own broker's log cleaner.

The synchronous client runs in a worker thread while the brokers serve on the test's event
loop. Waits poll the brokers' logs with a deadline; nothing sleeps a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from purgatory.broker.server import Broker
from purgatory.protocol.records import decode_records
from tests.support import bootstrap, running_cluster, wait_until

T = TypeVar("T")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOPIC = "compacted"
KEYS = 10
UPDATES = 5000
GONE = b"key-9"  # tombstoned after its updates
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


async def in_thread(work: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, work, *args)


def create(servers: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3, config=COMPACTED)]).values():
        future.result(timeout=20)


def produce(servers: str, records: list[tuple[bytes, bytes | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": servers, "acks": "all", "linger.ms": 5, "batch.size": 2048}
    )
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for key, value in records:
        producer.produce(TOPIC, value, key, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]


def read_all(servers: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the beginning to the end of the partition, as a consumer sees it."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    got: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return got
                continue
            got.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    raise AssertionError("the consumer did not reach the end of the partition")


def replica_records(broker: Broker) -> list[Any]:
    log = broker.replica_manager.partitions[(TOPIC, 0)].log
    return decode_records(b"".join(log.read(log.local_log_start_offset, 1 << 30)))


async def test_a_compacted_topic_keeps_each_keys_latest_value_and_forgets_tombstones() -> None:
    async with running_cluster(
        3, **{"default.replication.factor": 3, "log.cleaner.backoff.ms": 50}
    ) as brokers:
        servers = bootstrap(brokers)
        await in_thread(create, servers)
        await wait_until(
            lambda: all((TOPIC, 0) in b.replica_manager.partitions for b in brokers),
            message="the topic on every broker",
        )
        updates = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(UPDATES)]
        latest = {key: value for key, value in updates if key != GONE}
        # The tombstone, then updates to the other keys that close its segment.
        tail = [(b"key-%d" % (i % (KEYS - 1)), b"late-%d" % i) for i in range(300)]
        latest.update(tail)
        await in_thread(produce, servers, [*updates, (GONE, None), *tail])
        end = UPDATES + 1 + len(tail)
        await wait_until(
            lambda: all(
                b.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == end for b in brokers
            ),
            message="every record on every replica",
        )

        def cleaned() -> bool:
            for broker in brokers:
                records = replica_records(broker)
                if any(r.key == GONE for r in records) or len(records) > 300:
                    return False
            return True

        await wait_until(cleaned, timeout=30, message="every replica cleaned, the tombstone gone")
        for broker in brokers:  # every replica cleaned its own log; the end never moved
            assert broker.replica_manager.log_cleaner.cleanings >= 2
            assert broker.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == end

        seen = await in_thread(read_all, servers)
        offsets = [offset for offset, _, _ in seen]
        assert offsets == sorted(set(offsets)) and offsets[-1] == end - 1
        values = {key: value for _, key, value in seen}
        assert values == latest  # each key's latest value, and no tombstoned key
        assert GONE not in {key for _, key, _ in seen}
        assert len(seen) < 300  # few older records (those in the active segment)
        written = [*updates, (GONE, None), *tail]
        for offset, key, value in seen:  # each record at the offset it was written at
            assert (key, value) == written[offset]


def produce_at(servers: str, topic: str, records: list[tuple[bytes, bytes, int]]) -> None:
    """Records with the CreateTime timestamps given, acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0})
    for key, value, timestamp in records:
        producer.produce(topic, value, key, partition=0, timestamp=timestamp)
    assert producer.flush(30) == 0


async def test_segment_ms_rolls_a_compacted_topic_by_record_time_for_its_cleaner() -> None:
    # One segment.bytes would never fill: only segment.ms closes the segment to clean.
    async with running_cluster(1, **{"log.cleaner.backoff.ms": 50}) as brokers:
        servers = bootstrap(brokers)
        configs = {**COMPACTED, "segment.bytes": str(1 << 20), "segment.ms": "100"}

        def make() -> None:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": servers})
            topic = NewTopic("rolled", 1, 1, config=configs)
            for future in admin.create_topics([topic]).values():
                future.result(timeout=20)

        await in_thread(make)
        start = int(time.time() * 1000) - 10_000
        updates = [(b"k", b"old-%d" % i, start) for i in range(200)]
        await in_thread(produce_at, servers, "rolled", updates)
        log = brokers[0].replica_manager.partitions[("rolled", 0)].log
        assert len(log.segments) == 1
        # A record more than segment.ms (by its timestamp) past the segment's first rolls it.
        await in_thread(produce_at, servers, "rolled", [(b"k", b"new", start + 1_000)])
        assert [s.base_offset for s in log.segments] == [0, 200]
        await wait_until(
            lambda: (
                sum(len(s) for s in log.segments[:-1]) == 1
                and len(decode_records(b"".join(log.read(log.log_start_offset, 1 << 30)))) == 2
            ),
            timeout=20,
            message="the closed segment cleaned down to the key's last update in it",
        )
