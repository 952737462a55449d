"""The group coordinator's state machine on a manual clock: a ReplicaManager holding
``__consumer_offsets`` (the harness's broker 0 leads every partition), no sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.coordinator.group_coordinator import GroupCoordinator
from purgatory.broker.coordinator.group_metadata import GroupState, JoinResult, SyncResult
from purgatory.broker.coordinator.group_records import GroupMetadataKey, OffsetCommitKey, encode
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from purgatory.protocol.errors import ErrorCode as E
from purgatory.protocol.records import decode_records
from tests.harness import Harness

GROUP = "g"
SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000
SUB = encode_subscription(Subscription(["t"]))


class Groups:
    """A harness with a coordinator, and members' requests as one-liners."""

    def __init__(self, isr: list[int] | None = None, **config: Any) -> None:
        self.h = Harness(**{"offsets.topic.num.partitions": 1, **config})
        self.h.create("t", 4)
        self.h.create(OFFSETS_TOPIC, 1)
        self.h.set_partition(OFFSETS_TOPIC, 0, isr=isr or [0])
        self.created = 0
        self.coordinator = GroupCoordinator(
            self.h.config,
            self.h.replica_manager,
            self.h.metadata,
            self.h.clock,
            BrokerMetrics(0),
            self._create,
        )
        # The leadership was taken before the coordinator listened: tell it now.
        self.coordinator.manager.leadership_changed(
            0, self.h.partition(OFFSETS_TOPIC).leader_epoch, True
        )

    def _create(self) -> None:
        self.created += 1

    @property
    def group(self) -> Any:
        return self.coordinator.groups[GROUP]

    def join(
        self,
        member_id: str = "",
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session: int = SESSION,
        require_known: bool = True,
    ) -> Any:
        return self.coordinator.join_group(
            GROUP,
            member_id,
            instance,
            require_known,
            "client",
            "/127.0.0.1",
            REBALANCE,
            session,
            protocol_type,
            protocols if protocols is not None else [("range", SUB)],
        )

    async def new_member(self, instance: str | None = None) -> tuple[str, Any]:
        """Join twice (MEMBER_ID_REQUIRED round trip); the pending join."""
        first = self.join(instance=instance)
        if instance is not None:
            return first.result().member_id if first.done() else "", first
        assert first.error == E.MEMBER_ID_REQUIRED
        return first.member_id, self.join(first.member_id)

    def sync(
        self, member: str, generation: int, assignments: dict[str, bytes] | None = None
    ) -> Any:
        return self.coordinator.sync_group(
            GROUP, generation, member, None, None, None, assignments or {}
        )

    def heartbeat(self, member: str, generation: int) -> int:
        return self.coordinator.heartbeat(GROUP, member, None, generation)

    async def advance(self, ms: int) -> None:
        await self.h.advance(ms)


@pytest.fixture
async def groups() -> AsyncIterator[Groups]:
    g = Groups()
    await g.h.settle()  # the offsets partition loads
    yield g
    g.coordinator.shutdown()
    await g.h.shutdown()


async def stable_pair(g: Groups) -> tuple[str, str, int]:
    """Two members, Stable: (leader, follower, generation)."""
    a, join_a = await g.new_member()
    b, join_b = await g.new_member()
    await g.advance(2 * DELAY)  # b joined during the initial delay: one more delay
    ra, rb = join_a.result(), join_b.result()
    leader = ra.leader_id
    follower = b if leader == a else a
    sync_leader = g.sync(leader, ra.generation_id, {a: b"A", b: b"B"})
    sync_follower = g.sync(follower, ra.generation_id)
    await g.h.settle()
    assert sync_leader.result().error == E.NONE and sync_follower.result().error == E.NONE
    assert rb.generation_id == ra.generation_id
    return leader, follower, ra.generation_id


async def test_the_first_join_is_answered_member_id_required_then_waits_the_initial_delay(
    groups: Groups,
) -> None:
    first = groups.join()
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    pending = groups.join(first.member_id)
    assert isinstance(pending, asyncio.Future)
    await groups.advance(DELAY - 1)
    assert not pending.done() and groups.group.state is GroupState.PREPARING_REBALANCE
    await groups.advance(1)
    result: JoinResult = pending.result()
    assert (result.error, result.generation_id, result.protocol_name) == (E.NONE, 1, "range")
    assert result.leader_id == first.member_id
    assert result.members == [(first.member_id, None, SUB)]
    assert groups.group.state is GroupState.COMPLETING_REBALANCE


async def test_a_member_joining_during_the_initial_delay_extends_it(groups: Groups) -> None:
    _, join_a = await groups.new_member()
    await groups.advance(DELAY - 100)
    _, join_b = await groups.new_member()
    await groups.advance(100)
    assert not join_a.done()  # another delay began
    await groups.advance(DELAY)
    assert join_a.result().generation_id == join_b.result().generation_id == 1
    assert len(join_a.result().members) + len(join_b.result().members) == 2  # only the leader's


async def test_a_rebalance_completes_as_soon_as_every_known_member_rejoined(
    groups: Groups,
) -> None:
    leader, follower, generation = await stable_pair(groups)
    rejoin_leader = groups.join(leader)  # the leader rejoins: a rebalance starts
    assert groups.group.state is GroupState.PREPARING_REBALANCE
    assert groups.heartbeat(follower, generation) == E.REBALANCE_IN_PROGRESS
    assert not rejoin_leader.done()
    rejoin_follower = groups.join(follower)
    await groups.h.settle()
    assert rejoin_leader.result().generation_id == rejoin_follower.result().generation_id == 2


async def test_members_that_do_not_rejoin_by_the_rebalance_timeout_are_removed(
    groups: Groups,
) -> None:
    leader, follower, _ = await stable_pair(groups)
    rejoin = groups.join(leader)
    for _ in range(REBALANCE // 5_000):  # the follower heartbeats but never rejoins
        await groups.advance(5_000)
        if rejoin.done():
            break
        assert groups.heartbeat(follower, 1) == E.REBALANCE_IN_PROGRESS
    result = rejoin.result()
    assert (result.error, result.generation_id, result.leader_id) == (E.NONE, 2, leader)
    assert list(groups.group.members) == [leader]
    assert groups.heartbeat(follower, 1) == E.UNKNOWN_MEMBER_ID


async def test_sync_gives_each_member_its_part_of_the_leaders_assignment(groups: Groups) -> None:
    a, join_a = await groups.new_member()
    b, _ = await groups.new_member()
    await groups.advance(2 * DELAY)
    leader = join_a.result().leader_id
    other = b if leader == a else a
    waiting = groups.sync(other, 1)
    assert isinstance(waiting, asyncio.Future) and not waiting.done()
    # An entry for a member the group does not have is ignored, as in Kafka.
    done = groups.sync(leader, 1, {leader: b"mine", "stranger": b"x"})
    await groups.h.settle()
    assert done.result() == SyncResult(E.NONE, b"mine", "consumer", "range")
    assert waiting.result().assignment == b""  # left out: an empty assignment
    assert groups.group.state is GroupState.STABLE and "stranger" not in groups.group.members
    # A later sync in the same generation gets the stored assignment at once.
    assert groups.sync(leader, 1).assignment == b"mine"


async def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances(
    groups: Groups,
) -> None:
    leader, follower, generation = await stable_pair(groups)
    for _ in range(3):  # the leader keeps its session; the follower goes silent
        await groups.advance(SESSION // 3)
        assert groups.heartbeat(leader, generation) == E.NONE
    await groups.advance(SESSION // 3)
    assert follower not in groups.group.members
    assert groups.coordinator.sessions.purgatory.expirations >= 1
    assert groups.heartbeat(leader, generation) == E.REBALANCE_IN_PROGRESS
    rejoin = groups.join(leader)
    await groups.h.settle()
    assert rejoin.result().generation_id == generation + 1
    assert rejoin.result().members == [(leader, None, SUB)]


async def test_stale_generations_and_unknown_members_are_fenced(groups: Groups) -> None:
    _leader, follower, generation = await stable_pair(groups)
    assert groups.heartbeat(follower, generation - 1) == E.ILLEGAL_GENERATION
    assert groups.heartbeat("nobody", generation) == E.UNKNOWN_MEMBER_ID
    assert groups.sync(follower, generation + 1).error == E.ILLEGAL_GENERATION
    assert groups.join("nobody").error == E.UNKNOWN_MEMBER_ID
    offsets = {("t", 0): (5, -1, None)}
    commit = groups.coordinator.offsets.commit_offsets
    assert commit(GROUP, generation - 1, follower, None, offsets) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert commit(GROUP, -1, "", None, offsets) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    ok = commit(GROUP, generation, follower, None, offsets)
    await groups.h.settle()
    assert ok.result() == {("t", 0): E.NONE}
    assert groups.group.state is GroupState.STABLE  # none of it disturbed the group


async def test_a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id(
    groups: Groups,
) -> None:
    join = groups.join(instance="worker-1")
    await groups.advance(DELAY)
    first: JoinResult = join.result()
    sync = groups.sync(first.member_id, first.generation_id, {first.member_id: b"parts"})
    await groups.h.settle()
    assert sync.result().error == E.NONE
    rebalances = groups.coordinator.rebalancer.rebalances
    rejoin = groups.join(instance="worker-1")  # a restart: a new member id, same instance
    await groups.h.settle()  # answered once the group with the new member id is stored
    again: JoinResult = rejoin.result()
    assert again.error == E.NONE
    assert again.member_id != first.member_id and again.generation_id == first.generation_id
    assert again.skip_assignment  # it leads: it must not assign again
    assert groups.coordinator.rebalancer.rebalances == rebalances
    assert groups.group.state is GroupState.STABLE
    assert groups.sync(again.member_id, again.generation_id).assignment == b"parts"
    old = groups.coordinator.heartbeat(GROUP, first.member_id, "worker-1", first.generation_id)
    assert old == E.FENCED_INSTANCE_ID
    # A coordinator that loads the group after a failover knows the new member id too.
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    await groups.h.settle()
    assert groups.group.static_members == {"worker-1": again.member_id}
    beat = groups.coordinator.heartbeat(GROUP, again.member_id, "worker-1", again.generation_id)
    assert beat == E.NONE


async def test_leaving_members_rebalance_the_group_at_once(groups: Groups) -> None:
    leader, follower, generation = await stable_pair(groups)
    code, errors = groups.coordinator.leave_group(GROUP, [(follower, None), ("nobody", None)])
    assert (code, errors) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    assert groups.group.state is GroupState.PREPARING_REBALANCE
    rejoin = groups.join(leader)
    await groups.h.settle()
    assert rejoin.result().generation_id == generation + 1
    groups.coordinator.leave_group(GROUP, [(leader, None)])
    await groups.h.settle()
    assert groups.group.state is GroupState.EMPTY


async def test_bad_joins_get_kafkas_errors_and_leave_the_group_as_it_was(groups: Groups) -> None:
    leader, follower, generation = await stable_pair(groups)
    assert groups.join(protocols=[]).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert groups.join(protocol_type="").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert groups.join(protocol_type="connect").error == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = groups.join(protocols=[("sticky", SUB)])
    assert no_common.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert groups.join(session=10).error == E.INVALID_SESSION_TIMEOUT
    assert groups.group.state is GroupState.STABLE
    assert set(groups.group.members) == {leader, follower}
    assert groups.group.generation_id == generation


async def test_empty_and_huge_member_metadata_travel_as_given(groups: Groups) -> None:
    huge = bytes(1 << 20)
    a = groups.join(protocols=[("range", b"")], require_known=False)
    b = groups.join(protocols=[("range", huge)], require_known=False)
    await groups.advance(2 * DELAY)
    leader = a.result() if a.result().members else b.result()
    assert sorted(len(md) for _, _, md in leader.members) == [0, len(huge)]


async def test_commits_are_appended_to_consumer_offsets_and_a_new_leader_loads_them(
    groups: Groups,
) -> None:
    leader, _follower, generation = await stable_pair(groups)
    commit = groups.coordinator.offsets.commit_offsets(
        GROUP, generation, leader, None, {("t", 1): (42, 3, "meta")}
    )
    await groups.h.settle()
    assert commit.result() == {("t", 1): E.NONE}
    log_end = groups.h.partition(OFFSETS_TOPIC).log.log_end_offset
    assert log_end == 2  # the generation with its assignment, then the commit
    # The leadership moves away: the groups go; it comes back: they are read back.
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    assert groups.coordinator.offsets.fetch_offsets(GROUP, None)[0] == E.NOT_COORDINATOR
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    assert (
        groups.coordinator.offsets.fetch_offsets(GROUP, None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert groups.heartbeat(leader, generation) == E.NONE  # blindly, while loading
    await groups.h.settle()
    code, offsets = groups.coordinator.offsets.fetch_offsets(GROUP, [("t", 1), ("t", 2)])
    assert code == E.NONE
    assert offsets[("t", 1)] is not None and offsets[("t", 1)][:3] == (42, 3, "meta")
    assert offsets[("t", 2)] is None
    group = groups.group
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert {m.assignment for m in group.members.values()} == {b"A", b"B"}
    # Loaded members must heartbeat again within their sessions.
    await groups.advance(SESSION)
    assert groups.group.members == {}


async def test_a_commit_is_answered_only_once_the_isr_has_it() -> None:
    g = Groups(isr=[0, 1, 2])
    await g.h.settle()
    commit = g.coordinator.offsets.commit_offsets(GROUP, -1, "", None, {("t", 0): (7, -1, None)})
    await g.h.settle()
    assert isinstance(commit, asyncio.Future) and not commit.done()
    end = g.h.partition(OFFSETS_TOPIC).log.log_end_offset
    for follower in (1, 2):
        await g.h.follower_fetch(follower, OFFSETS_TOPIC, end)
    await g.h.settle()
    assert commit.result() == {("t", 0): E.NONE}
    assert g.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)] is not None
    g.coordinator.shutdown()
    await g.h.shutdown()


async def test_an_empty_groups_offsets_expire_after_the_retention_then_the_group_goes() -> None:
    g = Groups(**{"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 10_000})
    await g.h.settle()
    g.coordinator.start()
    member, join = await g.new_member()
    await g.advance(DELAY)
    generation = join.result().generation_id
    g.sync(member, generation, {member: encode_assignment(Assignment({"t": [0]}))})
    await g.h.settle()
    g.coordinator.offsets.commit_offsets(GROUP, generation, member, None, {("t", 0): (1, -1, None)})
    await g.h.settle()
    for _ in range(24):  # a member: nothing expires, however long
        await g.advance(5_000)
        g.heartbeat(member, generation)
    assert g.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)] is not None
    g.coordinator.leave_group(GROUP, [(member, None)])
    await g.h.settle()
    assert g.group.state is GroupState.EMPTY
    await g.advance(50_000)
    assert GROUP in g.coordinator.groups  # empty for less than a minute
    await g.advance(20_000)
    assert GROUP not in g.coordinator.groups
    assert g.coordinator.offsets.expired_offsets == 1
    g.coordinator.shutdown()
    await g.h.shutdown()


async def test_only_empty_groups_are_deleted_and_subscribed_offsets_stay(groups: Groups) -> None:
    leader, follower, generation = await stable_pair(groups)
    assert groups.coordinator.delete_groups([GROUP, "missing"]) == {
        GROUP: E.NON_EMPTY_GROUP,
        "missing": E.GROUP_ID_NOT_FOUND,
    }
    groups.coordinator.offsets.commit_offsets(
        GROUP, generation, leader, None, {("t", 0): (1, -1, None)}
    )
    await groups.h.settle()
    # The members' subscriptions name "t": its offsets cannot be deleted under them.
    code, errors = groups.coordinator.offsets.delete_offsets(GROUP, [("t", 0)])
    assert (code, errors) == (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
    groups.coordinator.leave_group(GROUP, [(leader, None), (follower, None)])
    await groups.h.settle()
    deleted = groups.coordinator.delete_groups([GROUP])
    await groups.h.settle()
    assert deleted.result() == {GROUP: E.NONE}
    assert GROUP not in groups.coordinator.groups
    assert groups.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): None}


def offsets_log(g: Groups) -> list[tuple[bytes | None, bytes | None]]:
    """The records of the harness's ``__consumer_offsets`` partition: (key, value)."""
    log = g.h.partition(OFFSETS_TOPIC).log
    return [(r.key, r.value) for r in decode_records(b"".join(log.read(0, 1 << 20)))]


async def test_a_deleted_topics_offsets_go_at_once_and_tombstones_keep_them_gone_on_reload(
    groups: Groups,
) -> None:
    groups.h.create("u", 1)
    commit = groups.coordinator.offsets.commit_offsets(
        GROUP, -1, "", None, {("t", 0): (4, -1, None), ("u", 0): (9, -1, None)}
    )
    await groups.h.settle()
    assert commit.result() == {("t", 0): E.NONE, ("u", 0): E.NONE}
    groups.h.delete("t")
    groups.coordinator.on_topics_deleted({"t"})
    # At once: a recreated topic's consumer must never be told the old offset.
    assert groups.coordinator.offsets.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): None}
    await groups.h.settle()
    tombstone = (encode(OffsetCommitKey(GROUP, "t", 0)), None)
    assert offsets_log(groups)[-1] == tombstone
    groups.h.create("t", 4)  # a new incarnation
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    await groups.h.settle()
    code, offsets = groups.coordinator.offsets.fetch_offsets(GROUP, None)
    assert code == E.NONE and list(offsets) == [("u", 0)] and offsets[("u", 0)][0] == 9


async def test_an_empty_group_left_without_offsets_by_a_topic_deletion_goes(
    groups: Groups,
) -> None:
    groups.coordinator.offsets.commit_offsets(GROUP, -1, "", None, {("t", 0): (4, -1, None)})
    await groups.h.settle()
    groups.h.delete("t")
    groups.coordinator.on_topics_deleted({"t"})
    assert GROUP not in groups.coordinator.groups
    await groups.h.settle()
    assert offsets_log(groups)[-1] == (encode(GroupMetadataKey(GROUP)), None)


async def test_a_coordinator_loading_offsets_of_a_topic_deleted_meanwhile_drops_them(
    groups: Groups,
) -> None:
    """The coordinator that should have written the tombstones failed first: the next one
    finds the offsets' topic gone (or made again, with a new topic id) and writes them."""
    groups.h.create("u", 1)
    groups.coordinator.offsets.commit_offsets(
        GROUP, -1, "", None, {("t", 0): (4, -1, None), ("u", 0): (9, -1, None)}
    )
    await groups.h.settle()
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    groups.h.delete("t")  # no coordinator heard of it
    groups.h.create("t", 4)
    groups.h.delete("u")
    end = groups.h.partition(OFFSETS_TOPIC).log.log_end_offset
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    await groups.h.settle()
    assert groups.coordinator.offsets.fetch_offsets(GROUP, None) == (E.NONE, {})
    tombstones = offsets_log(groups)[end:]
    assert sorted(tombstones) == sorted(
        [
            (encode(OffsetCommitKey(GROUP, "t", 0)), None),
            (encode(OffsetCommitKey(GROUP, "u", 0)), None),
        ]
    )


def _txn_marker(groups: Groups, producer_id: int, committed: bool) -> None:
    """The transaction coordinator's marker, written in the offsets partition."""
    responses, done = groups.h.replica_manager.append_txn_markers(
        30_000, [((OFFSETS_TOPIC, 0), producer_id, 0, committed, 0)]
    )
    assert done is None and responses[0][1].error == E.NONE
    groups.coordinator.complete_txn_offsets(0, producer_id, committed)


async def test_a_transactions_offsets_count_only_once_it_commits_and_a_reload_agrees(
    groups: Groups,
) -> None:
    offsets = groups.coordinator.offsets
    # A producer with no group membership (KIP-447's old style): generation -1, no member.
    stored = offsets.commit_txn_offsets(GROUP, 77, -1, "", None, {("t", 0): (10, -1, "")})
    await groups.h.settle()
    assert stored.result() == {("t", 0): E.NONE}
    aborted = offsets.commit_txn_offsets(GROUP, 88, -1, "", None, {("t", 1): (20, -1, "")})
    await groups.h.settle()
    assert aborted.result() == {("t", 1): E.NONE}
    assert offsets.fetch_offsets(GROUP, [("t", 0), ("t", 1)])[1] == {("t", 0): None, ("t", 1): None}
    _txn_marker(groups, 77, True)
    _txn_marker(groups, 88, False)
    _, fetched = offsets.fetch_offsets(GROUP, [("t", 0), ("t", 1)])
    assert fetched[("t", 0)] is not None and fetched[("t", 0)][0] == 10
    assert fetched[("t", 1)] is None
    # A new leader replays commits, the transactions' offsets and their markers alike.
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    await groups.h.settle()
    _, reloaded = offsets.fetch_offsets(GROUP, [("t", 0), ("t", 1)])
    assert reloaded[("t", 0)] is not None and reloaded[("t", 0)][0] == 10
    assert reloaded[("t", 1)] is None


async def test_a_transaction_still_open_at_a_reload_keeps_its_offsets_pending(
    groups: Groups,
) -> None:
    offsets = groups.coordinator.offsets
    stored = offsets.commit_txn_offsets(GROUP, 5, -1, "", None, {("t", 2): (7, -1, "")})
    await groups.h.settle()
    assert stored.result() == {("t", 2): E.NONE}
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=1, leader_epoch=1)
    groups.h.set_partition(OFFSETS_TOPIC, 0, leader_id=0, leader_epoch=2)
    await groups.h.settle()
    assert groups.group.pending_txn_offsets == {
        5: {("t", 2): groups.group.pending_txn_offsets[5][("t", 2)]}
    }
    _txn_marker(groups, 5, True)
    assert offsets.fetch_offsets(GROUP, [("t", 2)])[1][("t", 2)][0] == 7


async def test_txn_offset_commits_check_the_member_and_generation_given(groups: Groups) -> None:
    leader, _follower, generation = await stable_pair(groups)
    offsets = groups.coordinator.offsets
    commit = {("t", 0): (1, -1, "")}
    assert offsets.commit_txn_offsets(GROUP, 1, generation, "stranger", None, commit) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    assert offsets.commit_txn_offsets(GROUP, 1, generation + 1, leader, None, commit) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    good = offsets.commit_txn_offsets(GROUP, 1, generation, leader, None, commit)
    await groups.h.settle()
    assert good.result() == {("t", 0): E.NONE}


async def test_a_commit_answer_nobody_waits_for_any_more_is_dropped_quietly() -> None:
    """The fuzz found it: a connection closing while its OffsetCommit waited for the ISR
    cancels the answer's future; the append's completion then must not raise into the
    event loop (InvalidStateError, logged as a traceback)."""
    from purgatory.broker.coordinator.offset_metadata_manager import mapped

    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        for outcome in ("result", "exception", "cancel"):
            stored: asyncio.Future[int] = loop.create_future()
            answer = mapped(stored, lambda code: code + 1)
            answer.cancel()  # the connection closed
            if outcome == "result":
                stored.set_result(0)
            elif outcome == "exception":
                stored.set_exception(RuntimeError("append failed"))
            else:
                stored.cancel()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        stored = loop.create_future()
        answer = mapped(stored, lambda code: code + 1)
        stored.set_result(41)
        assert await answer == 42
        failed: asyncio.Future[int] = loop.create_future()
        failed.set_exception(RuntimeError("append failed"))
        with pytest.raises(RuntimeError):
            await mapped(failed, lambda code: code)
    finally:
        loop.set_exception_handler(None)
    assert errors == []
