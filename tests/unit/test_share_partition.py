"""SharePartition and SharePartitionManager (KIP-932, Kafka's SharePartitionTest and
SharePartitionManagerTest cases) on a manual clock: acquisition, acknowledgement, lock
expiry, delivery counts, the start offset, and the manager's life cycle of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.purgatory import ManualScheduler, SystemTimer
from purgatory.broker.share.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
)
from purgatory.broker.share.share_partition_manager import SharePartitionManager
from purgatory.protocol.errors import ErrorCode as E
from tests.harness import Harness

LOCK_MS = 30_000
GAP, ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)


class Shares:
    """One SharePartition on its own timer, and a manual clock."""

    def __init__(
        self, start: int = 0, limit: int = 5, max_locks: int = 100, lock_ms: int = LOCK_MS
    ) -> None:
        self.clock = ManualScheduler()
        self.timer = SystemTimer(self.clock)
        self.sp = SharePartition("g", "t", 0, start, self.timer, lock_ms, limit, max_locks)
        self.acquirable: list[int] = []
        self.sp.on_acquirable = lambda sp: self.acquirable.append(sp.next_fetch_offset())

    def acquire(self, member: str, first: int, last: int, max_records: int = 500) -> Any:
        return self.sp.acquire(member, list(range(first, last + 1)), max_records)

    def states(self, first: int, last: int) -> list[Any]:
        return [self.sp.record_state(o) for o in range(first, last + 1)]

    def counts(self, first: int, last: int) -> list[int | None]:
        out = []
        for offset in range(first, last + 1):
            state = self.sp.in_flight_state(offset)
            out.append(None if state is None else state.delivery_count)
        return out


A, B = "member-a", "member-b"
AV, AQ, AK, AR = (
    RecordState.AVAILABLE,
    RecordState.ACQUIRED,
    RecordState.ACKNOWLEDGED,
    RecordState.ARCHIVED,
)


def test_record_states_and_acknowledge_types_have_kafkas_ids() -> None:
    assert [(s.name, int(s)) for s in RecordState] == [
        ("AVAILABLE", 0),
        ("ACQUIRED", 1),
        ("ACKNOWLEDGED", 2),
        ("ARCHIVED", 4),
    ]
    assert (GAP, ACCEPT, RELEASE, REJECT) == (0, 1, 2, 3)


def test_acquire_takes_new_records_at_delivery_count_one_and_moves_the_end_offset() -> None:
    s = Shares(start=5)
    assert s.sp.next_fetch_offset() == 5 and s.sp.can_acquire()
    assert s.acquire(A, 5, 9) == [AcquiredRecords(5, 9, 1)]
    assert (s.sp.start_offset, s.sp.end_offset, s.sp.next_fetch_offset()) == (5, 10, 10)
    assert s.states(5, 9) == [AQ] * 5
    assert s.sp.in_flight_state(7).member_id == A  # type: ignore[union-attr]
    assert s.sp.acquired_count == 5
    # Read again from an offset before the end: nothing there is available.
    assert s.acquire(B, 5, 12) == [AcquiredRecords(10, 12, 1)]
    assert s.sp.in_flight_state(11).member_id == B  # type: ignore[union-attr]


def test_acquire_stops_at_max_records() -> None:
    s = Shares()
    assert s.acquire(A, 0, 9, max_records=3) == [AcquiredRecords(0, 2, 1)]
    assert s.sp.end_offset == 3 and s.sp.record_state(3) is None
    assert s.acquire(A, 3, 9, max_records=0) == []
    assert s.sp.acquire(A, [], 10) == []
    assert s.acquire(B, 3, 9, max_records=4) == [AcquiredRecords(3, 6, 1)]


def test_the_in_flight_window_holds_at_most_max_record_locks_offsets() -> None:
    s = Shares(max_locks=100)
    assert s.acquire(A, 0, 149) == [AcquiredRecords(0, 99, 1)]
    assert s.sp.acquired_count == 100 and s.sp.end_offset == 100
    assert not s.sp.can_acquire()
    assert s.acquire(B, 100, 149) == []
    # Acknowledging the first ten moves the start offset: ten more fit.
    assert s.sp.acknowledge(A, [(0, 9, [ACCEPT])]) is E.NONE
    assert s.sp.start_offset == 10 and s.sp.can_acquire()
    assert s.acquire(B, 100, 149) == [AcquiredRecords(100, 109, 1)]
    assert not s.sp.can_acquire()
    # A record released inside the full window can be acquired again.
    assert s.sp.acknowledge(A, [(50, 50, [RELEASE])]) is E.NONE
    assert s.sp.can_acquire() and s.sp.next_fetch_offset() == 50
    assert s.acquire(B, 50, 149) == [AcquiredRecords(50, 50, 2)]


def test_accept_acknowledges_and_the_start_offset_moves_past_leading_finished_records() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    assert s.sp.acknowledge(A, [(2, 4, [ACCEPT])]) is E.NONE
    assert s.states(0, 5) == [AQ, AQ, AK, AK, AK, AQ]
    assert s.sp.start_offset == 0  # 0 and 1 are still acquired
    assert s.sp.acknowledge(A, [(0, 1, [ACCEPT])]) is E.NONE
    assert s.sp.start_offset == 5
    assert s.states(0, 4) == [None] * 5  # forgotten: before the start offset
    assert s.sp.acknowledge(A, [(5, 9, [REJECT])]) is E.NONE
    assert (s.sp.start_offset, s.sp.end_offset, s.sp.next_fetch_offset()) == (10, 10, 10)
    assert s.sp.acquired_count == 0
    assert len(s.timer) == 0  # every lock was given back: no timer task left


def test_release_makes_records_available_for_redelivery_with_the_delivery_count_up() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    assert s.sp.acknowledge(A, [(3, 5, [RELEASE])]) is E.NONE
    assert s.states(2, 6) == [AQ, AV, AV, AV, AQ]
    assert s.sp.next_fetch_offset() == 3 and s.acquirable == [3]
    # The leader reads from 3 again: only the released ones are acquired.
    assert s.acquire(B, 3, 12) == [AcquiredRecords(3, 5, 2), AcquiredRecords(10, 12, 1)]
    assert s.sp.next_fetch_offset() == 13
    assert s.counts(3, 5) == [2, 2, 2]


def test_reject_and_gap_archive_records() -> None:
    s = Shares()
    s.acquire(A, 0, 4)
    assert s.sp.acknowledge(A, [(1, 1, [REJECT]), (2, 3, [GAP])]) is E.NONE
    assert s.states(0, 4) == [AQ, AR, AR, AR, AQ]
    assert s.sp.next_fetch_offset() == 5  # archived records are never delivered again
    assert s.acquire(B, 0, 4) == []


def test_one_acknowledge_type_per_offset() -> None:
    s = Shares()
    s.acquire(A, 10, 14)
    batch = (10, 14, [ACCEPT, RELEASE, REJECT, GAP, ACCEPT])
    assert s.sp.acknowledge(A, [batch]) is E.NONE
    # 10 is passed by the start offset, which stops at 11: available again.
    assert s.states(10, 14) == [None, AV, AR, AR, AK]
    assert s.sp.start_offset == 11
    assert s.sp.next_fetch_offset() == 11


def test_acknowledging_records_not_acquired_by_the_member_is_invalid_record_state() -> None:
    s = Shares()
    s.acquire(A, 0, 4)
    s.acquire(B, 5, 9)
    before = s.states(0, 9)
    # Another member's records; records already acknowledged; records available again.
    assert s.sp.acknowledge(A, [(4, 6, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert s.sp.acknowledge(B, [(5, 5, [ACCEPT])]) is E.NONE
    assert s.sp.acknowledge(B, [(5, 5, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert s.sp.acknowledge(B, [(6, 6, [RELEASE])]) is E.NONE
    assert s.sp.acknowledge(B, [(6, 6, [ACCEPT])]) is E.INVALID_RECORD_STATE
    # All or nothing: a good batch before a bad one is not applied either.
    assert s.sp.acknowledge(A, [(0, 1, [ACCEPT]), (7, 7, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert s.states(0, 4) == before[:5]
    # An offset in two batches (Kafka lets the second start where the first ends).
    assert s.sp.acknowledge(A, [(0, 1, [ACCEPT]), (1, 2, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert s.states(0, 2) == [AQ, AQ, AQ]
    # Offsets never acquired, before the end offset: a gap in the log, not one of A's.
    s2 = Shares()
    s2.sp.acquire(A, [0, 1, 5, 6], 10)
    assert s2.sp.acknowledge(A, [(2, 4, [ACCEPT])]) is E.INVALID_RECORD_STATE


def test_malformed_acknowledgement_batches_are_invalid_request() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    for batches in (
        [(5, 4, [ACCEPT])],  # first after last
        [(0, 5, [ACCEPT]), (3, 6, [ACCEPT])],  # overlapping
        [(4, 5, [ACCEPT]), (0, 1, [ACCEPT])],  # not ascending
        [(0, 2, [])],  # no type
        [(0, 2, [ACCEPT, ACCEPT])],  # neither one type nor one per offset
        [(0, 0, [4])],  # unknown type
        [(8, 12, [ACCEPT])],  # past the records acquired
        [(0, 0, [ACCEPT]), (10, 10, [ACCEPT])],
    ):
        assert s.sp.acknowledge(A, batches) is E.INVALID_REQUEST, batches
    assert s.states(0, 9) == [AQ] * 10


def test_batches_wholly_before_the_start_offset_are_skipped() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    s.sp.acknowledge(A, [(0, 4, [ACCEPT])])
    assert s.sp.start_offset == 5
    assert s.sp.acknowledge(A, [(0, 4, [REJECT]), (5, 6, [ACCEPT])]) is E.NONE
    assert s.sp.start_offset == 7
    # One straddling the start offset: the part before it is skipped.
    assert s.sp.acknowledge(A, [(3, 8, [ACCEPT])]) is E.NONE
    assert s.sp.start_offset == 9


def test_an_expired_lock_makes_records_available_and_the_redelivery_counts_up() -> None:
    s = Shares()
    s.acquire(A, 0, 4)
    s.clock.advance(10_000)
    s.acquire(A, 5, 9)
    s.clock.advance(LOCK_MS - 10_000 - 1)
    assert s.states(0, 9) == [AQ] * 10
    s.clock.advance(1)  # the first acquisition's lock expires; the second's not yet
    assert s.states(0, 9) == [AV] * 5 + [AQ] * 5
    assert s.sp.next_fetch_offset() == 0 and s.acquirable == [0]
    assert s.sp.acknowledge(A, [(0, 0, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert s.acquire(B, 0, 9) == [AcquiredRecords(0, 4, 2)]
    assert s.sp.in_flight_state(0).member_id == B  # type: ignore[union-attr]
    s.clock.advance(10_000)
    assert s.states(5, 9) == [AV] * 5
    assert s.acquire(B, 0, 9) == [AcquiredRecords(5, 9, 2)]
    assert s.counts(0, 9) == [2] * 10


def test_acknowledged_records_keep_their_state_when_the_lock_would_have_expired() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    s.sp.acknowledge(A, [(0, 1, [ACCEPT]), (5, 5, [REJECT])])
    s.clock.advance(LOCK_MS)
    assert s.states(2, 9) == [AV, AV, AV, AR, AV, AV, AV, AV]
    assert s.sp.start_offset == 2
    # All of a lock's records acknowledged: its timer task is cancelled.
    s.acquire(A, 2, 4)
    assert len(s.timer) == 1
    s.sp.acknowledge(A, [(2, 4, [ACCEPT])])
    assert len(s.timer) == 0


def test_a_record_delivered_delivery_count_limit_times_is_archived() -> None:
    s = Shares(limit=3)
    s.acquire(A, 0, 1)
    for delivery in (2, 3):
        s.clock.advance(LOCK_MS)  # expired: available again
        assert s.states(0, 1) == [AV, AV]
        assert s.acquire(A, 0, 1) == [AcquiredRecords(0, 1, delivery)]
    # The third delivery: released once more, a record is archived, not available.
    assert s.sp.acknowledge(A, [(0, 0, [RELEASE])]) is E.NONE
    assert s.sp.record_state(0) is None and s.sp.start_offset == 1
    s.clock.advance(LOCK_MS)
    assert (s.sp.start_offset, s.sp.end_offset) == (2, 2)
    assert s.acquire(A, 0, 1) == []
    assert s.sp.next_fetch_offset() == 2


def test_release_acquired_releases_only_that_members_records() -> None:
    s = Shares(limit=2)
    s.acquire(A, 0, 2)
    s.acquire(B, 3, 5)
    s.sp.acknowledge(A, [(1, 1, [ACCEPT])])
    s.sp.release_acquired(A)
    assert s.states(0, 5) == [AV, AK, AV, AQ, AQ, AQ]
    assert s.sp.next_fetch_offset() == 0
    s.sp.release_acquired("nobody")
    assert s.states(0, 5) == [AV, AK, AV, AQ, AQ, AQ]
    # At the limit a released record is archived.
    assert s.acquire(B, 0, 2) == [AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 2)]
    s.sp.release_acquired(B)
    assert s.states(0, 5) == [None, None, None, AV, AV, AV]
    assert s.sp.start_offset == 3
    assert s.sp.acquired_count == 0 and len(s.timer) == 0


def test_the_log_start_offset_moving_forgets_the_records_before_it() -> None:
    s = Shares()
    s.acquire(A, 0, 9)
    s.sp.acknowledge(A, [(2, 2, [RELEASE])])
    s.sp.update_log_start_offset(5)
    assert (s.sp.start_offset, s.sp.end_offset, s.sp.next_fetch_offset()) == (5, 10, 10)
    assert s.states(0, 4) == [None] * 5 and s.states(5, 9) == [AQ] * 5
    # Acknowledgements of what is gone are skipped, not refused.
    assert s.sp.acknowledge(A, [(0, 6, [ACCEPT])]) is E.NONE
    assert s.sp.start_offset == 7
    s.sp.update_log_start_offset(3)  # behind the start offset: nothing
    assert s.sp.start_offset == 7
    # Past everything in flight: the window starts over there.
    s.sp.update_log_start_offset(20)
    assert (s.sp.start_offset, s.sp.end_offset, s.sp.acquired_count) == (20, 20, 0)
    assert len(s.timer) == 0
    assert s.acquire(B, 20, 21) == [AcquiredRecords(20, 21, 1)]


def test_gaps_in_what_the_leader_read_are_not_delivered_and_the_start_offset_passes_them() -> None:
    s = Shares(start=0)
    # Nothing in flight: the window starts at the first record read.
    assert s.sp.acquire(A, [3, 4, 7, 8], 10) == [AcquiredRecords(3, 4, 1), AcquiredRecords(7, 8, 1)]
    assert (s.sp.start_offset, s.sp.end_offset) == (3, 9)
    assert s.states(5, 6) == [None, None]
    # GAP for an offset with no entry is accepted as the Java client sends it.
    assert s.sp.acknowledge(A, [(3, 8, [ACCEPT, ACCEPT, GAP, GAP, ACCEPT, ACCEPT])]) is E.NONE
    assert (s.sp.start_offset, s.sp.end_offset) == (9, 9)


def test_acquire_returns_runs_split_where_the_delivery_count_changes() -> None:
    s = Shares()
    s.acquire(A, 0, 5)
    s.sp.acknowledge(A, [(1, 1, [RELEASE]), (2, 3, [ACCEPT]), (4, 4, [RELEASE])])
    s.acquire(A, 1, 1)
    s.sp.acknowledge(A, [(1, 1, [RELEASE])])
    # 1 was delivered twice before, 4 once, 6.. never.
    assert s.acquire(B, 0, 8) == [
        AcquiredRecords(1, 1, 3),
        AcquiredRecords(4, 4, 2),
        AcquiredRecords(6, 8, 1),
    ]


def test_a_changed_lock_duration_applies_from_the_next_acquisition() -> None:
    s = Shares()
    s.acquire(A, 0, 0)
    s.sp.lock_duration_ms = 1_000
    s.acquire(A, 1, 1)
    s.clock.advance(1_000)
    assert s.states(0, 1) == [AQ, AV]
    s.clock.advance(LOCK_MS - 1_000)
    assert s.states(0, 1) == [AV, AV]


def test_close_cancels_every_lock() -> None:
    s = Shares()
    s.acquire(A, 0, 4)
    s.acquire(B, 5, 9)
    assert len(s.timer) == 2
    s.sp.close()
    assert len(s.timer) == 0
    s.clock.advance(LOCK_MS)  # nothing runs: no record comes back
    assert s.acquirable == [] and s.sp.acquired_count == 0


# -- SharePartitionManager on a ReplicaManager ----------------------------------------------


class Manager:
    def __init__(self) -> None:
        self.h = Harness()
        self.h.create("t", 2)
        self.h.set_partition("t", 0, isr=[0])  # the leader alone: the high watermark follows
        self.group_configs: dict[str, dict[str, str]] = {}
        self.manager = SharePartitionManager(
            self.h.config,
            self.h.replica_manager,
            self.h.clock,
            lambda group_id: self.group_configs.get(group_id, {}),
        )

    def sp(self, group: str = "g", partition: int = 0) -> SharePartition:
        share_partition = self.manager.share_partition(group, "t", partition)
        assert isinstance(share_partition, SharePartition), share_partition
        return share_partition


@pytest.fixture
async def m() -> AsyncIterator[Manager]:
    manager = Manager()
    yield manager
    manager.manager.shutdown()
    await manager.h.shutdown()


async def test_a_share_partition_starts_where_share_auto_offset_reset_says(m: Manager) -> None:
    await m.h.produce("t", [b"a", b"b", b"c"], acks=1)
    m.h.partition("t").delete_records_on_leader(1)
    assert (m.h.partition("t").log.log_start_offset, m.h.partition("t").high_watermark) == (1, 3)
    latest = m.sp("latest-group")
    assert (latest.start_offset, latest.end_offset, latest.next_fetch_offset()) == (3, 3, 3)
    m.group_configs["early"] = {"share.auto.offset.reset": "earliest"}
    assert m.sp("early").start_offset == 1
    # Made once: the same object each time, with the broker's limits.
    assert m.sp("early") is m.sp("early") and len(m.manager) == 2
    assert latest.delivery_count_limit == 5 and latest.max_record_locks == 2000
    assert latest.lock_duration_ms == 30_000


async def test_the_groups_lock_duration_overrides_the_brokers(m: Manager) -> None:
    m.group_configs["g"] = {"share.record.lock.duration.ms": "15000"}
    sp = m.sp()
    assert sp.lock_duration_ms == 15_000 == m.manager.record_lock_duration_ms("g")
    m.group_configs["g"] = {}
    assert m.sp().lock_duration_ms == 30_000


async def test_only_the_leader_serves_share_partitions(m: Manager) -> None:
    assert m.manager.share_partition("g", "nope", 0) is E.UNKNOWN_TOPIC_OR_PARTITION
    m.h.set_partition("t", 1, leader_id=1, leader_epoch=1)
    assert m.manager.share_partition("g", "t", 1) is E.NOT_LEADER_OR_FOLLOWER
    assert m.manager.share_partition("g", "t", 0, current_leader_epoch=7) is (
        E.UNKNOWN_LEADER_EPOCH
    )


async def test_losing_the_leadership_drops_the_share_partitions_and_their_locks(
    m: Manager,
) -> None:
    sp = m.sp("g1")
    m.sp("g2")
    other = m.sp("g1", partition=1)
    sp.acquire("a", [0, 1], 10)
    other.acquire("a", [0], 10)
    assert len(m.manager.timer) == 2
    m.h.set_partition("t", 0, leader_id=1, leader_epoch=1)
    assert m.manager.get("g1", "t", 0) is None and m.manager.get("g2", "t", 0) is None
    assert m.manager.get("g1", "t", 1) is other
    assert len(m.manager.timer) == 1
    # Leading again: a new one, at the reset offset (the state was in memory only).
    m.h.set_partition("t", 0, leader_id=0, leader_epoch=2)
    assert m.sp("g1") is not sp


async def test_a_deleted_topic_takes_its_share_partitions(m: Manager) -> None:
    sp = m.sp()
    sp.acquire("a", [0], 10)
    m.h.delete("t")
    assert len(m.manager) == 0 and len(m.manager.timer) == 0
    m.h.create("t", 1)
    assert m.sp() is not sp


async def test_a_topic_made_again_under_its_name_gets_a_new_share_partition(
    m: Manager,
) -> None:
    sp = m.sp()
    old = m.h.topics["t"]
    m.h.topics["t"] = type(old)(old.name, "f" * 32, old.configs, old.partitions)
    m.h.publish()  # the same name, a new topic id, this broker still leading
    assert m.sp() is not sp
    m.manager.on_topics_deleted({"t"})
    assert len(m.manager) == 0


async def test_release_member_releases_its_records_in_every_partition_of_the_group(
    m: Manager,
) -> None:
    p0, p1, other_group = m.sp("g", 0), m.sp("g", 1), m.sp("h", 0)
    for sp in (p0, p1, other_group):
        sp.acquire("a", [0, 1], 10)
    released: list[SharePartition] = []
    m.manager.on_acquirable = released.append
    m.manager.release_member("g", "a")
    assert [p0.record_state(0), p1.record_state(1)] == [RecordState.AVAILABLE] * 2
    assert other_group.record_state(0) is RecordState.ACQUIRED
    assert released == [p0, p1] or released == [p1, p0]
    m.manager.release_member("unknown", "a")


async def test_an_expired_lock_tells_the_manager_records_are_acquirable(m: Manager) -> None:
    sp = m.sp()
    sp.acquire("a", [0], 10)
    told: list[SharePartition] = []
    m.manager.on_acquirable = told.append
    await m.h.advance(LOCK_MS - 1)
    assert told == []
    await m.h.advance(1)
    assert told == [sp] and sp.record_state(0) is RecordState.AVAILABLE
