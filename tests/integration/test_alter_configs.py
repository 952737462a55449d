"""Config changes through Kafka's API (AlterConfigs 33, IncrementalAlterConfigs 44) with
unmodified Kafka clients against a replicated in-process cluster: each change goes to the
active controller, is held in the metadata log as ConfigRecords, and every broker applies
it when it replays them, so DescribeConfigs on any broker shows it and the logs obey it.

The synchronous clients run in a worker thread while the brokers serve on the test's
event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.api.kafka.configs import ConfigApis
from purgatory.broker.server import Broker
from purgatory.protocol.api import ApiKey
from tests.integration.test_topic_configs import in_thread
from tests.kafka_wire import KafkaWire, request, schema
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **{"default.replication.factor": 3}) as b:
        yield b


async def topic_on_every_broker(brokers: list[Broker], topic: str) -> None:
    await wait_until(
        lambda: all(
            len(b.replica_manager.partitions) and topic in b.metadata.topics for b in brokers
        ),
        message=f"{topic} on every broker",
    )


def confluent_create(servers: str, topic: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    [future] = admin.create_topics([NewTopic(topic, 1, 3, config=configs or {})]).values()
    future.result(timeout=20)


def confluent_incremental(
    servers: str,
    topic: str,
    ops: list[tuple[str, str, str | None]],
    validate_only: bool = False,
    broker: bool = False,
) -> Any:
    """Apply (name, SET|DELETE|APPEND|SUBTRACT, value) ops to a topic (``broker``: to the
    broker of that id); the error of the resource, if any, as (name, message)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": servers})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType[op])
        for name, op, value in ops
    ]
    kind = ResourceType.BROKER if broker else ResourceType.TOPIC
    resource = ConfigResource(kind, topic, incremental_configs=entries)
    [future] = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    try:
        future.result(timeout=20)
    except KafkaException as exc:
        error = exc.args[0]
        return error.name(), error.str()
    return None


def confluent_broker_change(
    servers: str, broker: str, ops: list[tuple[str, str, str | None]]
) -> tuple[str, str] | None:
    result: tuple[str, str] | None = confluent_incremental(servers, broker, ops, False, True)
    return result


def confluent_describe(
    server: str, topic: str, name: str, broker: bool = False
) -> tuple[str, int, list[Any]]:
    """(value, source, synonyms as (name, value, source)) of a topic's config (``broker``:
    of the broker of that id), asked of one broker."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": server})
    resource = ConfigResource(ResourceType.BROKER if broker else ResourceType.TOPIC, topic)
    [future] = admin.describe_configs([resource], request_timeout=20).values()
    entry = future.result(timeout=20)[name]
    return (
        entry.value,
        entry.source,
        [(s.name, s.value, s.source) for s in entry.synonyms.values()],
    )


def one_broker(broker: Broker) -> str:
    return bootstrap([broker])


async def test_incremental_alter_configs_changes_retention_ms_on_every_broker(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import ConfigSource

    servers = bootstrap(brokers)
    await in_thread(confluent_create, servers, "orders")
    await topic_on_every_broker(brokers, "orders")
    assert (
        await in_thread(
            confluent_incremental, servers, "orders", [("retention.ms", "SET", "60000")]
        )
        is None
    )
    for broker in brokers:
        value, source, _ = await in_thread(
            confluent_describe, one_broker(broker), "orders", "retention.ms"
        )
        assert (value, source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        [partition] = [p for k, p in broker.replica_manager.partitions.items() if k[0] == "orders"]
        assert partition.log.config.retention_ms == 60000
    # The record is in the metadata log: every broker's image holds it.
    assert all(b.metadata.topics["orders"].configs["retention.ms"] == "60000" for b in brokers)
    # DELETE puts the broker's default back; APPEND works on a LIST config.
    assert (
        await in_thread(
            confluent_incremental,
            servers,
            "orders",
            [("retention.ms", "DELETE", None), ("cleanup.policy", "APPEND", "compact")],
        )
        is None
    )
    for broker in brokers:
        configs = broker.metadata.topics["orders"].configs
        assert "retention.ms" not in configs
        assert configs["cleanup.policy"] == "delete,compact"


async def test_bad_values_are_refused_in_kafkas_words_and_validate_only_changes_nothing(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(confluent_create, servers, "strict")
    refused = await in_thread(
        confluent_incremental, servers, "strict", [("retention.ms", "SET", "soon")]
    )
    assert refused == (
        "INVALID_CONFIG",
        "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    )
    refused = await in_thread(
        confluent_incremental, servers, "strict", [("retention.ms", "APPEND", "5")]
    )
    assert refused == (
        "INVALID_CONFIG",
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )
    refused = await in_thread(
        confluent_incremental, servers, "missing", [("retention.ms", "SET", "5")]
    )
    assert refused is not None and refused == (
        "UNKNOWN_TOPIC_OR_PART",
        "The topic 'missing' does not exist.",
    )
    ok = await in_thread(
        confluent_incremental, servers, "strict", [("max.message.bytes", "SET", "2048")], True
    )
    assert ok is None
    assert all("max.message.bytes" not in b.metadata.topics["strict"].configs for b in brokers)


def confluent_alter_configs(servers: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": servers})
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
    [future] = admin.alter_configs([resource]).values()
    future.result(timeout=20)


def kafka_python_alter_configs(
    servers: str, topic: str, configs: dict[str, str], incremental: bool
) -> Any:
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return admin.alter_configs(
            [ConfigResource("TOPIC", topic, configs=configs)], incremental=incremental
        )
    finally:
        admin.close()


async def test_alter_configs_replaces_a_topics_whole_set_of_configs(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(
        confluent_create, servers, "legacy", {"retention.ms": "1000", "segment.ms": "5000"}
    )
    await topic_on_every_broker(brokers, "legacy")
    await in_thread(confluent_alter_configs, servers, "legacy", {"max.message.bytes": "4096"})
    for broker in brokers:
        assert broker.metadata.topics["legacy"].configs == {"max.message.bytes": "4096"}
        [partition] = [p for k, p in broker.replica_manager.partitions.items() if k[0] == "legacy"]
        assert partition.max_message_bytes == 4096
    await in_thread(
        kafka_python_alter_configs,
        servers,
        "legacy",
        {"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"},
        False,
    )
    for broker in brokers:
        # (kafka-python's AlterConfigs sends the configs already set along with the new)
        assert broker.metadata.topics["legacy"].configs == {
            "max.message.bytes": "4096",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",
        }
        [partition] = [p for k, p in broker.replica_manager.partitions.items() if k[0] == "legacy"]
        assert partition.min_insync_replicas == 2

    # kafka-python's default is IncrementalAlterConfigs: it adds to the set.
    await in_thread(kafka_python_alter_configs, servers, "legacy", {"retention.ms": "7000"}, True)
    for broker in brokers:
        assert broker.metadata.topics["legacy"].configs["retention.ms"] == "7000"
        assert len(broker.metadata.topics["legacy"].configs) == 4


# -- broker configs ---------------------------------------------------------------------------


async def set_cluster_default(broker: Broker, name: str, value: str) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of the cluster-wide default broker resource (named "",
    which librdkafka and kafka-python cannot name), on Kafka's wire: (error code, message)."""
    s = schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    body = request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=(
            s.AlterConfigsResource(
                resource_type=4,
                resource_name="",
                configs=(s.AlterableConfig(name=name, config_operation=0, value=value),),
            ),
        ),
        validate_only=False,
    )
    wire = await KafkaWire.open(broker.port)
    try:
        answer = await wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    finally:
        await wire.close()
    [result] = answer.responses
    return result.error_code.value, result.error_message


def partition_of(broker: Broker, topic: str) -> Any:
    [partition] = [p for k, p in broker.replica_manager.partitions.items() if k[0] == topic]
    return partition


async def test_a_broker_default_change_applies_to_topics_without_their_own_value(
    brokers: list[Broker],
) -> None:
    from confluent_kafka.admin import ConfigSource

    servers = bootstrap(brokers)
    await in_thread(confluent_create, servers, "follows")
    await in_thread(confluent_create, servers, "own", {"retention.ms": "5000"})
    await topic_on_every_broker(brokers, "own")
    assert await set_cluster_default(brokers[1], "log.retention.ms", "120000") == (0, None)
    await wait_until(
        lambda: all(partition_of(b, "follows").log.config.retention_ms == 120000 for b in brokers),
        message="the cluster default on every broker",
    )
    assert all(partition_of(b, "own").log.config.retention_ms == 5000 for b in brokers)
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    value, source, synonyms = await in_thread(
        confluent_describe, one_broker(brokers[1]), "follows", "retention.ms"
    )
    assert (value, source) == ("120000", default)
    assert synonyms[0] == ("log.retention.ms", "120000", default)
    # A broker's own value wins over the default; its synonyms list both, in Kafka's order.
    changed = await in_thread(
        confluent_broker_change, servers, "2", [("log.retention.ms", "SET", "180000")]
    )
    assert changed is None
    await wait_until(
        lambda: partition_of(brokers[2], "follows").log.config.retention_ms == 180000,
        message="broker 2's own value",
    )
    assert partition_of(brokers[0], "follows").log.config.retention_ms == 120000
    value, source, synonyms = await in_thread(
        confluent_describe, one_broker(brokers[2]), "2", "log.retention.ms", True
    )
    assert (value, source) == ("180000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # (librdkafka keeps one synonym per name; the whole chain, as the broker answers it:)
    [entry] = [e for e in ConfigApis(brokers[2]).broker_configs() if e.name == "log.retention.ms"]
    assert entry.synonyms == [
        ("log.retention.ms", "180000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.ms", "120000", default),
    ]
    # Deleted, it falls back to the cluster default.
    changed = await in_thread(
        confluent_broker_change, servers, "2", [("log.retention.ms", "DELETE", None)]
    )
    assert changed is None
    await wait_until(
        lambda: partition_of(brokers[2], "follows").log.config.retention_ms == 120000,
        message="broker 2 back on the default",
    )


async def test_a_config_kafka_does_not_change_dynamically_is_refused(
    brokers: list[Broker],
) -> None:
    refused = await in_thread(
        confluent_broker_change, bootstrap(brokers), "0", [("broker.id", "SET", "7")]
    )
    assert refused == ("INVALID_REQUEST", "Cannot update these configs dynamically: Set(broker.id)")
    assert brokers[0].broker_id == 0


async def test_a_change_survives_a_controller_failover(brokers: list[Broker]) -> None:
    servers = bootstrap(brokers)
    await in_thread(confluent_create, servers, "durable")
    await topic_on_every_broker(brokers, "durable")
    changed = await in_thread(
        confluent_incremental, servers, "durable", [("retention.ms", "SET", "90000")]
    )
    assert changed is None
    [active] = [b for b in brokers if b.controller is not None and b.controller.active]
    await active.stop()
    rest = [b for b in brokers if b is not active]
    await wait_until(
        lambda: any(b.controller is not None and b.controller.active for b in rest),
        message="a new active controller",
    )
    [leader] = [b for b in rest if b.controller is not None and b.controller.active]
    assert leader.controller is not None
    assert leader.controller.image.topics["durable"].configs["retention.ms"] == "90000"
    changed = await in_thread(
        confluent_incremental, bootstrap(rest), "durable", [("max.message.bytes", "SET", "3000")]
    )
    assert changed is None
    for broker in rest:
        assert broker.metadata.topics["durable"].configs == {
            "retention.ms": "90000",
            "max.message.bytes": "3000",
        }
        assert partition_of(broker, "durable").log.config.retention_ms == 90000
