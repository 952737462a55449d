"""Scenarios of config changes (issue 45): IncrementalAlterConfigs of a topic (SET, DELETE,
APPEND, SUBTRACT, validate_only) and its refusals, AlterConfigs replacing a topic's set, and
the brokers' cluster-wide default (the resource named ""), each read back with
DescribeConfigs. The broker default is deleted again at the end, so later scenarios see
the brokers as they started. (The module's name sorts after cluster.py, whose Metadata of
every topic would otherwise list these topics, in Kafka's hash order.)"""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import create, scenario, topic_ready
from tests.differential.scenarios.topic_configs import BROKER, TOPIC, describe

INCREMENTAL_ALTER_CONFIGS = 1
ALTER_CONFIGS = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ASKED = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.ms"]


async def incremental(
    c: Client, label: str, resource_type: int, name: str, *ops: tuple[str, int, str | None],
    validate_only: bool = False,
) -> Any:  # fmt: skip
    configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]
    return await c.call(
        label,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS,
        resources=[{"resource_type": resource_type, "resource_name": name, "configs": configs}],
        validate_only=validate_only,
    )


@scenario
async def incremental_alter_configs_of_a_topic(c: Client) -> None:
    topic = c.topic()
    await create(c, "create", {"name": topic})
    await topic_ready(c, topic)
    await incremental(
        c,
        "set_and_append",
        TOPIC,
        topic,
        ("retention.ms", SET, "60000"),
        ("cleanup.policy", APPEND, "compact"),
        ("segment.ms", SET, "3600000"),
    )
    await describe(c, "described", topic, ASKED)
    await incremental(
        c, "delete_and_subtract", TOPIC, topic, ("segment.ms", DELETE, None),
        ("cleanup.policy", SUBTRACT, "delete"),
    )  # fmt: skip
    await incremental(
        c, "validate_only", TOPIC, topic, ("max.message.bytes", SET, "2048"), validate_only=True
    )
    await describe(c, "described_after", topic, ASKED)


@scenario
async def incremental_alter_configs_refused(c: Client) -> None:
    topic = c.topic()
    await create(c, "create", {"name": topic})
    await topic_ready(c, topic)
    await incremental(c, "bad_value", TOPIC, topic, ("retention.ms", SET, "soon"))
    await incremental(c, "append_to_a_long", TOPIC, topic, ("retention.ms", APPEND, "5"))
    await incremental(c, "unknown_config", TOPIC, topic, ("retention.mss", SET, "5"))
    await incremental(c, "unknown_topic", TOPIC, c.topic("none"), ("retention.ms", SET, "5"))
    await incremental(c, "null_set", TOPIC, topic, ("retention.ms", SET, None))
    await incremental(
        c, "lags_out_of_order", TOPIC, topic, ("min.compaction.lag.ms", SET, "10"),
        ("max.compaction.lag.ms", SET, "5"),
    )  # fmt: skip
    await incremental(c, "static_broker_config", BROKER, "", ("broker.id", SET, "7"))
    await describe(c, "unchanged", topic, ASKED)


@scenario
async def alter_configs_replaces_a_topics_configs(c: Client) -> None:
    topic = c.topic()
    own = [{"name": "retention.ms", "value": "1000"}, {"name": "segment.ms", "value": "5000"}]
    await create(c, "create", {"name": topic, "configs": own})
    await topic_ready(c, topic)
    await c.call(
        "alter",
        ApiKey.ALTER_CONFIGS,
        ALTER_CONFIGS,
        resources=[
            {
                "resource_type": TOPIC,
                "resource_name": topic,
                "configs": [{"name": "max.message.bytes", "value": "4096"}],
            }
        ],
        validate_only=False,
    )
    await describe(c, "described", topic, ASKED)


@scenario
async def incremental_alter_configs_of_the_brokers_default(c: Client) -> None:
    topic = c.topic()
    await create(c, "create", {"name": topic})
    await topic_ready(c, topic)
    await incremental(c, "set_default", BROKER, "", ("log.retention.ms", SET, "7200000"))
    # Kafka's broker applies a committed change in its own time: wait until it shows.
    await topic_retention(c, topic, "7200000")
    await c.call(
        "described_default",
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": BROKER, "resource_name": "", "configuration_keys": DEFAULT_ASKED}
        ],
        include_synonyms=True,
        include_documentation=False,
    )
    await describe(c, "topic_follows", topic, ["retention.ms"])
    await incremental(c, "delete_default", BROKER, "", ("log.retention.ms", DELETE, None))
    await topic_retention(c, topic, "604800000")
    await describe(c, "topic_back", topic, ["retention.ms"])


# The default broker resource asked by name: Kafka's test cluster also sets
# min.insync.replicas there, Purgatory's not.
DEFAULT_ASKED = ["log.retention.ms", "log.retention.bytes"]


async def topic_retention(c: Client, topic: str, value: str) -> None:
    """Wait (unrecorded) until the broker describes the topic's retention.ms as ``value``."""

    def shows(response: Any) -> bool:
        entries = response.results[0].configs
        return any(e.name == "retention.ms" and e.value == value for e in entries)

    await c.until(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        shows,
        resources=[
            {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": ["retention.ms"]}
        ],
        include_synonyms=False,
        include_documentation=False,
    )
