"""Group configs (ConfigResource GROUP, KIP-848 and KIP-932's GroupConfig) through Kafka's API
with confluent-kafka's AdminClient against in-process brokers: IncrementalAlterConfigs goes to
the active controller and is held in the metadata log as ConfigRecords, DescribeConfigs on any
broker shows the group's values over the broker's, a value out of the broker's bounds is
refused with Kafka's message, and a consumer group's coordinator runs with its
consumer.session.timeout.ms and consumer.heartbeat.interval.ms.

The synchronous clients run in a worker thread while the brokers serve on the test's event
loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory.broker.coordinator.consumer_group import ConsumerGroup
from purgatory.broker.server import Broker
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.differential.harness import body
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until

# Bounds low enough for a session to expire within a test.
SHORT_BOUNDS = {
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 200,
}


def alter(servers: str, group: str, ops: list[tuple[str, str, str | None]]) -> Any:
    """IncrementalAlterConfigs of (name, SET|DELETE|APPEND, value) on GROUP ``group``; the
    resource's error as (code name, message), or None."""
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
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    [future] = admin.incremental_alter_configs([resource]).values()
    try:
        future.result(timeout=20)
    except KafkaException as exc:
        error = exc.args[0]
        return error.name(), error.str()
    return None


def describe(servers: str, group: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs of GROUP ``group``: name -> (value, source)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": servers})
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return {k: (v.value, v.source) for k, v in future.result(timeout=20).items()}


async def on_every_broker(brokers: list[Broker], group: str, name: str, value: str) -> None:
    await wait_until(
        lambda: all(b.metadata.group_config(group)[name] == value for b in brokers),
        message=f"{group}'s {name}={value} on every broker",
    )


async def test_a_groups_configs_are_altered_in_the_metadata_log_and_described_over_the_brokers() -> (
    None
):
    async with running_cluster(3) as brokers:
        servers = bootstrap(brokers)
        before = await asyncio.to_thread(describe, servers, "g1")
        assert before["share.auto.offset.reset"] == ("latest", 5)  # DEFAULT_CONFIG
        assert before["consumer.session.timeout.ms"] == ("45000", 5)
        assert len(before) == 7

        done = await asyncio.to_thread(
            alter,
            servers,
            "g1",
            [
                ("share.auto.offset.reset", "SET", "earliest"),
                ("consumer.session.timeout.ms", "SET", "50000"),
                ("share.isolation.level", "SET", "read_committed"),
            ],
        )
        assert done is None
        await on_every_broker(brokers, "g1", "share.auto.offset.reset", "earliest")
        after = await asyncio.to_thread(describe, servers, "g1")
        assert after["share.auto.offset.reset"] == ("earliest", 8)  # GROUP_CONFIG
        assert after["consumer.session.timeout.ms"] == ("50000", 8)
        assert after["share.isolation.level"] == ("read_committed", 8)
        assert after["share.record.lock.duration.ms"] == ("30000", 5)
        assert (await asyncio.to_thread(describe, servers, "g2"))["share.auto.offset.reset"] == (
            "latest",
            5,
        )

        deleted = await asyncio.to_thread(
            alter, servers, "g1", [("share.auto.offset.reset", "DELETE", None)]
        )
        assert deleted is None
        await on_every_broker(brokers, "g1", "share.auto.offset.reset", "latest")
        assert brokers[0].metadata.group_config("g1")["consumer.session.timeout.ms"] == "50000"


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        (
            [("consumer.session.timeout.ms", "SET", "44999")],
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            [("share.heartbeat.interval.ms", "SET", "16000")],
            "share.heartbeat.interval.ms must be less than or equal to "
            "group.share.max.heartbeat.interval.ms",
        ),
        (
            [("share.auto.offset.reset", "SET", "none")],
            "Invalid value none for configuration share.auto.offset.reset: Invalid value "
            "`none` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        (
            [("share.isolation.level", "SET", "READ_COMMITTED")],
            "Invalid value READ_COMMITTED for configuration share.isolation.level: String "
            "must be one of: read_committed, read_uncommitted",
        ),
        ([("unknown.config", "SET", "1")], "Unknown group config name: unknown.config"),
        (
            [("share.auto.offset.reset", "APPEND", "earliest")],
            "Can't APPEND to key share.auto.offset.reset because its type is not LIST.",
        ),
    ],
)
async def test_a_change_out_of_bounds_is_refused_whole_with_kafkas_message(
    ops: list[tuple[str, str, str | None]], expected: str
) -> None:
    async with running_cluster(1) as brokers:
        servers = bootstrap(brokers)
        ops = [("share.record.lock.duration.ms", "SET", "20000"), *ops]
        assert await asyncio.to_thread(alter, servers, "g", ops) == ("INVALID_CONFIG", expected)
        assert brokers[0].metadata.image.group_configs == {}


async def heartbeat(wire: KafkaWire, group: str, member: str, epoch: int) -> Any:
    request = body(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout=30_000,
        subscribed_topic_names=["nothing-here"] if epoch == 0 else None,
        topic_partitions=[] if epoch == 0 else None,
    )
    return await wire.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)


def member_ids(broker: Broker, group: str) -> set[str]:
    found = broker.group_coordinator.groups.get(group)
    return set(found.members) if isinstance(found, ConsumerGroup) else set()


async def test_a_consumer_group_runs_with_its_session_timeout_and_heartbeat_interval() -> None:
    async with running_cluster(1, **SHORT_BOUNDS) as brokers:
        servers = bootstrap(brokers)
        assert (
            await asyncio.to_thread(
                alter,
                servers,
                "short",
                [
                    ("consumer.session.timeout.ms", "SET", "1500"),
                    ("consumer.heartbeat.interval.ms", "SET", "300"),
                ],
            )
            is None
        )
        await on_every_broker(brokers, "short", "consumer.session.timeout.ms", "1500")
        wire = await KafkaWire.open(brokers[0].port)
        try:
            answers: dict[str, Any] = {}

            async def joined(group: str, member: str) -> bool:
                find = body(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[group])
                await wire.call(ApiKey.FIND_COORDINATOR, 4, find)  # (makes __consumer_offsets)
                answers[group] = await heartbeat(wire, group, member, 0)
                return bool(answers[group].error_code == ErrorCode.NONE)

            await wait_until(lambda: joined("short", "m-short"), message="short joined")
            await wait_until(lambda: joined("default", "m-default"), message="default joined")
            assert answers["short"].heartbeat_interval.total_seconds() * 1000 == 300
            assert answers["default"].heartbeat_interval.total_seconds() * 1000 == 5000
            assert member_ids(brokers[0], "short") == {"m-short"}
            # No more heartbeats: the short group's member is gone after 1.5 s; the other
            # group's (the broker's 45 s) is still there then.
            await wait_until(
                lambda: not member_ids(brokers[0], "short"),
                timeout=15,
                message="the short group's member fenced by its session",
            )
            assert member_ids(brokers[0], "default") == {"m-default"}
        finally:
            await wire.close()


async def test_purgatory_configs_alters_a_groups_configs_as_kafka_configs_does() -> None:
    from tests.integration.test_admin_http import purgatory_cli

    async with running_cluster(1) as brokers:
        server = ("--bootstrap-server", bootstrap(brokers))
        code, out = await purgatory_cli(
            "configs", "--entity-type", "groups", "--entity-name", "G", "--alter",
            "--add-config", "share.auto.offset.reset=earliest", *server,
        )  # fmt: skip
        assert code == 0, out
        assert "Completed updating config for group G." in out
        await on_every_broker(brokers, "G", "share.auto.offset.reset", "earliest")
        code, out = await purgatory_cli(
            "configs", "--entity-type", "groups", "--entity-name", "G", "--alter",
            "--add-config", "share.isolation.level=nope", *server,
        )  # fmt: skip
        assert code == 1
        assert "INVALID_CONFIG" in out and "String must be one of" in out
