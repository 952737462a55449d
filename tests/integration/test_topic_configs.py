"""Topics the frameworks create, through unmodified Kafka clients (confluent-kafka and
kafka-python) against a replicated in-process cluster: Kafka Streams' changelog and
repartition topics, Spring's ``TopicBuilder.compact()``, a LogAppendTime topic the leader
stamps, topics in a codec the leader recompresses into, Kafka's refusal of a bad config,
DescribeConfigs answering the names asked, and broker defaults set at start described as
Kafka describes them.

The synchronous clients run in a worker thread while the brokers serve on the test's
event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from purgatory.broker.server import Broker
from tests.support import (
    STREAMS_CHANGELOG,
    STREAMS_REPARTITION,
    bootstrap,
    running_cluster,
    wait_until,
)

T = TypeVar("T")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Spring Kafka's TopicBuilder.name(...).compact() and the configs a Connect-style
# compacted config topic is made with.
SPRING_COMPACT = {"cleanup.policy": "compact"}
CONNECT_CONFIG_TOPIC = {"cleanup.policy": "compact", "min.insync.replicas": "2"}


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **{"default.replication.factor": 3}) as b:
        yield b


async def in_thread(work: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, work, *args)


async def on_every_broker(brokers: list[Broker], *topics: str) -> None:
    await wait_until(
        lambda: all(t in b.metadata.topics for b in brokers for t in topics),
        message=f"{topics} on every broker",
    )


# -- confluent-kafka ----------------------------------------------------------------------------


def confluent_create_and_describe(servers: str, topics: dict[str, dict[str, str]]) -> Any:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient({"bootstrap.servers": servers})
    created = admin.create_topics(
        [NewTopic(name, 2, 3, config=configs) for name, configs in topics.items()]
    )
    for future in created.values():
        future.result(timeout=20)
    described = {}
    for name, configs in topics.items():
        [future] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
        entries = future.result(timeout=20)
        described[name] = {k: (e.value, e.source) for k, e in entries.items() if k in configs}
    return described


async def test_confluent_admin_creates_kafka_streams_and_spring_topics(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import ConfigSource

    topics = {
        "app-store-changelog": STREAMS_CHANGELOG,
        "app-agg-repartition": STREAMS_REPARTITION,
        "spring-compacted": SPRING_COMPACT,
        "connect-configs": CONNECT_CONFIG_TOPIC,
    }
    described = await in_thread(confluent_create_and_describe, bootstrap(brokers), topics)
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    for name, configs in topics.items():
        assert described[name] == {k: (v, dynamic) for k, v in configs.items()}, name
    await on_every_broker(brokers, *topics)
    assert brokers[0].metadata.topics["app-store-changelog"].configs["cleanup.policy"] == "compact"


def confluent_refused(servers: str, configs: dict[str, str]) -> tuple[str, str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    [future] = admin.create_topics([NewTopic("refused", 1, 1, config=configs)]).values()
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=20)
    error = caught.value.args[0]
    return error.name(), error.str()


async def test_a_bad_topic_config_is_refused_in_kafkas_words(brokers: list[Broker]) -> None:
    name, message = await in_thread(
        confluent_refused, bootstrap(brokers), {"cleanup.policy": "compact,shred"}
    )
    assert name == "INVALID_CONFIG"
    assert (
        "Invalid value shred for configuration cleanup.policy: String must be one of: "
        "compact, delete" in message
    )
    name, message = await in_thread(
        confluent_refused, bootstrap(brokers), {"message.downconversion.enable": "true"}
    )
    assert (name, message) == (
        "INVALID_CONFIG",
        "Unknown topic config name: message.downconversion.enable",
    )


# -- kafka-python -------------------------------------------------------------------------------


def kafka_python_create_and_describe_by_name(servers: str) -> Any:
    from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics(
            [
                NewTopic("kp-changelog", 1, 3, topic_configs=STREAMS_CHANGELOG),
                NewTopic("kp-repartition", 1, 3, topic_configs=STREAMS_REPARTITION),
            ]
        )
        asked = ["cleanup.policy", "retention.ms", "compression.type", "segment.bytes"]
        described = admin.describe_configs(
            [ConfigResource("TOPIC", "kp-repartition", configs=dict.fromkeys(asked))],
            include_synonyms=True,
            config_filter="all",
        )
    finally:
        admin.close()
    return described["topic"]["kp-repartition"]


async def test_kafka_python_creates_streams_topics_and_describe_answers_the_names_asked(
    brokers: list[Broker],
) -> None:
    described = await in_thread(kafka_python_create_and_describe_by_name, bootstrap(brokers))
    assert sorted(described) == [
        "cleanup.policy",
        "compression.type",
        "retention.ms",
        "segment.bytes",
    ]
    values = {name: entry["value"] for name, entry in described.items()}
    assert values == {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "segment.bytes": "52428800",
        "compression.type": "producer",
    }
    assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["compression.type"]["config_source"] == "DEFAULT_CONFIG"
    # Synonyms, most specific first: the topic's own value, then the broker's, as Kafka
    # lists them: none before log.retention.ms itself, which has no default (its default
    # comes from log.retention.hours).
    assert [(s["name"], s["value"]) for s in described["retention.ms"]["synonyms"]] == [
        ("retention.ms", "-1"),
    ]
    assert [s["name"] for s in described["compression.type"]["synonyms"]] == ["compression.type"]
    await on_every_broker(brokers, "kp-changelog", "kp-repartition")


# -- LogAppendTime ------------------------------------------------------------------------------


def log_append_time_round_trip(servers: str, topic: str) -> dict[str, Any]:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer
    from kafka import KafkaConsumer, TopicPartition

    reported: list[tuple[int, int]] = []
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    before = int(time.time() * 1000)
    for i in range(3):  # a create time of 1970: a LogAppendTime topic does not check it
        producer.produce(
            topic,
            b"v%d" % i,
            timestamp=1000 + i,
            on_delivery=lambda e, m: reported.append(m.timestamp()),
        )
    producer.flush(20)
    after = int(time.time() * 1000)
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "lat", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(seen) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.timestamp())
    consumer.close()
    kp = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    kp.assign([TopicPartition(topic, 0)])
    kp.seek_to_beginning()
    kp_seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(kp_seen) < 3 and time.monotonic() < deadline:
        for records in kp.poll(timeout_ms=500).values():
            kp_seen.extend((r.timestamp_type, r.timestamp) for r in records)
    kp.close()
    return {
        "window": (before, after),
        "log_append_type": TIMESTAMP_LOG_APPEND_TIME,
        "reported": reported,
        "seen": seen,
        "kafka_python": kp_seen,
    }


async def test_a_log_append_time_topic_is_stamped_with_the_brokers_time(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
        topic = NewTopic("stamped", 1, 3, config={"message.timestamp.type": "LogAppendTime"})
        admin.create_topics([topic])["stamped"].result(timeout=20)

    await in_thread(create)
    await on_every_broker(brokers, "stamped")
    out = await in_thread(log_append_time_round_trip, bootstrap(brokers), "stamped")
    low, high = out["window"]
    assert len(out["seen"]) == 3
    for kind, stamp in out["seen"]:  # never the producer's 1970 create time
        assert kind == out["log_append_type"]
        assert low <= stamp <= high
    # The produce response's log_append_time reaches the producer.
    assert all(kind == out["log_append_type"] and low <= t <= high for kind, t in out["reported"])
    assert [kind for kind, _ in out["kafka_python"]] == [1, 1, 1]  # LogAppendTime
    assert [t for _, t in out["kafka_python"]] == [t for _, t in out["seen"]]


# -- compression.type ---------------------------------------------------------------------------


def produce_gzip_and_consume(servers: str, topics: list[str]) -> dict[str, list[bytes]]:
    from confluent_kafka import Consumer
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, acks="all", compression_type="gzip")
    for topic in topics:
        for i in range(20):
            producer.send(topic, value=b"v%d-" % i + b"x" * 500, partition=0)
    producer.flush()
    producer.close()
    seen: dict[str, list[bytes]] = {t: [] for t in topics}
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "codecs", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(topics)
    deadline = time.monotonic() + 20
    while sum(map(len, seen.values())) < 20 * len(topics) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen[message.topic()].append(message.value())
    consumer.close()
    return seen


async def test_a_codec_topic_stores_batches_in_its_codec_and_clients_read_them(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    codecs = {"uncompressed": 0, "snappy": 2, "lz4": 3, "zstd": 4}

    def create() -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
        created = admin.create_topics(
            [NewTopic(f"in-{c}", 1, 3, config={"compression.type": c}) for c in codecs]
        )
        for future in created.values():
            future.result(timeout=20)

    await in_thread(create)
    topics = [f"in-{c}" for c in codecs]
    await on_every_broker(brokers, *topics)
    seen = await in_thread(produce_gzip_and_consume, bootstrap(brokers), topics)
    expected = [b"v%d-" % i + b"x" * 500 for i in range(20)]
    for codec, number in codecs.items():
        assert seen[f"in-{codec}"] == expected, codec
        for broker in brokers:  # the leader recompressed; followers hold its bytes
            log = broker.replica_manager.partitions[(f"in-{codec}", 0)].log
            stored = [batch for segment in log.segments for batch in segment.batches]
            assert stored and all(b[22] & 0x07 == number for b in stored), (codec, broker)


# -- broker defaults ----------------------------------------------------------------------------


def kafka_python_describe(servers: str, topic: str, names: list[str]) -> Any:
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        described = admin.describe_configs(
            [ConfigResource("TOPIC", topic, configs=dict.fromkeys(names))],
            include_synonyms=True,
            config_filter="all",
        )
    finally:
        admin.close()
    return described["topic"][topic]


async def test_a_topic_follows_the_broker_defaults_set_at_start_as_kafka_describes_them() -> None:
    overrides = {"log.cleanup.policy": "compact,delete", "log.retention.hours": "1"}
    async with running_cluster(1, **overrides) as brokers:
        from purgatory.clients.admin import AdminClient

        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("defaults", 1, 1)
        names = ["cleanup.policy", "retention.ms"]
        described = await in_thread(kafka_python_describe, bootstrap(brokers), "defaults", names)
        log = brokers[0].replica_manager.partitions[("defaults", 0)].log
    policy = described["cleanup.policy"]
    assert (policy["value"], policy["config_source"]) == ("compact,delete", "STATIC_BROKER_CONFIG")
    assert [(s["name"], s["value"], s["source"]) for s in policy["synonyms"]] == [
        ("log.cleanup.policy", "compact,delete", "STATIC_BROKER_CONFIG"),
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG"),
    ]
    # log.retention.hours=1 gives retention.ms; as Kafka, no synonym is listed before
    # log.retention.ms itself, so its source reads DEFAULT_CONFIG.
    retention = described["retention.ms"]
    assert (retention["value"], retention["config_source"]) == ("3600000", "DEFAULT_CONFIG")
    assert retention["synonyms"] == []
    assert log.config.retention_ms == 3_600_000  # and the log keeps an hour (policy: delete)


def kafka_python_timestamps(servers: str, topic: str, count: int) -> list[tuple[int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen.extend((r.timestamp_type, r.timestamp) for r in records)
    consumer.close()
    return seen


async def test_our_protocols_records_on_a_log_append_time_topic_carry_the_brokers_time(
    brokers: list[Broker],
) -> None:
    from purgatory.clients.admin import AdminClient
    from purgatory.clients.consumer import Consumer
    from purgatory.clients.producer import Producer

    servers = bootstrap(brokers)
    async with AdminClient(servers) as admin:
        await admin.create_topic("ours-stamped", 1, 3, {"message.timestamp.type": "LogAppendTime"})
    await on_every_broker(brokers, "ours-stamped")
    before = int(time.time() * 1000)
    async with Producer(servers, acks=-1, linger_ms=0) as producer:
        for i in range(3):
            await producer.send_and_wait("ours-stamped", b"v%d" % i, timestamp_ms=1000 + i)
    after = int(time.time() * 1000)
    async with Consumer(servers, auto_offset_reset="earliest", fetch_max_wait_ms=10) as consumer:
        consumer.assign([("ours-stamped", 0)])
        ours = await consumer.poll(timeout_ms=5000)
    assert len(ours) == 3 and all(before <= r.timestamp <= after for r in ours)
    theirs = await in_thread(kafka_python_timestamps, servers, "ours-stamped", 3)
    assert theirs == [(1, r.timestamp) for r in ours]  # LogAppendTime, the same time


def produce_gzip_once(servers: str, topic: str, value: bytes) -> str:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=servers, acks="all", compression_type="gzip", retries=0
    )
    try:
        producer.send(topic, value=value, partition=0).get(timeout=20)
        return "NONE"
    except Exception as exc:  # kafka-python's error for the broker's code
        return type(exc).__name__
    finally:
        producer.close()


async def test_a_batch_recompressed_past_max_message_bytes_is_refused(
    brokers: list[Broker],
) -> None:
    from purgatory.clients.admin import AdminClient

    async with AdminClient(bootstrap(brokers)) as admin:
        configs = {"compression.type": "uncompressed", "max.message.bytes": "2000"}
        await admin.create_topic("plain-small", 1, 3, configs)
    await on_every_broker(brokers, "plain-small")
    # 20 KB of zeros gzip to well under 2,000 bytes; stored plain they would not fit.
    refused = await in_thread(produce_gzip_once, bootstrap(brokers), "plain-small", bytes(20_000))
    assert refused == "MessageSizeTooLargeError"
    assert await in_thread(produce_gzip_once, bootstrap(brokers), "plain-small", b"ok") == "NONE"
