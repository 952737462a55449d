"""Kafka's topic-name collisions ('.' against '_') through real clients: CreateTopics on
Kafka's wire (confluent-kafka's AdminClient) and ours, and auto-creation by a producer
(kafka-python), all refused by the controller with Kafka's error and message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from purgatory.broker.server import Broker
from purgatory.clients.admin import AdminClient
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode
from tests.support import bootstrap, running_cluster

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(1) as b:
        yield b


def confluent_creates(servers: str, *names: str) -> dict[str, tuple[str, str] | None]:
    """Each topic created one request after the other: None, or (error name, message)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as CKAdmin
    from confluent_kafka.cimpl import NewTopic

    admin = CKAdmin({"bootstrap.servers": servers})
    out: dict[str, tuple[str, str] | None] = {}
    for name in names:
        try:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=20)
            out[name] = None
        except KafkaException as exc:
            error = exc.args[0]
            out[name] = (error.name(), error.str())
    return out


def kafka_python_auto_creates(servers: str, topic: str) -> str:
    """What a kafka-python producer (auto-creating, as by default) gets for ``topic``."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=servers, max_block_ms=10000)
    try:
        producer.send(topic, b"value").get(timeout=10)
        return "sent"
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        producer.close()


async def test_a_kafka_admin_client_gets_invalid_topic_with_kafkas_message(
    brokers: list[Broker],
) -> None:
    out = await asyncio.to_thread(confluent_creates, bootstrap(brokers), "orders_eu", "orders.eu")
    assert out == {
        "orders_eu": None,
        # librdkafka names INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION
        "orders.eu": (
            "TOPIC_EXCEPTION",
            "Topic 'orders.eu' collides with existing topic: orders_eu",
        ),
    }
    assert sorted(brokers[0].metadata.topics) == ["orders_eu"]


async def test_our_protocol_refuses_the_collision_the_same_way(brokers: list[Broker]) -> None:
    async with AdminClient(bootstrap(brokers)) as admin:
        await admin.create_topic("clicks.raw", 1, 1)
        [result] = await admin.create_topics([m.CreatableTopic("clicks_raw", 1, 1)])
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "Topic 'clicks_raw' collides with existing topic: clicks.raw",
    )
    assert "clicks_raw" not in brokers[0].metadata.topics


async def test_auto_creation_is_refused_too(brokers: list[Broker]) -> None:
    async with AdminClient(bootstrap(brokers)) as admin:
        await admin.create_topic("audit_log", 1, 1)
    got = await asyncio.to_thread(kafka_python_auto_creates, bootstrap(brokers), "audit.log")
    assert got == "InvalidTopicError"
    assert sorted(brokers[0].metadata.topics) == ["audit_log"]
