"""The group, offset and transaction APIs authorize where Kafka's KafkaApis does (issue 47,
broker/api/coordinator_acls.py), on Kafka's protocol and on ours: a principal without the
ACL gets Kafka's code (GROUP_, TOPIC_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and nothing
changes (no group joined, no offset committed or deleted, no transaction begun); once the
ACL exists the same request succeeds. Raw requests go over the PLAINTEXT listener, where
the broker sees User:ANONYMOUS; confluent-kafka's consumer group and transactional
producer authenticate with SASL PLAIN."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from purgatory.broker.security.authorizer.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from purgatory.broker.server import Broker, start_broker
from purgatory.clients.admin import AdminClient
from purgatory.clients.connection import Connection
from purgatory.protocol import acl_messages as am
from purgatory.protocol import group_messages as g
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.differential.harness import body
from tests.kafka_wire import KafkaWire
from tests.support import broker_config

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    + ";"
)
ANONYMOUS = "User:ANONYMOUS"
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class Secured:
    """A broker with Kafka's StandardAuthorizer, User:admin its super user."""

    def __init__(self, broker: Broker, admin: AdminClient) -> None:
        self.broker = broker
        self.admin = admin

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.ports['SASL_PLAINTEXT']}"

    async def allow(
        self, resource: ResourceType, name: str, operation: AclOperation, principal: str = ANONYMOUS
    ) -> None:
        """An ALLOW ACL, once this broker's authorizer holds it."""
        before = len(self.broker.metadata.image.acls.acls)
        acl = am.Acl(
            int(resource),
            name,
            int(PatternType.LITERAL),
            principal,
            "*",
            int(operation),
            int(AclPermissionType.ALLOW),
        )
        [result] = await self.admin.create_acls([acl])
        assert result.error_code == ErrorCode.NONE, result
        await until(lambda: len(self.broker.metadata.image.acls.acls) > before)

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Offsets committed as a group that only stores them (no ACL asked)."""
        result = self.broker.group_coordinator.offsets.commit_offsets(
            group, -1, "", None, {tp: (o, -1, None) for tp, o in offsets.items()}
        )
        if isinstance(result, asyncio.Future):
            result = await result
        assert set(result.values()) == {ErrorCode.NONE}

    def committed(self, group: str) -> dict[Any, Any]:
        code, offsets = self.broker.group_coordinator.offsets.fetch_offsets(group, None)
        assert code == ErrorCode.NONE
        return {tp: c.offset for tp, c in offsets.items() if c is not None}


async def until(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def secured_broker(*topics: str) -> AsyncIterator[Secured]:
    broker = await start_broker(
        broker_config(
            **{
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
            }
        )
    )
    try:
        bootstrap = f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"
        async with AdminClient(
            bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_username="admin",
            sasl_password=USERS["admin"],
        ) as admin:
            for topic in topics:
                await admin.create_topic(topic, partitions=1)
            # The coordinators' topics (made on first use), so the groups and ids below
            # have a coordinator.
            await until(
                lambda: (
                    broker.group_coordinator.find_coordinator("g")[0] == ErrorCode.NONE
                    and broker.transaction_coordinator.find_coordinator("tx")[0] == ErrorCode.NONE
                )
            )
            yield Secured(broker, admin)
    finally:
        await broker.stop()


async def kafka(wire: KafkaWire, api_key: ApiKey, version: int, **values: Any) -> Any:
    return await wire.call(api_key, version, body(api_key, version, **values))


def partition_codes(response: Any, field: str = "error_code") -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): getattr(p, field)
        for t in response.topics
        for p in t.partitions
    }


# -- Kafka's protocol ---------------------------------------------------------------------------


async def test_kafka_group_membership_needs_read_on_the_group() -> None:
    async with secured_broker("t") as secured:
        broker = secured.broker
        wire = await KafkaWire.open(broker.port)
        try:
            join = {
                "group_id": "g",
                "session_timeout": 10000,
                "rebalance_timeout": 10000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            }
            found = await kafka(wire, ApiKey.FIND_COORDINATOR, 3, key="g", key_type=0)
            assert found.error_code == GROUP_DENIED
            found = await kafka(
                wire, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["g"]
            )
            assert [c.error_code for c in found.coordinators] == [GROUP_DENIED]
            joined = await kafka(wire, ApiKey.JOIN_GROUP, 5, **join)
            assert joined.error_code == GROUP_DENIED
            member = {"group_id": "g", "generation_id": 1, "member_id": "m"}
            synced = await kafka(
                wire, ApiKey.SYNC_GROUP, 5, **member, protocol_type="consumer",
                protocol_name="range", assignments=[],
            )  # fmt: skip
            assert synced.error_code == GROUP_DENIED
            beat = await kafka(wire, ApiKey.HEARTBEAT, 4, **member)
            assert beat.error_code == GROUP_DENIED
            left = await kafka(
                wire, ApiKey.LEAVE_GROUP, 4, group_id="g", members=[{"member_id": "m"}]
            )
            assert (left.error_code, left.members) == (GROUP_DENIED, ())
            assert "g" not in broker.group_coordinator.groups

            # DESCRIBE (implied by READ) finds the coordinator; READ joins.
            await secured.allow(ResourceType.GROUP, "g", AclOperation.READ)
            found = await kafka(
                wire, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["g"]
            )
            assert [c.error_code for c in found.coordinators] == [ErrorCode.NONE]
            joined = await kafka(wire, ApiKey.JOIN_GROUP, 5, **join)
            assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
            joined = await kafka(
                wire, ApiKey.JOIN_GROUP, 5, **{**join, "member_id": joined.member_id}
            )
            assert joined.error_code == ErrorCode.NONE
            member = {
                "group_id": "g",
                "generation_id": joined.generation_id,
                "member_id": joined.member_id,
            }
            synced = await kafka(
                wire, ApiKey.SYNC_GROUP, 5, **member, protocol_type="consumer",
                protocol_name="range", assignments=[{"member_id": joined.member_id, "assignment": b"a"}],
            )  # fmt: skip
            assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"a")
            beat = await kafka(wire, ApiKey.HEARTBEAT, 4, **member)
            assert beat.error_code == ErrorCode.NONE
            left = await kafka(
                wire, ApiKey.LEAVE_GROUP, 4, group_id="g",
                members=[{"member_id": joined.member_id}],
            )  # fmt: skip
            assert left.error_code == ErrorCode.NONE
        finally:
            await wire.close()


async def test_kip_848_and_share_group_heartbeats_need_the_group_then_each_topic() -> None:
    """ConsumerGroupHeartbeat and ShareGroupHeartbeat: READ on the group, then DESCRIBE on
    each subscribed topic (TOPIC_AUTHORIZATION_FAILED naming the others); nothing joined
    until both are allowed."""
    async with secured_broker("t", "u") as secured:
        broker = secured.broker
        wire = await KafkaWire.open(broker.port)
        try:
            consumer = {
                "group_id": "g", "member_id": "m1", "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["t", "u"],
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [],
            }  # fmt: skip
            share = {
                "group_id": "s", "member_id": "m1", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": ["t", "u"],
            }  # fmt: skip
            beat = await kafka(wire, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, **consumer)
            assert beat.error_code == GROUP_DENIED
            beat = await kafka(wire, ApiKey.SHARE_GROUP_HEARTBEAT, 1, **share)
            assert beat.error_code == GROUP_DENIED

            await secured.allow(ResourceType.GROUP, "g", AclOperation.READ)
            await secured.allow(ResourceType.GROUP, "s", AclOperation.READ)
            await secured.allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE)
            for api_key, values in (
                (ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer),
                (ApiKey.SHARE_GROUP_HEARTBEAT, share),
            ):
                beat = await kafka(wire, api_key, 1, **values)
                assert beat.error_code == TOPIC_DENIED
                assert beat.error_message == "The following topics are not authorized: ['u']."
            assert "g" not in broker.group_coordinator.groups
            assert "s" not in broker.group_coordinator.groups

            await secured.allow(ResourceType.TOPIC, "u", AclOperation.DESCRIBE)
            await until(lambda: broker.group_coordinator.find_coordinator("s")[0] == 0)
            for api_key, values in (
                (ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer),
                (ApiKey.SHARE_GROUP_HEARTBEAT, share),
            ):
                beat = await kafka(wire, api_key, 1, **values)
                assert beat.error_code == ErrorCode.NONE, beat.error_message
        finally:
            await wire.close()


async def test_kafka_group_administration_needs_describe_or_delete_on_each_group() -> None:
    async with secured_broker("t") as secured:
        broker = secured.broker
        for group in ("g", "h"):  # two Empty groups, with an offset each
            await secured.commit(group, {("t", 0): 1})
        wire = await KafkaWire.open(broker.port)
        try:
            described = await kafka(
                wire,
                ApiKey.DESCRIBE_GROUPS,
                5,
                groups=["g", "h"],
                include_authorized_operations=False,
            )
            assert [x.error_code for x in described.groups] == [GROUP_DENIED] * 2
            listed = await kafka(wire, ApiKey.LIST_GROUPS, 4, states_filter=[])
            assert listed.groups == ()
            deleted = await kafka(wire, ApiKey.DELETE_GROUPS, 2, groups_names=["g", "h"])
            assert {r.group_id: r.error_code for r in deleted.results} == {
                "g": GROUP_DENIED,
                "h": GROUP_DENIED,
            }
            asked = [{"name": "t", "partitions": [{"partition_index": 0}]}]
            removed = await kafka(wire, ApiKey.OFFSET_DELETE, 0, group_id="g", topics=asked)
            assert (removed.error_code, removed.topics) == (GROUP_DENIED, ())
            assert secured.committed("g") == {("t", 0): 1}

            await secured.allow(ResourceType.GROUP, "g", AclOperation.DELETE)
            described = await kafka(
                wire,
                ApiKey.DESCRIBE_GROUPS,
                5,
                groups=["g", "h"],
                include_authorized_operations=False,
            )
            assert [x.error_code for x in described.groups] == [ErrorCode.NONE, GROUP_DENIED]
            listed = await kafka(wire, ApiKey.LIST_GROUPS, 4, states_filter=[])
            assert [x.group_id for x in listed.groups] == ["g"]
            # OffsetDelete: the group's DELETE, then READ on each topic.
            removed = await kafka(wire, ApiKey.OFFSET_DELETE, 0, group_id="g", topics=asked)
            assert partition_codes(removed) == {("t", 0): TOPIC_DENIED}
            assert secured.committed("g") == {("t", 0): 1}
            await secured.allow(ResourceType.TOPIC, "t", AclOperation.READ)
            removed = await kafka(wire, ApiKey.OFFSET_DELETE, 0, group_id="g", topics=asked)
            assert partition_codes(removed) == {("t", 0): ErrorCode.NONE}
            assert secured.committed("g") == {}
            deleted = await kafka(wire, ApiKey.DELETE_GROUPS, 2, groups_names=["g", "h"])
            assert {r.group_id: r.error_code for r in deleted.results} == {
                "g": ErrorCode.NONE,
                "h": GROUP_DENIED,
            }
            assert "h" in broker.group_coordinator.groups
            # DESCRIBE on the cluster lists every group.
            await secured.allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
            listed = await kafka(wire, ApiKey.LIST_GROUPS, 4, states_filter=[])
            assert [x.group_id for x in listed.groups] == ["h"]
        finally:
            await wire.close()


async def test_kafka_offsets_need_the_group_then_each_topic() -> None:
    async with secured_broker("t", "u") as secured:
        broker = secured.broker
        await secured.commit("g", {("u", 0): 7})
        wire = await KafkaWire.open(broker.port)
        commit = {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": n,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 3, "committed_metadata": None}
                    ],
                }
                for n in ("t", "u")
            ],
        }
        named = [{"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [0]}]
        try:
            committed = await kafka(wire, ApiKey.OFFSET_COMMIT, 8, **commit)
            assert set(partition_codes(committed).values()) == {GROUP_DENIED}
            fetched = await kafka(wire, ApiKey.OFFSET_FETCH, 7, group_id="g", topics=named)
            assert fetched.error_code == GROUP_DENIED
            fetched = await kafka(
                wire, ApiKey.OFFSET_FETCH, 8, groups=[{"group_id": "g", "topics": None}]
            )
            assert fetched.groups[0].error_code == GROUP_DENIED

            await secured.allow(ResourceType.GROUP, "g", AclOperation.READ)
            committed = await kafka(wire, ApiKey.OFFSET_COMMIT, 8, **commit)
            assert partition_codes(committed) == {("t", 0): TOPIC_DENIED, ("u", 0): TOPIC_DENIED}
            assert secured.committed("g") == {("u", 0): 7}
            fetched = await kafka(wire, ApiKey.OFFSET_FETCH, 7, group_id="g", topics=named)
            assert partition_codes(fetched) == {("t", 0): TOPIC_DENIED, ("u", 0): TOPIC_DENIED}
            # Fetching every offset leaves out the topics the principal may not describe.
            every = await kafka(
                wire, ApiKey.OFFSET_FETCH, 8, groups=[{"group_id": "g", "topics": None}]
            )
            assert (every.groups[0].error_code, every.groups[0].topics) == (ErrorCode.NONE, ())

            await secured.allow(ResourceType.TOPIC, "t", AclOperation.READ)
            committed = await kafka(wire, ApiKey.OFFSET_COMMIT, 8, **commit)
            assert partition_codes(committed) == {("t", 0): ErrorCode.NONE, ("u", 0): TOPIC_DENIED}
            assert secured.committed("g") == {("t", 0): 3, ("u", 0): 7}
            fetched = await kafka(wire, ApiKey.OFFSET_FETCH, 7, group_id="g", topics=named)
            assert partition_codes(fetched) == {("t", 0): ErrorCode.NONE, ("u", 0): TOPIC_DENIED}
            assert partition_codes(fetched, "committed_offset") == {("t", 0): 3, ("u", 0): -1}
            every = await kafka(
                wire, ApiKey.OFFSET_FETCH, 8, groups=[{"group_id": "g", "topics": None}]
            )
            assert [t.name for t in every.groups[0].topics] == ["t"]
        finally:
            await wire.close()


async def test_kafka_transactions_need_the_transactional_id_group_and_topics() -> None:
    async with secured_broker("t", "u") as secured:
        broker = secured.broker
        wire = await KafkaWire.open(broker.port)
        txn = {"transactional_id": "tx", "producer_id": 0, "producer_epoch": 0}
        add = {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": 0,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [
                {"name": "t", "partitions": [0]},
                {"name": "u", "partitions": [0]},
            ],
        }
        offsets = {
            **txn,
            "group_id": "g",
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}
                    ],
                }
            ],
        }

        def added_codes(response: Any) -> dict[tuple[str, int], int]:
            return {
                (t.name, p.partition_index): p.partition_error_code
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        try:
            found = await kafka(
                wire, ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["tx"]
            )
            assert [c.error_code for c in found.coordinators] == [TXN_DENIED]
            added = await kafka(wire, ApiKey.ADD_PARTITIONS_TO_TXN, 3, **add)
            assert set(added_codes(added).values()) == {TXN_DENIED}
            added = await kafka(wire, ApiKey.ADD_OFFSETS_TO_TXN, 3, **txn, group_id="g")
            assert added.error_code == TXN_DENIED
            ended = await kafka(wire, ApiKey.END_TXN, 3, **txn, committed=True)
            assert ended.error_code == TXN_DENIED
            committed = await kafka(wire, ApiKey.TXN_OFFSET_COMMIT, 3, **offsets)
            assert set(partition_codes(committed).values()) == {TXN_DENIED}
            described = await kafka(wire, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["tx"])
            assert [s.error_code for s in described.transaction_states] == [TXN_DENIED]

            # The id is the principal's (admin's producer began its transaction): now each
            # topic, then the group.
            await secured.allow(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
            started = await broker.transaction_coordinator.init_producer_id("tx", 60000, -1, -1)
            txn = {
                **txn,
                "producer_id": started.producer_id,
                "producer_epoch": started.producer_epoch,
            }
            add = {**add, "v3_and_below_producer_id": started.producer_id,
                   "v3_and_below_producer_epoch": started.producer_epoch}  # fmt: skip
            offsets = {**offsets, **txn}
            await secured.allow(ResourceType.TOPIC, "u", AclOperation.WRITE)
            added = await kafka(wire, ApiKey.ADD_PARTITIONS_TO_TXN, 3, **add)
            assert added_codes(added) == {
                ("t", 0): TOPIC_DENIED,
                ("u", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            }
            assert not broker.transaction_coordinator.state.transactions["tx"].partitions
            added = await kafka(wire, ApiKey.ADD_OFFSETS_TO_TXN, 3, **txn, group_id="g")
            assert added.error_code == GROUP_DENIED
            committed = await kafka(wire, ApiKey.TXN_OFFSET_COMMIT, 3, **offsets)
            assert set(partition_codes(committed).values()) == {GROUP_DENIED}
            listed = await kafka(wire, ApiKey.LIST_TRANSACTIONS, 1, state_filters=[],
                                 producer_id_filters=[], duration_filter=-1)  # fmt: skip
            assert [s.transactional_id for s in listed.transaction_states] == ["tx"]

            await secured.allow(ResourceType.TOPIC, "t", AclOperation.WRITE)
            await secured.allow(ResourceType.GROUP, "g", AclOperation.READ)
            added = await kafka(wire, ApiKey.ADD_PARTITIONS_TO_TXN, 3, **add)
            assert set(added_codes(added).values()) == {ErrorCode.NONE}
            added = await kafka(wire, ApiKey.ADD_OFFSETS_TO_TXN, 3, **txn, group_id="g")
            assert added.error_code == ErrorCode.NONE
            # TxnOffsetCommit reads each topic ("t": WRITE does not imply READ).
            committed = await kafka(wire, ApiKey.TXN_OFFSET_COMMIT, 3, **offsets)
            assert partition_codes(committed) == {("t", 0): TOPIC_DENIED}
            await secured.allow(ResourceType.TOPIC, "t", AclOperation.READ)
            committed = await kafka(wire, ApiKey.TXN_OFFSET_COMMIT, 3, **offsets)
            assert partition_codes(committed) == {("t", 0): ErrorCode.NONE}
            # DescribeTransactions lists only the topics the principal may describe.
            described = await kafka(wire, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["tx"])
            [state] = described.transaction_states
            assert state.error_code == ErrorCode.NONE
            assert {t.topic for t in state.topics} == {"t", "u"}  # not __consumer_offsets
            ended = await kafka(wire, ApiKey.END_TXN, 3, **txn, committed=True)
            assert ended.error_code == ErrorCode.NONE
        finally:
            await wire.close()


# -- our protocol -----------------------------------------------------------------------------


async def test_our_protocols_group_and_offset_apis_authorize_as_kafkas() -> None:
    async with secured_broker("t") as secured:
        broker = secured.broker
        conn = await Connection.open("127.0.0.1", broker.port)
        join = g.JoinGroupRequest(
            "g", 10000, 10000, "", None, "consumer", [g.JoinGroupProtocol("range", b"")]
        )
        commit = g.OffsetCommitRequestV1(
            "g", [m.OffsetCommitTopic("t", [m.OffsetCommitPartition(0, 5)])]
        )
        fetch = g.OffsetFetchRequestV1("g", [m.OffsetFetchTopic("t", [0])])

        def codes(response: Any) -> list[int]:
            return [p.error_code for t in response.topics for p in t.partitions]

        try:
            found = await conn.send(ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest("g"))
            assert found.error_code == GROUP_DENIED
            joined = await conn.send(ApiKey.JOIN_GROUP, join)
            assert joined.error_code == GROUP_DENIED
            synced = await conn.send(ApiKey.SYNC_GROUP, g.SyncGroupRequest("g", 1, "m", None, []))
            assert synced.error_code == GROUP_DENIED
            beat = await conn.send(ApiKey.HEARTBEAT, g.HeartbeatRequest("g", 1, "m"))
            assert beat.error_code == GROUP_DENIED
            left = await conn.send(
                ApiKey.LEAVE_GROUP, g.LeaveGroupRequest("g", [g.LeaveGroupMember("m")])
            )
            assert left.error_code == GROUP_DENIED
            assert codes(await conn.send(ApiKey.OFFSET_COMMIT, commit)) == [GROUP_DENIED]
            assert (await conn.send(ApiKey.OFFSET_FETCH, fetch)).error_code == GROUP_DENIED
            described = await conn.send(ApiKey.DESCRIBE_GROUPS, g.DescribeGroupsRequest(["g"]))
            assert [x.error_code for x in described.groups] == [GROUP_DENIED]
            deleted = await conn.send(ApiKey.DELETE_GROUPS, g.DeleteGroupsRequest(["g"]))
            assert [r.error_code for r in deleted.results] == [GROUP_DENIED]
            removed = await conn.send(
                ApiKey.OFFSET_DELETE, g.OffsetDeleteRequest("g", [m.OffsetFetchTopic("t", [0])])
            )
            assert removed.error_code == GROUP_DENIED
            assert "g" not in broker.group_coordinator.groups

            await secured.allow(ResourceType.GROUP, "g", AclOperation.READ)
            found = await conn.send(ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest("g"))
            assert found.error_code == ErrorCode.NONE
            assert codes(await conn.send(ApiKey.OFFSET_COMMIT, commit)) == [TOPIC_DENIED]
            assert codes(await conn.send(ApiKey.OFFSET_FETCH, fetch)) == [TOPIC_DENIED]
            every = g.OffsetFetchRequestV1("g", [], all_partitions=True)
            assert "g" not in broker.group_coordinator.groups  # nothing was committed

            await secured.allow(ResourceType.TOPIC, "t", AclOperation.READ)
            assert codes(await conn.send(ApiKey.OFFSET_COMMIT, commit)) == [ErrorCode.NONE]
            assert secured.committed("g") == {("t", 0): 5}
            fetched = await conn.send(ApiKey.OFFSET_FETCH, every)
            assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [5]
            joined = await conn.send(ApiKey.JOIN_GROUP, join)
            assert joined.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED)
            listed = await conn.send(ApiKey.LIST_GROUPS, g.ListGroupsRequest())
            assert [x.group_id for x in listed.groups] == ["g"]
            described = await conn.send(ApiKey.DESCRIBE_GROUPS, g.DescribeGroupsRequest(["g"]))
            assert [x.error_code for x in described.groups] == [ErrorCode.NONE]
        finally:
            await conn.close()


# -- Kafka's clients ------------------------------------------------------------------------------


def sasl(secured: Secured, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": secured.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def consume_and_commit(settings: dict[str, Any], topic: str, n: int) -> tuple[int, list[Any]]:
    """How many records a consumer in ``settings``' group reads and commits, or its errors."""
    from confluent_kafka import Consumer

    consumer = Consumer({**settings, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read, errors = 0, []
    deadline = time.monotonic() + 15
    try:
        while read < n and not errors and time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
            else:
                read += 1
        if read:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return read, errors


def transaction(settings: dict[str, Any], topic: str) -> Any:
    """Produce one record in a transaction and commit it: None, or the KafkaError."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(settings)
    try:
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(topic, b"in a transaction")
        producer.commit_transaction(15)
    except KafkaException as exc:
        return exc.args[0]
    return None


async def test_confluent_consumer_group_is_refused_until_it_may_read_the_group() -> None:
    from confluent_kafka import KafkaError

    async with secured_broker("orders") as secured:
        admin = sasl(secured, "admin")
        await asyncio.to_thread(transaction, {**admin, "transactional.id": "seed"}, "orders")
        await secured.allow(ResourceType.TOPIC, "orders", AclOperation.READ, "User:alice")
        alice = sasl(secured, "alice", **{"group.id": "readers"})
        read, errors = await asyncio.to_thread(consume_and_commit, alice, "orders", 1)
        assert read == 0
        assert [e.code() for e in errors] == [KafkaError.GROUP_AUTHORIZATION_FAILED]
        assert "readers" not in secured.broker.group_coordinator.groups

        await secured.allow(ResourceType.GROUP, "readers", AclOperation.READ, "User:alice")
        read, errors = await asyncio.to_thread(consume_and_commit, alice, "orders", 1)
        assert (read, errors) == (1, [])
        assert secured.committed("readers")[("orders", 0)] >= 1


async def test_confluent_transactional_producer_is_refused_until_it_may_write_its_id() -> None:
    from confluent_kafka import KafkaError

    async with secured_broker("orders") as secured:
        await secured.allow(ResourceType.TOPIC, "orders", AclOperation.WRITE, "User:alice")
        alice = sasl(secured, "alice", **{"transactional.id": "alice-tx"})
        error = await asyncio.to_thread(transaction, alice, "orders")
        assert error is not None
        assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        state = secured.broker.transaction_coordinator.state.transactions.get("alice-tx")
        assert state is None or not state.partitions  # no transaction begun

        await secured.allow(
            ResourceType.TRANSACTIONAL_ID, "alice-tx", AclOperation.WRITE, "User:alice"
        )
        assert await asyncio.to_thread(transaction, alice, "orders") is None
        state = secured.broker.transaction_coordinator.state.transactions["alice-tx"]
        assert state.state.kafka_name == "CompleteCommit"
