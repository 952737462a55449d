"""KIP-932's share group membership over Kafka's wire: ShareGroupHeartbeat and
ShareGroupDescribe against brokers, exact requests; ListGroups shows the group as a share
group; a member that stops heartbeating is fenced after its session, and the group
reloads on a new coordinator."""

from __future__ import annotations

from typing import Any

from purgatory.broker.coordinator.share_group import ShareGroup
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.kafka_wire import KafkaWire, request
from tests.support import bootstrap, running_cluster, wait_until

FAST = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "2000",
    "group.share.min.session.timeout.ms": "2000",
}


async def _heartbeat(wire: KafkaWire, member: str, epoch: int, topics: list[str] | None) -> Any:
    body = request(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        group_id="sg",
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=tuple(topics) if topics is not None else None,
    )
    return await wire.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)


def _assigned(response: Any) -> set[int]:
    assert response.assignment is not None
    return {int(p) for tp in response.assignment.topic_partitions for p in tp.partitions}


def _coordinator(brokers: list[Broker]) -> Broker:
    for b in brokers:
        if b.group_coordinator.manager.ownership_error("sg") == ErrorCode.NONE:
            return b
    raise AssertionError("no broker coordinates sg")


async def test_share_group_members_split_and_share_partitions() -> None:
    async with running_cluster(1, **FAST) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("queue", 3)
        await _find_coordinator(brokers[0])
        wire = await KafkaWire.open(brokers[0].port)
        try:
            await wait_until(lambda: _ready(brokers), timeout=30, message="sg's coordinator")
            first = await _heartbeat(wire, "m1", 0, ["queue"])
            assert first.error_code == ErrorCode.NONE, first.error_message
            assert first.member_epoch == 2  # a new group starts at 1, its first member bumps it
            assert _assigned(first) == {0, 1, 2}
            second = await _heartbeat(wire, "m2", 0, ["queue"])
            assert second.member_epoch == 3
            again = await _heartbeat(wire, "m1", first.member_epoch, None)
            assert again.member_epoch == 3
            # The simple assignor: every partition to someone, spread over the members.
            assert _assigned(again) | _assigned(second) == {0, 1, 2}
            assert len(_assigned(again)) + len(_assigned(second)) == 3
            more = [await _heartbeat(wire, f"x{i}", 0, ["queue"]) for i in range(3)]
            # Five members, three partitions: partitions shared, each member has one.
            assert all(len(_assigned(r)) == 1 for r in more)

            described = await wire.call(
                ApiKey.SHARE_GROUP_DESCRIBE,
                1,
                request(
                    ApiKey.SHARE_GROUP_DESCRIBE,
                    1,
                    group_ids=("sg", "nosuch"),
                    include_authorized_operations=False,
                ),
            )
            group, missing = described.groups
            assert group.error_code == ErrorCode.NONE and group.group_state == "Stable"
            assert group.assignor_name == "simple" and len(group.members) == 5
            assert {m.member_id for m in group.members} == {"m1", "m2", "x0", "x1", "x2"}
            assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

            listed = await wire.call(
                ApiKey.LIST_GROUPS,
                5,
                request(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=("share",)),
            )
            assert [(g.group_id, g.group_type) for g in listed.groups] == [("sg", "share")]

            caught_up = await _heartbeat(wire, "m2", second.member_epoch, None)
            # Three more joined: it moves straight to the group's epoch, no revocation.
            assert (caught_up.error_code, caught_up.member_epoch) == (ErrorCode.NONE, 6)
            gone = await _heartbeat(wire, "m2", -1, None)
            assert (gone.error_code, gone.member_epoch) == (ErrorCode.NONE, -1)
            unknown = await _heartbeat(wire, "m2", 4, None)
            assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID

            invalid = await _heartbeat(wire, "m9", 0, None)
            assert invalid.error_code == ErrorCode.INVALID_REQUEST
            assert invalid.error_message == "SubscribedTopicNames must be set in first request."
        finally:
            await wire.close()


async def test_a_silent_member_is_fenced_and_the_group_survives_its_coordinator() -> None:
    async with running_cluster(3, **FAST) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("queue", 2)
        await _find_coordinator(brokers[0])
        await wait_until(lambda: _ready(brokers), timeout=30, message="sg's coordinator")
        coordinator = _coordinator(brokers)
        wire = await KafkaWire.open(coordinator.port)
        try:
            stays = await _heartbeat(wire, "stays", 0, ["queue"])
            silent = await _heartbeat(wire, "silent", 0, ["queue"])
            assert silent.error_code == ErrorCode.NONE
            group = coordinator.group_coordinator.groups["sg"]
            assert isinstance(group, ShareGroup)
            epoch = stays.member_epoch

            async def heartbeat_until_alone() -> bool:
                nonlocal epoch
                r = await _heartbeat(wire, "stays", epoch, None)
                epoch = r.member_epoch
                return set(group.members) == {"stays"}

            await wait_until(
                heartbeat_until_alone, timeout=30, interval=0.2, message="the silent fenced"
            )
            assert _assigned(await _heartbeat(wire, "stays", epoch, ["queue"])) == {0, 1}
        finally:
            await wire.close()

        await coordinator.stop()
        others = [b for b in brokers if b is not coordinator]
        await wait_until(lambda: _ready(others), timeout=60, message="a new coordinator")
        successor = _coordinator(others)
        moved = successor.group_coordinator.groups.get("sg")
        assert isinstance(moved, ShareGroup)
        assert set(moved.members) == {"stays"}


async def _find_coordinator(broker: Broker) -> None:
    """FindCoordinator for the group: ``__consumer_offsets`` is made on the first ask."""
    wire = await KafkaWire.open(broker.port)
    try:
        body = request(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("sg",))
        await wire.call(ApiKey.FIND_COORDINATOR, 4, body)
    finally:
        await wire.close()


def _ready(brokers: list[Broker]) -> bool:
    return any(b.group_coordinator.manager.ownership_error("sg") == ErrorCode.NONE for b in brokers)
