"""Unmodified Kafka clients (kafka-python, confluent-kafka, aiokafka) against a replicated
in-process cluster on Kafka's wire protocol, on the same port as ours.

The synchronous clients run in a worker thread while the brokers serve on the test's
event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest
from prometheus_client import generate_latest

from purgatory.broker.config.definitions import BY_NAME
from purgatory.broker.server import Broker
from purgatory.clients.admin import AdminClient
from purgatory.clients.consumer import Consumer
from purgatory.clients.producer import Producer
from purgatory.testing.cluster import metric_samples
from tests.support import bootstrap, running_cluster, wait_until

T = TypeVar("T")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(
        3, **{"default.replication.factor": 3, "min.insync.replicas": 2}
    ) as b:
        yield b


async def in_thread(work: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, work, *args)


async def create(brokers: list[Broker], topic: str, partitions: int = 3, **configs: str) -> None:
    admin = AdminClient(bootstrap(brokers))
    try:
        await admin.create_topic(topic, partitions, 3, configs)
        await wait_until(
            lambda: all(
                topic in b.metadata.topics
                and all((topic, p) in b.replica_manager.partitions for p in range(partitions))
                for b in brokers
            ),
            message=f"{topic} on every broker",
        )
    finally:
        await admin.close()


# -- kafka-python -------------------------------------------------------------------------------


def kafka_python_round_trip(servers: str, topic: str, codec: str | None) -> list[Any]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=servers, acks="all", compression_type=codec)
    futures = [
        producer.send(
            topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)], partition=i % 3
        )
        for i in range(30)
    ]
    producer.flush()
    assert all(f.get(timeout=10).offset >= 0 for f in futures)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 30 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend((r.partition, r.offset, r.key, r.value, r.headers) for r in records)
    consumer.close()
    return got


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
async def test_kafka_python_produces_with_acks_all_and_reads_everything_back(
    brokers: list[Broker], codec: str | None
) -> None:
    await create(brokers, "kp")
    got = await in_thread(kafka_python_round_trip, bootstrap(brokers), "kp", codec)
    assert sorted((p, k, v, h) for p, _, k, v, h in got) == sorted(
        (i % 3, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(30)
    )
    for p in range(3):  # consecutive offsets from 0 in every partition
        assert sorted(o for q, o, *_ in got if q == p) == list(range(10))


def kafka_python_offsets(servers: str, topic: str) -> dict[str, Any]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(bootstrap_servers=servers, acks="all")
    for i in range(5):
        producer.send(topic, value=b"%d" % i, partition=0, timestamp_ms=1_000_000 + i * (-1) ** i)
    producer.flush()
    producer.close()
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id="manual", enable_auto_commit=False)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(3, "note", -1)})
    out = {
        "committed": consumer.committed(tp),
        "earliest": consumer.beginning_offsets([tp])[tp],
        "latest": consumer.end_offsets([tp])[tp],
        "by_time": consumer.offsets_for_times({tp: 1_000_001})[tp].offset,
    }
    consumer.close()
    return out


async def test_kafka_python_commits_fetches_and_lists_offsets(brokers: list[Broker]) -> None:
    await create(brokers, "offsets", partitions=1)
    out = await in_thread(kafka_python_offsets, bootstrap(brokers), "offsets")
    # Timestamps 1000000, 999999, 1000002, 999997, 1000004: the first at or after 1000001.
    assert out == {"committed": 3, "earliest": 0, "latest": 5, "by_time": 2}


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------


def confluent_round_trip(servers: str, topic: str, codec: str) -> dict[str, Any]:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer as CKProducer
    from confluent_kafka import TopicPartition

    producer = CKProducer(
        {
            "bootstrap.servers": servers,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    delivered: list[Any] = []
    for i in range(60):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 3,
            on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
        )
    assert producer.flush(20) == 0
    consumer = CKConsumer(
        {"bootstrap.servers": servers, "group.id": "ck", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 60 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.key(), msg.value()))
    consumer.commit(offsets=[TopicPartition(topic, p, 20) for p in range(3)], asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    watermarks = consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10)
    consumer.close()
    return {
        "errors": [e for e, *_ in delivered if e is not None],
        "got": got,
        "committed": [c.offset for c in committed],
        "watermarks": watermarks,
    }


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_confluent_idempotent_producer_and_consumer_with_manual_assignment(
    brokers: list[Broker], codec: str
) -> None:
    await create(brokers, "ck")
    out = await in_thread(confluent_round_trip, bootstrap(brokers), "ck", codec)
    assert out["errors"] == []
    assert sorted(out["got"]) == sorted((i % 3, b"k%d" % i, b"v%d" % i) for i in range(60))
    assert out["committed"] == [20, 20, 20]  # committed to three partitions led by three brokers
    assert out["watermarks"] == (0, 20)


# -- aiokafka ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
async def test_aiokafka_produces_idempotently_and_consumes(
    brokers: list[Broker], codec: str | None
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    await create(brokers, "aio", partitions=1)
    servers = bootstrap(brokers)
    producer = AIOKafkaProducer(
        bootstrap_servers=servers, enable_idempotence=True, compression_type=codec
    )
    await producer.start()
    sent = [await producer.send_and_wait("aio", b"v%d" % i, key=b"k") for i in range(10)]
    await producer.stop()
    assert [m.offset for m in sent] == list(range(10))
    consumer = AIOKafkaConsumer(bootstrap_servers=servers, group_id="aio", enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition("aio", 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    async with asyncio.timeout(20):
        while len(got) < 10:
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                got.extend(r.value for r in records)
    await consumer.commit({tp: 10})
    assert await consumer.committed(tp) == 10
    await consumer.stop()
    assert got == [b"v%d" % i for i in range(10)]


# -- admin clients: partitions and configs ------------------------------------------------------


def kafka_python_admin(servers: str, topic: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_partitions({topic: 5})
        partitions = admin.describe_topics([topic])[0]["partitions"]
        configs = admin.describe_configs(
            [ConfigResource("TOPIC", topic), ConfigResource("BROKER", "1")],
            include_synonyms=True,
            config_filter="all",
        )
    finally:
        admin.close()
    return {"partitions": len(partitions), "configs": configs}


async def test_kafka_python_admin_adds_partitions_and_describes_configs(
    brokers: list[Broker],
) -> None:
    await create(brokers, "kadm", partitions=2, **{"retention.ms": "600000"})
    out = await in_thread(kafka_python_admin, bootstrap(brokers), "kadm")
    assert out["partitions"] == 5
    await wait_until(
        lambda: all(len(b.metadata.topics["kadm"].partitions) == 5 for b in brokers),
        message="five partitions on every broker",
    )
    topic = out["configs"]["topic"]["kadm"]
    assert topic["retention.ms"]["value"] == "600000"
    assert topic["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # Kafka lists no broker synonym before log.retention.ms itself, which has no default
    # (the default, log.retention.hours, is left out).
    assert [s["name"] for s in topic["retention.ms"]["synonyms"]] == ["retention.ms"]
    # Unset: follows the broker config it defaults from (min.insync.replicas=2 is --set).
    assert topic["min.insync.replicas"]["value"] == "2"
    assert topic["min.insync.replicas"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert topic["unclean.leader.election.enable"]["value"] == "false"
    broker = out["configs"]["broker"]["1"]
    assert broker["broker.id"]["value"] == "1" and broker["broker.id"]["read_only"]
    assert not broker["unclean.leader.election.enable"]["read_only"]


def confluent_admin(servers: str, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient as CKAdmin
    from confluent_kafka.admin import ConfigResource, NewPartitions, ResourceType

    admin = CKAdmin({"bootstrap.servers": servers})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=20)
    try:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=20)
        shrink = "accepted"
    except Exception as exc:  # the KafkaException carrying the broker's error
        shrink = exc.args[0].name()
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    [future] = described.values()
    entries = future.result(timeout=20)
    partitions = len(admin.list_topics(topic, timeout=20).topics[topic].partitions)
    return {
        "partitions": partitions,
        "shrink": shrink,
        "configs": {name: (e.value, e.source) for name, e in entries.items()},
    }


async def test_confluent_admin_adds_partitions_and_describes_configs(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import ConfigSource

    await create(brokers, "cadm", partitions=2, **{"max.message.bytes": "20000"})
    out = await in_thread(confluent_admin, bootstrap(brokers), "cadm")
    assert out["partitions"] == 4
    assert out["shrink"] == "INVALID_PARTITIONS"
    assert out["configs"]["max.message.bytes"] == ("20000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    default = str(BY_NAME["log.retention.bytes"].default)
    assert out["configs"]["retention.bytes"] == (default, ConfigSource.DEFAULT_CONFIG.value)


# -- purgatory semantics through Kafka's wire ----------------------------------------------------


def long_poll(servers: str, topic: str, produce: Callable[[], None]) -> float:
    """Seconds from producing a record to a waiting consumer having it, with a long
    fetch.wait.max.ms: the parked fetch is woken by the append, not by MaxWait."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition

    consumer = CKConsumer(
        {
            "bootstrap.servers": servers,
            "group.id": "long",
            "fetch.wait.max.ms": 8000,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    assert consumer.poll(1.0) is None  # the consumer is parked on an empty partition now
    produced = time.monotonic()
    produce()
    msg = None
    while msg is None and time.monotonic() - produced < 30:
        msg = consumer.poll(0.1)
    elapsed = time.monotonic() - produced
    consumer.close()
    assert msg is not None and msg.value() == b"late"
    return elapsed


async def test_a_long_poll_on_kafkas_wire_is_woken_by_the_append(brokers: list[Broker]) -> None:
    await create(brokers, "poll", partitions=1)
    loop = asyncio.get_running_loop()
    producer = Producer(bootstrap(brokers), acks=1)
    await producer.start()

    def produce() -> None:
        asyncio.run_coroutine_threadsafe(producer.send_and_wait("poll", b"late"), loop).result(10)

    try:
        elapsed = await in_thread(long_poll, bootstrap(brokers), "poll", produce)
    finally:
        await producer.close()
    # librdkafka's own mock answers empty fetches at MaxWait (8 s here); a parked fetch
    # completes on the append. The bound is far from both, so load cannot flake it.
    assert elapsed < 4.0


# -- one log, two protocols ----------------------------------------------------------------------


def kafka_python_reads(servers: str, topic: str, n: int) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend((r.offset, r.timestamp, r.key, r.value, r.headers) for r in records)
    consumer.close()
    return got


def kafka_python_writes(servers: str, topic: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, acks="all", compression_type="zstd")
    for i in range(3):
        producer.send(
            topic,
            key=b"kafka",
            value=b"%d" % i,
            headers=[("from", b"kafka")],
            partition=0,
            timestamp_ms=7_000 + i,
        )
    producer.flush()
    producer.close()


async def test_records_cross_protocols_with_keys_values_headers_and_timestamps(
    brokers: list[Broker],
) -> None:
    await create(brokers, "both", partitions=1)
    servers = bootstrap(brokers)
    async with Producer(servers, acks=-1) as producer:
        for i in range(3):
            await producer.send_and_wait(
                "both",
                b"%d" % i,
                key=b"ours",
                headers=[("from", b"ours")],
                timestamp_ms=5_000 + i,
                partition=0,
            )
    await in_thread(kafka_python_writes, servers, "both")
    kafka_view = await in_thread(kafka_python_reads, servers, "both", 6)
    assert kafka_view == [
        (i, 5_000 + i, b"ours", b"%d" % i, [("from", b"ours")]) for i in range(3)
    ] + [(3 + i, 7_000 + i, b"kafka", b"%d" % i, [("from", b"kafka")]) for i in range(3)]
    ours: list[Any] = []
    async with Consumer(
        servers, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        consumer.assign([("both", 0)])
        async with asyncio.timeout(20):
            while len(ours) < 6:
                ours.extend(await consumer.poll(timeout_ms=500))
    assert [
        (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in ours
    ] == kafka_view


async def test_kafka_requests_are_counted_with_their_listener_and_client_software(
    brokers: list[Broker],
) -> None:
    from aiokafka import AIOKafkaProducer

    await create(brokers, "seen", partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap(brokers))
    await producer.start()
    await producer.send_and_wait("seen", b"x", partition=0)
    samples: dict[Any, float] = {}
    for b in brokers:
        text = generate_latest(b.metrics.registry).decode()
        samples |= {k: v for k, v in metric_samples(text).items() if v}
    await producer.stop()
    assert any(
        name == "purgatory_requests_total"
        and ("listener", "PLAINTEXT") in labels
        and ("request", "Produce") in labels
        for name, labels in samples
    )
    assert any(
        name == "purgatory_request_total_local_time_seconds_count"
        and ("listener", "PLAINTEXT") in labels
        for name, labels in samples
    )


# -- tiered storage ------------------------------------------------------------------------------


async def test_a_kafka_client_backfills_a_tiered_topic_from_the_remote_tier() -> None:
    from tests.integration.test_remote_fetch import FAST_TIERING, tiered_topic

    async with running_cluster(1, **FAST_TIERING) as (broker,):
        await tiered_topic(broker, "cold", 1, 200)
        earliest_local = broker.replica_manager.partitions[("cold", 0)].log.local_log_start_offset
        got = await in_thread(kafka_python_reads, bootstrap([broker]), "cold", 200)
        remote_reads = broker.replica_manager.remote_fetch_purgatory.completions
        assert [value for _, _, _, value, _ in got] == [b"0-%d" % i * 8 for i in range(200)]
        assert (
            earliest_local > 0 and remote_reads > 0
        )  # the first offsets came from the remote tier
