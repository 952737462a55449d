"""KIP-848's consumer group coordinator on a manual clock (Kafka's GroupMetadataManagerTest,
``consumerGroupHeartbeat*``): ConsumerGroupHeartbeat driven straight into the
GroupCoordinator's ConsumerGroupCoordinator, its records in a ReplicaManager's
``__consumer_offsets`` (the harness's broker 0 leads it), no sockets, no sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    MemberState,
)
from purgatory.broker.coordinator.consumer_group_coordinator import (
    HeartbeatRequest,
    HeartbeatResult,
)
from purgatory.broker.coordinator.consumer_group_records import ConsumerGroupReplay
from purgatory.broker.coordinator.group_metadata import GroupMetadata
from purgatory.broker.coordinator.group_records import ConsumerGroupKey, decode_key
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode as E
from purgatory.protocol.records import decode_records
from tests.unit.test_group_coordinator import GROUP, Groups

REBALANCE = 20_000
SESSION = 45_000  # group.consumer.session.timeout.ms's default
INTERVAL = 5_000  # group.consumer.heartbeat.interval.ms's default
VERSION = 1  # the client chooses its member id
# The group epochs in the order the tests reach them: E1 is the first member's, one more
# than a new group's (1 in the late-2024 Kafka source, 2 in the Kafka 4 broker the
# differential tests compare with, whose start 7cf877f took): the tests follow the moves.
E1 = ConsumerGroup(GROUP, 0).group_epoch + 1
E2, E3, E4 = E1 + 1, E1 + 2, E1 + 3


class Consumers(Groups):
    """The classic harness (topic ``t`` of 4 partitions), with ConsumerGroupHeartbeats
    as one-liners: partitions by topic name in, by topic name out."""

    @property
    def cg(self) -> Any:
        return self.coordinator.consumer_groups

    @property
    def consumer_group(self) -> ConsumerGroup:
        group = self.coordinator.groups[GROUP]
        assert isinstance(group, ConsumerGroup)
        return group

    def topic_id(self, name: str) -> str:
        return self.h.topics[name].topic_id

    def names(self, assignment: Any) -> dict[str, list[int]]:
        by_id = {t.topic_id: name for name, t in self.h.topics.items()}
        return {by_id[t]: sorted(ps) for t, ps in assignment.items() if ps}

    def request(
        self,
        member_id: str,
        epoch: int,
        *,
        owned: dict[str, list[int]] | None = None,
        topics: list[str] | None = None,
        regex: str | None = None,
        instance: str | None = None,
        assignor: str | None = None,
        rebalance: int = -1,
        group: str = GROUP,
    ) -> HeartbeatRequest:
        if epoch == 0:  # a join: the full request
            topics = topics if topics is not None or regex is not None else ["t"]
            owned = owned if owned is not None else {}
            rebalance = rebalance if rebalance != -1 else REBALANCE
            assignor = assignor or "range"
        return HeartbeatRequest(
            group,
            member_id,
            epoch,
            instance,
            None,
            rebalance,
            topics,
            regex,
            assignor,
            None if owned is None else [(self.topic_id(n), ps) for n, ps in owned.items()],
        )

    def send(self, request: HeartbeatRequest, version: int = VERSION) -> Any:
        """The heartbeat's outcome: a result, or a future until its records are stored."""
        return self.cg.heartbeat(request, version, "client", "/127.0.0.1")

    async def beat(self, member_id: str, epoch: int, **fields: Any) -> HeartbeatResult:
        outcome = self.send(self.request(member_id, epoch, **fields))
        await self.h.settle()
        result: HeartbeatResult = (
            outcome.result() if isinstance(outcome, asyncio.Future) else outcome
        )
        return result

    def member(self, member_id: str) -> Any:
        return self.consumer_group.members[member_id]


@pytest.fixture
async def cg() -> AsyncIterator[Consumers]:
    g = Consumers()
    await g.h.settle()
    yield g
    g.coordinator.shutdown()
    await g.h.shutdown()


async def two_members_stable(g: Consumers) -> None:
    """``a`` then ``b`` join (range: a gets t-0,1 and b t-2,3), both Stable in epoch 2."""
    await g.beat("a", 0)
    await g.beat("b", 0)
    await g.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    await g.beat("a", E1, owned={"t": [0, 1]})
    await g.beat("b", E2, owned={})
    group = g.consumer_group
    assert group.state is ConsumerGroupState.STABLE and group.group_epoch == E2


def snapshot(group: ConsumerGroup) -> tuple[object, ...]:
    """Everything a group's records stand for."""
    return (
        group.group_epoch,
        group.assignment_epoch,
        group.state,
        {m: (v.subscription(), v.current_assignment()) for m, v in group.members.items()},
        dict(group.target_assignment),
        dict(group.partition_epochs),
        dict(group.subscription_metadata),
        dict(group.static_members),
    )


def offsets_records(g: Consumers) -> list[tuple[bytes | None, bytes | None]]:
    log = g.h.partition(OFFSETS_TOPIC).log
    return [(r.key, r.value) for r in decode_records(b"".join(log.read(0, 1 << 20)))]


async def move_leadership_away_and_back(g: Consumers) -> None:
    leader_epoch = g.h.partition(OFFSETS_TOPIC).leader_epoch
    g.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=leader_epoch + 1)
    g.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=leader_epoch + 2)
    await g.h.settle()


# -- joining and reconciling ------------------------------------------------------------


async def test_the_first_member_joins_and_is_given_every_partition_in_epoch_one(
    cg: Consumers,
) -> None:
    joined = await cg.beat("a", 0)
    assert (joined.error, joined.member_id, joined.member_epoch) == (E.NONE, "a", E1)
    assert joined.heartbeat_interval_ms == INTERVAL
    assert cg.names(joined.assignment) == {"t": [0, 1, 2, 3]}
    group = cg.consumer_group
    assert (group.group_epoch, group.assignment_epoch) == (E1, E1)
    assert group.state is ConsumerGroupState.STABLE
    assert cg.member("a").state is MemberState.STABLE
    # A heartbeat with nothing new is answered without an assignment and writes nothing.
    end = cg.h.partition(OFFSETS_TOPIC).log.log_end_offset
    again = cg.send(cg.request("a", E1, owned={"t": [0, 1, 2, 3]}))
    assert isinstance(again, HeartbeatResult)
    assert (again.error, again.member_epoch, again.assignment) == (E.NONE, E1, None)
    assert cg.h.partition(OFFSETS_TOPIC).log.log_end_offset == end


async def test_version_zero_lets_the_coordinator_choose_the_member_id(cg: Consumers) -> None:
    outcome = cg.send(cg.request("", 0), version=0)
    await cg.h.settle()
    joined = outcome.result()
    assert joined.error == E.NONE and joined.member_id and len(joined.member_id) == 22
    assert joined.member_id in cg.consumer_group.members


async def test_a_second_member_waits_until_the_first_revokes_what_it_is_to_get(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0)
    b = await cg.beat("b", 0)
    # A new member bumps the group epoch; b is in it at once, but t-2,3 are a's still.
    assert (b.error, b.member_epoch, cg.names(b.assignment)) == (E.NONE, E2, {})
    assert cg.member("b").state is MemberState.UNRELEASED_PARTITIONS
    group = cg.consumer_group
    assert (group.group_epoch, group.assignment_epoch) == (E2, E2)
    assert group.state is ConsumerGroupState.RECONCILING
    assert cg.names(group.target_assignment["b"]) == {"t": [2, 3]}

    # a learns of its smaller target: it must revoke t-2,3 first, in its epoch (E1).
    a = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    assert (a.member_epoch, cg.names(a.assignment)) == (E1, {"t": [0, 1]})
    member_a = cg.member("a")
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS
    assert cg.names(member_a.pending_revocation) == {"t": [2, 3]}
    assert group.current_partition_epoch(cg.topic_id("t"), 2) == E1  # a owns it still

    still = await cg.beat("b", E2, owned={})
    assert still.assignment is None and cg.member("b").state is MemberState.UNRELEASED_PARTITIONS
    # Still owning them, a stays where it is.
    unchanged = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    assert unchanged.member_epoch == E1 and unchanged.assignment is None

    # Revoked: a moves to the next epoch (E2), the partitions are free, then b gets them.
    a = await cg.beat("a", E1, owned={"t": [0, 1]})
    assert (a.member_epoch, a.assignment) == (E2, None)  # same partitions, new epoch
    assert (cg.member("a").member_epoch, cg.member("a").previous_member_epoch) == (E2, E1)
    assert group.current_partition_epoch(cg.topic_id("t"), 2) == -1
    b = await cg.beat("b", E2, owned={})
    assert (b.member_epoch, cg.names(b.assignment)) == (E2, {"t": [2, 3]})
    assert group.current_partition_epoch(cg.topic_id("t"), 2) == E2
    assert group.state is ConsumerGroupState.STABLE


async def test_a_lost_answer_previous_epoch_with_a_subset_is_accepted_else_fenced(
    cg: Consumers,
) -> None:
    await two_members_stable(cg)  # a: epoch E2, previous E1, t-0,1
    lost = await cg.beat("a", E1, owned={"t": [0]})
    assert (lost.error, lost.member_epoch) == (E.NONE, E2)
    lost = await cg.beat("a", E1, owned={"t": [0, 1]})
    assert (lost.error, lost.member_epoch) == (E.NONE, E2)
    owns_more = await cg.beat("a", E1, owned={"t": [0, 1, 2]})
    assert owns_more.error == E.FENCED_MEMBER_EPOCH
    assert owns_more.message == (
        f"The consumer group member has a smaller member epoch ({E1}) than the one known by the "
        f"group coordinator ({E2}). The member must abandon all its partitions and rejoin."
    )
    assert (await cg.beat("a", E1)).error == E.FENCED_MEMBER_EPOCH  # owned not sent
    assert (await cg.beat("a", 0)).error == E.FENCED_MEMBER_EPOCH  # older still
    ahead = await cg.beat("a", E3, owned={"t": [0, 1]})
    assert ahead.error == E.FENCED_MEMBER_EPOCH
    assert ahead.message is not None and f"greater member epoch ({E3})" in ahead.message
    unknown = await cg.beat("c", E2, owned={})
    assert unknown.error == E.UNKNOWN_MEMBER_ID
    assert unknown.message == f"Member c is not a member of group {GROUP}."
    # None of it changed the group.
    assert cg.consumer_group.group_epoch == E2 and set(cg.consumer_group.members) == {"a", "b"}


async def test_a_full_heartbeat_is_answered_with_the_whole_assignment(cg: Consumers) -> None:
    await cg.beat("a", 0)
    full = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]}, topics=["t"], rebalance=REBALANCE)
    assert cg.names(full.assignment) == {"t": [0, 1, 2, 3]}


# -- leaving, sessions and rebalance timeouts ---------------------------------------------


async def test_a_member_leaving_bumps_the_group_epoch_and_the_other_gets_its_partitions(
    cg: Consumers,
) -> None:
    await two_members_stable(cg)
    left = await cg.beat("b", -1)
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, "b", -1)
    group = cg.consumer_group
    assert set(group.members) == {"a"} and group.group_epoch == E3
    a = await cg.beat("a", E2, owned={"t": [0, 1]})
    assert (a.member_epoch, cg.names(a.assignment)) == (E3, {"t": [0, 1, 2, 3]})
    assert (await cg.beat("b", -1)).error == E.UNKNOWN_MEMBER_ID
    assert (await cg.beat("a", -1)).error == E.NONE
    assert group.state is ConsumerGroupState.EMPTY and group.group_epoch == E4
    assert not cg.cg.timer  # nobody's session nor rebalance is kept


async def test_leaving_a_group_that_does_not_exist_is_group_id_not_found(cg: Consumers) -> None:
    gone = await cg.beat("a", -1)
    assert (gone.error, gone.message) == (
        E.GROUP_ID_NOT_FOUND,
        f"Consumer group {GROUP} not found.",
    )
    assert (await cg.beat("a", E3, owned={})).error == E.GROUP_ID_NOT_FOUND


async def test_a_member_whose_session_expires_is_fenced_and_the_group_epoch_grows(
    cg: Consumers,
) -> None:
    await two_members_stable(cg)
    for _ in range(SESSION // INTERVAL - 1):  # a keeps heartbeating; b is silent
        await cg.advance(INTERVAL)
        assert (await cg.beat("a", E2, owned={"t": [0, 1]})).error == E.NONE
    assert "b" in cg.consumer_group.members
    await cg.advance(INTERVAL)  # b's session (from its last heartbeat) is over
    group = cg.consumer_group
    assert set(group.members) == {"a"} and group.group_epoch == E3
    assert (await cg.beat("b", E2, owned={"t": [2, 3]})).error == E.UNKNOWN_MEMBER_ID
    a = await cg.beat("a", E2, owned={"t": [0, 1]})
    assert (a.member_epoch, cg.names(a.assignment)) == (E3, {"t": [0, 1, 2, 3]})
    # The fencing was stored: a coordinator loading the partition knows b is gone.
    await move_leadership_away_and_back(cg)
    assert set(cg.consumer_group.members) == {"a"} and cg.consumer_group.group_epoch == E3


async def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0)
    await cg.beat("b", 0)
    a = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    assert cg.member("a").state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(REBALANCE // INTERVAL - 1):  # it heartbeats, but keeps t-2,3
        await cg.advance(INTERVAL)
        a = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
        assert a.error == E.NONE
        await cg.beat("b", E2, owned={})
    await cg.advance(INTERVAL)
    group = cg.consumer_group
    assert set(group.members) == {"b"} and group.group_epoch == E3
    assert (await cg.beat("a", E1, owned={"t": [0, 1]})).error == E.UNKNOWN_MEMBER_ID
    b = await cg.beat("b", E2, owned={})
    assert (b.member_epoch, cg.names(b.assignment)) == (E3, {"t": [0, 1, 2, 3]})


async def test_a_member_that_revokes_in_time_is_not_fenced_by_its_rebalance_timeout(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0)
    await cg.beat("b", 0)
    await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    await cg.advance(REBALANCE - 1)
    await cg.beat("a", E1, owned={"t": [0, 1]})
    await cg.beat("b", E2, owned={})
    await cg.advance(REBALANCE)
    assert set(cg.consumer_group.members) == {"a", "b"}
    assert cg.consumer_group.group_epoch == E2


# -- static members ---------------------------------------------------------------------


async def test_a_static_member_leaves_and_comes_back_under_a_new_id_with_its_assignment(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0, instance="i-a")
    await cg.beat("b", 0, instance="i-b")
    await cg.beat("a", E1, instance="i-a", owned={"t": [0, 1, 2, 3]})
    await cg.beat("a", E1, instance="i-a", owned={"t": [0, 1]})
    await cg.beat("b", E2, instance="i-b", owned={})
    group = cg.consumer_group
    assert group.state is ConsumerGroupState.STABLE and group.group_epoch == E2

    # Its new incarnation cannot take the instance while the old one has not left.
    taken = await cg.beat("a2", 0, instance="i-a")
    assert taken.error == E.UNRELEASED_INSTANCE_ID
    assert taken.message == (
        "Static member a2 with instance id i-a cannot join the group because the instance "
        "id is is owned by a member."
    )
    away = await cg.beat("a", -2, instance="i-a")
    assert (away.error, away.member_epoch) == (E.NONE, -2)
    assert group.group_epoch == E2 and "a" in group.members  # no rebalance: it keeps its place
    assert group.current_partition_epoch(cg.topic_id("t"), 0) == -2

    back = await cg.beat("a2", 0, instance="i-a")
    assert (back.error, back.member_id, back.member_epoch) == (E.NONE, "a2", E2)
    assert cg.names(back.assignment) == {"t": [0, 1]}
    assert set(group.members) == {"a2", "b"} and group.static_members["i-a"] == "a2"
    assert group.group_epoch == E2 and group.state is ConsumerGroupState.STABLE
    # The old member id is fenced now, and an instance nobody has is unknown.
    fenced = await cg.beat("a", E2, instance="i-a", owned={"t": [0, 1]})
    assert fenced.error == E.FENCED_INSTANCE_ID
    assert fenced.message == "Static member a with instance id i-a was fenced by member a2."
    assert (await cg.beat("a", -2, instance="i-a")).error == E.FENCED_INSTANCE_ID
    unknown = await cg.beat("z", E2, instance="i-z", owned={})
    assert (unknown.error, unknown.message) == (E.UNKNOWN_MEMBER_ID, "Instance id i-z is unknown.")
    # A static member leaving for good (-1) is fenced at once.
    gone = await cg.beat("a2", -1, instance="i-a")
    assert (gone.error, gone.member_epoch) == (E.NONE, -1)
    assert set(group.members) == {"b"} and group.group_epoch == E3


async def test_a_static_member_away_for_longer_than_its_session_is_fenced(cg: Consumers) -> None:
    await cg.beat("a", 0, instance="i-a")
    await cg.beat("a", -2, instance="i-a")
    await cg.advance(SESSION)
    group = cg.consumer_group
    assert group.members == {} and group.static_members == {} and group.group_epoch == E2
    back = await cg.beat("a2", 0, instance="i-a")
    assert (back.error, back.member_epoch, cg.names(back.assignment)) == (
        E.NONE,
        E3,
        {"t": [0, 1, 2, 3]},
    )


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "version", "message"),
    [
        ({"member_id": "", "member_epoch": 0}, 1, "MemberId can't be empty."),
        ({"member_id": " ", "member_epoch": 3}, 0, "MemberId can't be empty."),
        ({"member_id": "", "member_epoch": -1}, 0, "MemberId can't be empty."),
        ({"group_id": " "}, 1, "GroupId can't be empty."),
        ({"instance_id": ""}, 1, "InstanceId can't be empty."),
        ({"rack_id": "  "}, 1, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, 1, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": None}, 1, "TopicPartitions must be empty when (re-)joining."),
        ({"owned": [("x" * 32, [0])]}, 1, "TopicPartitions must be empty when (re-)joining."),
        (
            {"subscribed_topic_names": None},
            1,
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
            "(re-)joining.",
        ),
        ({"member_epoch": -2, "instance_id": None}, 1, "InstanceId can't be null."),
        ({"member_epoch": -3}, 1, "MemberEpoch is invalid."),
    ],
)
async def test_invalid_heartbeats_are_refused_with_kafkas_messages(
    cg: Consumers, fields: dict[str, Any], version: int, message: str
) -> None:
    request = cg.request("a", 0)._replace(**fields)
    refused = cg.send(request, version)
    assert isinstance(refused, HeartbeatResult)
    assert (refused.error, refused.message) == (E.INVALID_REQUEST, message)
    assert GROUP not in cg.coordinator.groups


async def test_version_zero_accepts_an_empty_member_id_only_when_joining(cg: Consumers) -> None:
    joined = await cg.beat("", 0)  # sent as version 1 by beat: refused
    assert joined.error == E.INVALID_REQUEST
    outcome = cg.send(cg.request("", 0), version=0)
    await cg.h.settle()
    assert outcome.result().error == E.NONE


async def test_an_unknown_server_assignor_is_unsupported_assignor(cg: Consumers) -> None:
    refused = await cg.beat("a", 0, assignor="sticky")
    assert refused.error == E.UNSUPPORTED_ASSIGNOR
    assert refused.message == (
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )
    assert GROUP not in cg.coordinator.groups
    assert (await cg.beat("a", 0, assignor="uniform")).error == E.NONE


async def test_the_group_is_full_at_group_consumer_max_size() -> None:
    g = Consumers(**{"group.consumer.max.size": 2})
    await g.h.settle()
    try:
        await g.beat("a", 0, instance="i-a")
        await g.beat("b", 0)
        full = await g.beat("c", 0)
        assert (full.error, full.message) == (
            E.GROUP_MAX_SIZE_REACHED,
            "The consumer group has reached its maximum capacity of 2 members.",
        )
        assert set(g.consumer_group.members) == {"a", "b"}
        # Members already in are not refused, nor a static member replacing itself.
        assert (await g.beat("b", E2, owned={})).error == E.NONE
        await g.beat("a", -2, instance="i-a")
        assert (await g.beat("a2", 0, instance="i-a")).error == E.NONE
    finally:
        g.coordinator.shutdown()
        await g.h.shutdown()


# -- regular expressions ----------------------------------------------------------------


async def test_a_regex_subscription_gets_the_topics_it_fully_matches(cg: Consumers) -> None:
    cg.h.create("orders", 2)
    cg.h.create("orders-eu", 1)
    joined = await cg.beat("a", 0, regex="orders.*")
    assert cg.names(joined.assignment) == {"orders": [0, 1], "orders-eu": [0]}
    other = await cg.beat("b", 0, regex="order")  # a full match, as RE2J's matches()
    assert other.error == E.NONE and cg.names(other.assignment) == {}


async def test_a_regex_subscription_matches_internal_topics_as_kafkas_does(
    cg: Consumers,
) -> None:
    """Kafka's refreshRegularExpressions matches every topic of the image, internal ones
    too (franz-go's Test848RegexBrokerResolves adopts what the broker assigns so)."""
    cg.h.create("offsets-archive", 1)
    joined = await cg.beat("a", 0, regex=".*offsets.*")
    assert set(cg.names(joined.assignment)) == {OFFSETS_TOPIC, "offsets-archive"}


@pytest.mark.parametrize("hostile", ["(a+)+$", "(a|aa)+$", "(a*)*b", "(x+x+)+y"])
async def test_catastrophic_backtracking_regexes_are_matched_in_linear_time(
    cg: Consumers, hostile: str
) -> None:
    """RE2 has no backtracking: the engine ``re`` would take 2**240 steps on this name.
    If the coordinator ever matched with ``re`` again, this test would hang (and time
    out) instead of answering."""
    long_name = "a" * 240 + "-"
    cg.h.create(long_name, 1)
    joined = await cg.beat("a", 0, regex=hostile)
    assert joined.error == E.NONE
    assert long_name not in cg.names(joined.assignment)
    assert cg.consumer_group.members["a"].subscribed_topic_regex == hostile


@pytest.mark.parametrize(
    "invalid",
    ["[", "(a", "*a", "(a)\\1", "(?=a)b", "(?<!a)b", "x{1001}{1001}"],
)
async def test_an_invalid_regex_is_invalid_regular_expression(cg: Consumers, invalid: str) -> None:
    refused = await cg.beat("a", 0, regex=invalid)
    assert refused.error == E.INVALID_REGULAR_EXPRESSION
    assert refused.message is not None and refused.message.startswith(
        f"SubscribedTopicRegex `{invalid}` is not a valid regular expression"
    )
    assert GROUP not in cg.coordinator.groups


async def test_a_regex_longer_than_the_limit_is_refused(cg: Consumers) -> None:
    refused = await cg.beat("a", 0, regex="a" * 1001)
    assert refused.error == E.INVALID_REGULAR_EXPRESSION


# -- topics that appear or grow ---------------------------------------------------------


async def test_a_topic_created_after_the_subscription_bumps_the_epoch_on_the_next_heartbeat(
    cg: Consumers,
) -> None:
    joined = await cg.beat("a", 0, topics=["t", "later"])
    assert cg.names(joined.assignment) == {"t": [0, 1, 2, 3]}
    assert cg.consumer_group.group_epoch == E1
    cg.h.create("later", 2)
    beat = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    assert beat.member_epoch == E2 and cg.consumer_group.group_epoch == E2
    assert cg.names(beat.assignment) == {"t": [0, 1, 2, 3], "later": [0, 1]}


async def test_a_topic_grown_after_the_subscription_bumps_the_epoch_on_the_next_heartbeat(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0)
    old = cg.h.topics["t"]
    grown = list(old.partitions) + [
        ib.PartitionState(p, 0, 0, [0, 1, 2], [0, 1, 2]) for p in (4, 5)
    ]
    cg.h.topics["t"] = ib.TopicState(old.name, old.topic_id, old.configs, grown)
    cg.h.publish()
    beat = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    assert beat.member_epoch == E2 and cg.consumer_group.group_epoch == E2
    assert cg.names(beat.assignment) == {"t": [0, 1, 2, 3, 4, 5]}
    assert cg.consumer_group.subscription_metadata == {"t": (old.topic_id, 6)}


# -- loading ----------------------------------------------------------------------------


async def test_a_coordinator_loading_the_partition_rebuilds_the_group_and_restarts_timers(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0, instance="i-a")
    await cg.beat("b", 0)
    await cg.beat("c", 0, topics=["t"], assignor="uniform")
    await cg.beat("a", E1, instance="i-a", owned={"t": [0, 1, 2, 3]})  # a revokes
    assert cg.member("a").state is MemberState.UNREVOKED_PARTITIONS
    await cg.beat("c", -1)  # tombstones too
    before = snapshot(cg.consumer_group)
    records = offsets_records(cg)

    # Fed the records written, Kafka's replay gives the same group back.
    replay = ConsumerGroupReplay()
    for key, value in records:
        assert key is not None
        parsed = decode_key(key)
        if isinstance(parsed, ConsumerGroupKey):
            replay.record(parsed, value)
    assert snapshot(replay.groups_built(cg.h.clock.wall_ms())[GROUP]) == before

    # And a coordinator losing the partition, then taking it again, does too.
    await move_leadership_away_and_back(cg)
    group = cg.consumer_group
    assert snapshot(group) == before
    timer = cg.cg.timer
    assert timer.is_scheduled(("session", GROUP, "a")) and timer.is_scheduled(
        ("session", GROUP, "b")
    )
    assert timer.is_scheduled(("rebalance", GROUP, "a"))  # it was revoking
    assert len(timer) == 3
    # The loaded group carries on where it was.
    done = await cg.beat("a", E1, instance="i-a", owned={"t": [0, 1]})
    assert (done.error, done.member_epoch) == (E.NONE, group.group_epoch)
    # The rebalance timeout restarted with the load: b never heartbeats, and a revoking
    # member left revoking would be fenced by it; sessions end at the session timeout.
    await cg.advance(SESSION)
    assert group.members == {} and group.state is ConsumerGroupState.EMPTY


async def test_a_revoking_member_reloaded_is_fenced_by_its_restarted_rebalance_timeout(
    cg: Consumers,
) -> None:
    await cg.beat("a", 0)
    await cg.beat("b", 0)
    await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})
    await move_leadership_away_and_back(cg)
    await cg.advance(REBALANCE - 1)
    assert "a" in cg.consumer_group.members
    await cg.advance(1)
    assert set(cg.consumer_group.members) == {"b"}


async def test_a_group_left_empty_reloads_empty_and_a_deleted_one_not_at_all(cg: Consumers) -> None:
    await cg.beat("a", 0)
    await cg.beat("a", -1)
    await move_leadership_away_and_back(cg)
    group = cg.consumer_group
    assert group.members == {} and group.group_epoch == E2
    assert group.state is ConsumerGroupState.EMPTY
    deleted = cg.coordinator.delete_groups([GROUP])
    await cg.h.settle()
    assert deleted.result() == {GROUP: E.NONE}
    await move_leadership_away_and_back(cg)
    assert GROUP not in cg.coordinator.groups


# -- classic groups, offsets ------------------------------------------------------------


async def test_an_empty_classic_group_becomes_a_consumer_group_and_back_keeping_offsets(
    cg: Consumers,
) -> None:
    commit = cg.coordinator.offsets.commit_offsets(GROUP, -1, "", None, {("t", 0): (7, -1, None)})
    await cg.h.settle()
    assert commit.result() == {("t", 0): E.NONE}
    assert isinstance(cg.coordinator.groups[GROUP], GroupMetadata)

    joined = await cg.beat("a", 0)
    assert joined.error == E.NONE
    assert isinstance(cg.coordinator.groups[GROUP], ConsumerGroup)
    assert cg.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)][0] == 7
    await move_leadership_away_and_back(cg)  # the classic group's record is gone
    assert isinstance(cg.coordinator.groups[GROUP], ConsumerGroup)
    assert cg.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)][0] == 7

    # Once it is empty, a classic member makes it a classic group again. (With members,
    # group.consumer.migration.policy decides: the online migration's tests.)
    await cg.beat("a", -1)
    member, pending = await cg.new_member()
    await cg.advance(3_000)
    assert pending.result().error == E.NONE
    classic = cg.coordinator.groups[GROUP]
    assert isinstance(classic, GroupMetadata) and member in classic.members
    assert cg.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)][0] == 7
    await move_leadership_away_and_back(cg)
    assert isinstance(cg.coordinator.groups[GROUP], GroupMetadata)
    assert cg.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)][0] == 7


async def test_offset_commits_carry_the_member_epoch(cg: Consumers) -> None:
    await two_members_stable(cg)
    offsets = cg.coordinator.offsets
    commit = {("t", 0): (5, -1, None)}
    assert offsets.commit_offsets(GROUP, E1, "a", None, commit) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert offsets.commit_offsets(GROUP, E3, "a", None, commit) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert offsets.commit_offsets(GROUP, E2, "z", None, commit) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert offsets.commit_offsets(GROUP, -1, "", None, commit) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    ok = offsets.commit_offsets(GROUP, E2, "a", None, commit)
    await cg.h.settle()
    assert ok.result() == {("t", 0): E.NONE}
    assert offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)][0] == 5
    # Once empty, a commit without a member (epoch -1) is the admin's: accepted.
    await cg.beat("a", -1)
    await cg.beat("b", -1)
    simple = offsets.commit_offsets(GROUP, -1, "", None, {("t", 0): (6, -1, None)})
    await cg.h.settle()
    assert simple.result() == {("t", 0): E.NONE}


async def test_txn_offset_commits_check_the_member_epoch_as_a_generation(cg: Consumers) -> None:
    await two_members_stable(cg)
    offsets = cg.coordinator.offsets
    commit = {("t", 1): (9, -1, "")}
    assert offsets.commit_txn_offsets(GROUP, 1, E1, "a", None, commit) == {
        ("t", 1): E.ILLEGAL_GENERATION
    }
    assert offsets.commit_txn_offsets(GROUP, 1, E2, "z", None, commit) == {
        ("t", 1): E.UNKNOWN_MEMBER_ID
    }
    ok = offsets.commit_txn_offsets(GROUP, 1, E2, "a", None, commit)
    await cg.h.settle()
    assert ok.result() == {("t", 1): E.NONE}
    unbound = offsets.commit_txn_offsets(GROUP, 2, -1, "", None, {("t", 2): (3, -1, "")})
    await cg.h.settle()
    assert unbound.result() == {("t", 2): E.NONE}


# -- not the coordinator ----------------------------------------------------------------


async def test_a_coordinator_without_the_partition_answers_not_coordinator(cg: Consumers) -> None:
    await cg.beat("a", 0)
    cg.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=5)
    await cg.h.settle()
    moved = cg.send(cg.request("a", E1, owned={"t": [0, 1, 2, 3]}))
    assert moved == HeartbeatResult(E.NOT_COORDINATOR)
    assert not cg.cg.timer  # the group's timers went with it


# -- subscriptions that change ----------------------------------------------------------


async def test_a_changed_subscription_bumps_the_epoch_and_revokes_what_it_no_longer_wants(
    cg: Consumers,
) -> None:
    cg.h.create("u", 2)
    await cg.beat("a", 0, topics=["t", "u"])
    changed = await cg.beat("a", E1, topics=["u"], owned={"t": [0, 1, 2, 3], "u": [0, 1]})
    assert cg.consumer_group.group_epoch == E2
    assert (changed.member_epoch, cg.names(changed.assignment)) == (E1, {"u": [0, 1]})
    assert cg.member("a").state is MemberState.UNREVOKED_PARTITIONS
    done = await cg.beat("a", E1, owned={"u": [0, 1]})
    assert (done.member_epoch, cg.member("a").state) == (E2, MemberState.STABLE)
    # The same subscription again is no new epoch.
    await cg.beat("a", E2, topics=["u"], owned={"u": [0, 1]})
    assert cg.consumer_group.group_epoch == E2


async def test_a_topic_created_that_a_regex_matches_bumps_the_epoch(cg: Consumers) -> None:
    joined = await cg.beat("a", 0, regex="logs-.*")
    assert cg.names(joined.assignment) == {} and cg.consumer_group.group_epoch == E1
    cg.h.create("logs-1", 2)
    beat = await cg.beat("a", E1, owned={})
    assert (beat.member_epoch, cg.names(beat.assignment)) == (E2, {"logs-1": [0, 1]})


async def test_a_deleted_topic_bumps_the_epoch_and_its_partitions_are_revoked(
    cg: Consumers,
) -> None:
    cg.h.create("u", 2)
    await cg.beat("a", 0, topics=["t", "u"])
    u_id = cg.topic_id("u")
    cg.h.delete("u")
    beat = await cg.beat("a", E1, owned={"t": [0, 1, 2, 3]})  # it dropped u's itself
    assert cg.consumer_group.group_epoch == E2
    assert beat.member_epoch == E2 and u_id not in cg.member("a").assigned
    assert cg.consumer_group.subscription_metadata == {"t": (cg.topic_id("t"), 4)}


async def test_a_static_member_rejoining_with_new_topics_bumps_the_epoch(cg: Consumers) -> None:
    cg.h.create("u", 2)
    await cg.beat("a", 0, instance="i-a")
    await cg.beat("a", -2, instance="i-a")
    back = await cg.beat("a2", 0, instance="i-a", topics=["t", "u"])
    assert cg.consumer_group.group_epoch == E2
    assert (back.member_epoch, cg.names(back.assignment)) == (E2, {"t": [0, 1, 2, 3], "u": [0, 1]})


# -- ConsumerGroupDescribe --------------------------------------------------------------


async def test_describe_finds_consumer_groups_only(cg: Consumers) -> None:
    assert cg.cg.describe(GROUP) == (E.GROUP_ID_NOT_FOUND, f"Group {GROUP} not found.", None)
    commit = cg.coordinator.offsets.commit_offsets(GROUP, -1, "", None, {("t", 0): (7, -1, None)})
    await cg.h.settle()
    assert commit.result() == {("t", 0): E.NONE}  # an empty classic group
    assert cg.cg.describe(GROUP) == (
        E.GROUP_ID_NOT_FOUND,
        f"Group {GROUP} is not a consumer group.",
        None,
    )
    error, _message, group = cg.cg.describe("other")
    assert (error, group) == (E.GROUP_ID_NOT_FOUND, None)
    await cg.beat("a", 0, group="other", assignor="uniform")
    error, _message, group = cg.cg.describe("other")
    assert error == E.NONE and group is not None and set(group.members) == {"a"}
    assert cg.cg.assignor_of(group) == "uniform"


async def test_with_migration_disabled_groups_with_members_keep_their_protocol() -> None:
    g = Consumers(**{"group.consumer.migration.policy": "disabled"})
    await g.h.settle()
    try:
        _member, pending = await g.new_member()
        await g.advance(3_000)
        assert pending.result().error == E.NONE
        refused = await g.beat("a", 0, group=GROUP)
        assert (refused.error, refused.message) == (
            E.GROUP_ID_NOT_FOUND,
            f"Group {GROUP} is not a consumer group.",
        )
        await g.beat("a", 0, group="other")
        classic = g.coordinator.join_group(
            "other",
            "",
            None,
            False,
            "client",
            "/127.0.0.1",
            30_000,
            10_000,
            "consumer",
            [("range", b"")],
        )
        assert classic.error == E.INCONSISTENT_GROUP_PROTOCOL
        assert isinstance(g.coordinator.groups["other"], ConsumerGroup)
    finally:
        g.coordinator.shutdown()
        await g.h.shutdown()
