"""Scenarios of topic configs: CreateTopics with the configs frameworks give their topics
(Kafka Streams' changelog and repartition topics, a compacted topic), bad values of
Kafka's types and ranges, and DescribeConfigs asked by name (with synonyms and types)."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import METADATA, create, scenario, topic_ready
from tests.support import STREAMS_CHANGELOG, STREAMS_REPARTITION

DESCRIBE_CONFIGS = 4
TOPIC = 2

# Asked of every topic by name: its own configs and defaults of every type (the defaults
# where Purgatory's differ on purpose, segment.bytes and retention.bytes, are left out).
ASKED = [
    "cleanup.policy",
    "compression.type",
    "compression.zstd.level",
    "retention.ms",
    "segment.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "unclean.leader.election.enable",
    "remote.storage.enable",
    "leader.replication.throttled.replicas",
    "max.message.bytes",
    "no.such.config",
]


def configs(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


async def describe(c: Client, label: str, topic: str, keys: list[str] | None) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS,
        resources=[{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": keys}],
        include_synonyms=True,
        include_documentation=False,
    )


@scenario
async def create_topics_with_kafka_streams_configs(c: Client) -> None:
    await create(
        c,
        "create",
        {"name": c.topic("changelog"), "configs": configs(STREAMS_CHANGELOG)},
        {"name": c.topic("repartition"), "configs": configs(STREAMS_REPARTITION)},
    )
    await topic_ready(c, c.topic("changelog"))
    await topic_ready(c, c.topic("repartition"))
    await describe(c, "describe_changelog", c.topic("changelog"), ASKED)
    await describe(c, "describe_repartition", c.topic("repartition"), ASKED)


@scenario
async def create_topics_with_compacted_and_log_append_time_configs(c: Client) -> None:
    topic = {
        "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd",
        "compression.zstd.level": "-5",
        "leader.replication.throttled.replicas": "*",
        "remote.storage.enable": "false",
    }
    await create(c, "create", {"name": c.topic(), "configs": configs(topic)})
    await topic_ready(c, c.topic())
    await describe(c, "describe", c.topic(), ASKED)
    await describe(c, "describe_nothing_known", c.topic(), ["no.such.config"])


@scenario
async def create_topics_bad_config_values(c: Client) -> None:
    bad = [
        ("cleanup.policy", "shred"),
        ("cleanup.policy", "compact,shred"),
        ("compression.type", "brotli"),
        ("compression.gzip.level", "0"),
        ("message.timestamp.type", "logappendtime"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.insync.replicas", "0"),
        ("retention.ms", "-2"),
        ("segment.ms", "0"),
        ("unclean.leader.election.enable", "yes"),
        ("leader.replication.throttled.replicas", "x"),
        ("message.downconversion.enable", "true"),
        ("message.timestamp.difference.max.ms", "1000"),
    ]
    for index, (name, value) in enumerate(bad):
        topic = {"name": c.topic(f"bad{index}"), "configs": [{"name": name, "value": value}]}
        await create(c, f"{name}={value}", topic)
    null = {"name": c.topic("null"), "configs": [{"name": "retention.ms", "value": None}]}
    await create(c, "null_value", null)
    lags = {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
    await create(c, "lags_out_of_order", {"name": c.topic("lags"), "configs": configs(lags)})


BROKER = 4
BROKER_ASKED = [
    "log.cleanup.policy",
    "compression.type",
    "compression.gzip.level",
    "log.message.timestamp.type",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.roll.ms",
    "log.roll.hours",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms",
    "log.preallocate",
    "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms",
    "message.max.bytes",
    "no.such.config",
]


@scenario
async def describe_broker_topic_defaults_by_name(c: Client) -> None:
    """The broker configs topic configs default from, as the broker describes them."""
    response = await c.until(
        ApiKey.METADATA,
        METADATA,
        lambda r: bool(r.brokers),
        topics=[],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    node = str(response.brokers[0].node_id)
    await c.call(
        "describe",
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS,
        resources=[
            {"resource_type": BROKER, "resource_name": node, "configuration_keys": BROKER_ASKED}
        ],
        include_synonyms=True,
        include_documentation=False,
    )
