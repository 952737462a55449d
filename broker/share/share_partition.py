"""SharePartition (Kafka's): the state of one partition of one share group on the partition's
leader: which records are in flight, who holds them, how often each was delivered.

The share-partition start offset (SPSO) is the first offset not yet done with; every record
before it is acknowledged or archived. The end offset (SPEO) is the offset after the highest
ever acquired. Between them each acquired offset has its own state (Kafka keeps batches and
splits them per offset when needed: here every offset is its own entry, which is Kafka's
per-offset case throughout). Offsets in that window with no entry are gaps: offsets the log
had no record for when they were read (compaction, aborted transactions' markers), never
delivered, done with.

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                     |  |---REJECT / GAP--> ARCHIVED
        |                     |
        +--RELEASE, lock timeout, session close (ARCHIVED at the delivery count limit)

An acquired record is locked for ``lock_duration_ms`` (an AcquisitionLockTimerTask on the
timing wheel, one per acquire call): when the lock expires before an acknowledgement, the
record is AVAILABLE again, or ARCHIVED once it was delivered ``delivery_count_limit`` times.
At most ``max_record_locks`` offsets are in flight (start offset to end offset), so at most
that many are ACQUIRED at once.

The state outlives the leader through the share coordinator (Kafka's persister): a
SharePartition made ``initializing`` acquires nothing until ``initialize`` gives it the state
read back (its start offset and in-flight batches, ``PersistedState``), and
``persisted_state`` is what a write stores after each change.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import NamedTuple

from purgatory.broker.purgatory import SystemTimer, TimerTask
from purgatory.protocol.errors import ErrorCode

EMPTY_MEMBER_ID = ""


class RecordState(enum.IntEnum):
    """Kafka's SharePartition.RecordState, with its ids (as persisted by Kafka)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class SharePartitionState(enum.IntEnum):
    """Kafka's SharePartitionState, as far as it is kept here."""

    INITIALIZING = 0  # its persisted state not read yet: acquires and acknowledges nothing
    ACTIVE = 1


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType: what a consumer says of a record it acquired."""

    GAP = 0  # no record at this offset: archived
    ACCEPT = 1  # processed: acknowledged
    RELEASE = 2  # give it to someone else: available again
    REJECT = 3  # unprocessable: archived


_ACKNOWLEDGED_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}

# (first offset, last offset, acknowledge types): one type for the whole range, or one per offset.
AcknowledgementBatch = tuple[int, int, Sequence[int]]

# The share coordinator's PersisterStateBatch as plain values: (first offset, last offset,
# delivery state (a RecordState id: AVAILABLE, ACKNOWLEDGED or ARCHIVED), delivery count).
StateBatch = tuple[int, int, int, int]


class PersistedState(NamedTuple):
    """What the share coordinator holds of a share partition (its ShareGroupOffset, less the
    leader epoch): the start offset and the in-flight batches from it."""

    state_epoch: int
    start_offset: int
    batches: list[StateBatch]


class AcquiredRecords(NamedTuple):
    """A contiguous run of offsets acquired by one request, all with one delivery count
    (ShareFetchResponse's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartitionStats:
    """What share partitions did to records, counted as it happens (plain integers, read
    when metrics are scraped): one per SharePartitionManager, shared by its partitions, so
    the counts outlive a partition dropped with its leadership."""

    __slots__ = ("accepted", "acquired", "archived", "lock_timeouts", "rejected", "released")

    def __init__(self) -> None:
        self.acquired = 0  # records acquired (each delivery counts: a redelivery again)
        self.accepted = 0  # ACCEPT acknowledgements
        self.released = 0  # RELEASE acknowledgements and records a closed session held
        self.rejected = 0  # REJECT acknowledgements
        self.archived = 0  # records ARCHIVED: rejected, gaps, or at the delivery count limit
        self.lock_timeouts = 0  # records whose acquisition lock expired (redelivered)


class InFlightState:
    """One in-flight offset. Invariant: ``lock`` is not None exactly when ``state`` is
    ACQUIRED, and ``member_id`` is empty unless it is."""

    __slots__ = ("delivery_count", "lock", "member_id", "state")

    def __init__(
        self,
        member_id: str,
        lock: AcquisitionLockTimerTask | None,
        state: RecordState = RecordState.ACQUIRED,
        delivery_count: int = 1,
    ) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock: AcquisitionLockTimerTask | None = lock

    def __repr__(self) -> str:
        return f"InFlightState({self.state.name}, {self.delivery_count}, {self.member_id!r})"


class AcquisitionLockTimerTask(TimerTask):
    """The lock on the offsets one acquire call gave a member. Runs when it expires unless
    every one of them was acknowledged or released first (``pending`` reaches 0: cancelled)."""

    __slots__ = ("member_id", "offsets", "pending", "share_partition")

    def __init__(self, share_partition: SharePartition, member_id: str, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.share_partition = share_partition
        self.member_id = member_id
        self.offsets: list[int] = []
        self.pending = 0  # offsets still ACQUIRED under this lock

    def run(self) -> None:
        self.share_partition._release_on_lock_timeout(self)


class SharePartition:
    """The in-flight records of (group, topic, partition) on its leader.

    Invariants: ``_in_flight`` holds, in ascending offset order, an entry for every acquired
    offset in [start_offset, end_offset) (none outside it); the first entry, if any, is not
    ACKNOWLEDGED or ARCHIVED (the start offset moves past those: ``_maybe_move_start``);
    ``end_offset - start_offset <= max_record_locks`` once anything was acquired;
    ``_find_next`` is True whenever some entry is AVAILABLE.
    """

    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        start_offset: int,
        timer: SystemTimer,
        lock_duration_ms: int,
        delivery_count_limit: int,
        max_record_locks: int,
        stats: SharePartitionStats | None = None,
        initializing: bool = False,
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.timer = timer
        self.lock_duration_ms = (
            lock_duration_ms  # read at each acquire: a group config may change it
        )
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self._in_flight: OrderedDict[int, InFlightState] = OrderedDict()
        self._find_next = False
        self.stats = stats if stats is not None else SharePartitionStats()
        self.state = (
            SharePartitionState.INITIALIZING if initializing else SharePartitionState.ACTIVE
        )
        self.state_epoch = 0  # the share coordinator's, read back at initialization
        self.leader_epoch = -1  # the data partition's when this broker took it (the persister's)
        # Told when records are released or a lock expires (not by acknowledge, whose caller
        # writes the state itself): the state changed and is to be written.
        self.on_state_changed: Callable[[SharePartition], object] | None = None
        # Told when records may be acquirable again without a new append (a lock expired,
        # records released, the start offset moved): a waiting ShareFetch may complete.
        self.on_acquirable: Callable[[SharePartition], object] | None = None

    def __repr__(self) -> str:
        return (
            f"SharePartition({self.group_id!r}, {self.topic}-{self.partition}, "
            f"start={self.start_offset}, end={self.end_offset}, in_flight={len(self._in_flight)})"
        )

    # -- reading ---------------------------------------------------------------------------

    def in_flight_state(self, offset: int) -> InFlightState | None:
        """The state of an acquired offset not yet passed by the start offset, else None."""
        return self._in_flight.get(offset)

    def record_state(self, offset: int) -> RecordState | None:
        """An offset's state: ARCHIVED-or-ACKNOWLEDGED offsets before the start offset read
        as None (done with), as do gaps and offsets never acquired."""
        state = self._in_flight.get(offset)
        return None if state is None else state.state

    @property
    def acquired_count(self) -> int:
        """Offsets ACQUIRED now (the locks held)."""
        return sum(1 for s in self._in_flight.values() if s.state is RecordState.ACQUIRED)

    def next_fetch_offset(self) -> int:
        """Where the leader should read next: the first AVAILABLE in-flight offset, else the
        end offset (the first never acquired)."""
        if self._find_next:
            for offset, state in self._in_flight.items():
                if state.state is RecordState.AVAILABLE:
                    return offset
            self._find_next = False
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a read could acquire anything: a record is available again, or the
        in-flight window has room for new ones (Kafka's canAcquireRecords); never while
        initializing."""
        if self.state is SharePartitionState.INITIALIZING:
            return False
        if self.next_fetch_offset() != self.end_offset:
            return True
        return not self._in_flight or self.end_offset - self.start_offset < self.max_record_locks

    # -- acquire ---------------------------------------------------------------------------

    def acquire(
        self, member_id: str, offsets: Sequence[int], max_records: int
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` up to ``max_records`` of the records the leader read
        (their offsets, ascending): the AVAILABLE in-flight ones (delivery count + 1) and
        the ones never acquired (delivery count 1), while the in-flight window has room.
        Offsets before the start offset, ACQUIRED, ACKNOWLEDGED or ARCHIVED are skipped.
        Each acquired offset is locked until ``lock_duration_ms`` from now."""
        result: list[AcquiredRecords] = []
        if max_records <= 0:
            return result
        in_flight = self._in_flight
        lock: AcquisitionLockTimerTask | None = None
        acquired = 0
        for offset in offsets:
            if acquired >= max_records:
                break
            if offset < self.start_offset:
                continue
            if offset < self.end_offset:
                state = in_flight.get(offset)
                if state is None or state.state is not RecordState.AVAILABLE:
                    continue
                if lock is None:
                    lock = AcquisitionLockTimerTask(self, member_id, self.lock_duration_ms)
                state.state = RecordState.ACQUIRED
                state.delivery_count += 1
                state.member_id = member_id
                state.lock = lock
            else:
                if not in_flight:
                    # Nothing in flight: the window starts at the first record acquired.
                    self.start_offset = offset
                elif offset - self.start_offset >= self.max_record_locks:
                    break
                if lock is None:
                    lock = AcquisitionLockTimerTask(self, member_id, self.lock_duration_ms)
                state = in_flight[offset] = InFlightState(member_id, lock)
                self.end_offset = offset + 1
            lock.offsets.append(offset)
            lock.pending += 1
            acquired += 1
            count = state.delivery_count
            if (
                result
                and result[-1].last_offset == offset - 1
                and result[-1].delivery_count == count
            ):
                result[-1] = result[-1]._replace(last_offset=offset)
            else:
                result.append(AcquiredRecords(offset, offset, count))
        if lock is not None:
            self.timer.add(lock)
        self.stats.acquired += acquired
        return result

    # -- acknowledge -----------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
        """Apply a member's acknowledgements, all or none: NONE when applied;
        INVALID_REQUEST for a malformed batch (first > last, batches not ascending and
        disjoint, a type count neither 1 nor the range's length, an unknown type) or one
        reaching past the end offset; INVALID_RECORD_STATE when an offset in a batch is not
        ACQUIRED by this member, or a batch names no in-flight offset. Batches wholly before
        the start offset are skipped (their records were archived), as are gaps."""
        error = _validate_batches(batches)
        if error is not ErrorCode.NONE:
            return error
        if self.state is SharePartitionState.INITIALIZING:
            return ErrorCode.INVALID_RECORD_STATE  # nothing was acquired from it yet
        changes: list[tuple[InFlightState, int]] = []
        claimed = -1  # the last offset a batch before acknowledged
        for first, last, types in batches:
            if last < self.start_offset:
                continue
            if last >= self.end_offset:
                return ErrorCode.INVALID_REQUEST
            per_offset = len(types) > 1
            found = False
            for offset, state in self._in_flight_between(max(first, self.start_offset), last):
                found = True
                if (
                    state.state is not RecordState.ACQUIRED
                    or state.member_id != member_id
                    or offset <= claimed
                ):
                    return ErrorCode.INVALID_RECORD_STATE
                changes.append((state, types[offset - first] if per_offset else types[0]))
                claimed = offset
            if not found:
                return ErrorCode.INVALID_RECORD_STATE
        available = False
        stats = self.stats
        for state, ack_type in changes:
            new_state = _ACKNOWLEDGED_STATE[AcknowledgeType(ack_type)]
            available |= self._finish(state, new_state)
            if ack_type == AcknowledgeType.ACCEPT:
                stats.accepted += 1
            elif ack_type == AcknowledgeType.RELEASE:
                stats.released += 1
            elif ack_type == AcknowledgeType.REJECT:
                stats.rejected += 1
        if self._maybe_move_start() or available:
            self._notify()
        return ErrorCode.NONE

    def release_acquired(self, member_id: str) -> bool:
        """The member's share session closed (or it left): every record it holds is
        AVAILABLE again (ARCHIVED at the delivery count limit). True when it held any (the
        state changed: the caller writes it)."""
        available = False
        released = 0
        for state in self._in_flight.values():
            if state.state is RecordState.ACQUIRED and state.member_id == member_id:
                available |= self._finish(state, RecordState.AVAILABLE)
                released += 1
        self.stats.released += released
        if self._maybe_move_start() or available:
            self._notify()
        return released > 0

    # -- persisted state -------------------------------------------------------------------

    def initialize(self, persisted: PersistedState | None) -> None:
        """The state read back from the share coordinator (Kafka's initialize): its start
        offset and batches, ACKNOWLEDGED and ARCHIVED offsets kept as done with and
        AVAILABLE ones (ACQUIRED when written) with their delivery counts; None when nothing
        was ever written (the start offset stays where share.auto.offset.reset put it).
        The SharePartition is ACTIVE then."""
        if persisted is not None:
            start = persisted.start_offset
            self.state_epoch = persisted.state_epoch
            self.start_offset = self.end_offset = start
            in_flight = self._in_flight
            for first, last, delivery_state, count in sorted(persisted.batches):
                state = RecordState(delivery_state)
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                for offset in range(max(first, start), last + 1):
                    in_flight[offset] = InFlightState(EMPTY_MEMBER_ID, None, state, count)
                    self._find_next |= state is RecordState.AVAILABLE
                self.end_offset = max(self.end_offset, last + 1)
            self._maybe_move_start()
        self.state = SharePartitionState.ACTIVE

    def persisted_state(self) -> tuple[int, list[StateBatch]]:
        """What to write to the share coordinator now: the start offset and the in-flight
        offsets as runs of one state and delivery count, an ACQUIRED offset written as
        AVAILABLE (its lock does not outlive this leader)."""
        batches: list[StateBatch] = []
        for offset, entry in self._in_flight.items():
            state = entry.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if batches:
                first, last, last_state, count = batches[-1]
                if last == offset - 1 and last_state == state and count == entry.delivery_count:
                    batches[-1] = (first, offset, last_state, count)
                    continue
            batches.append((offset, offset, int(state), entry.delivery_count))
        return self.start_offset, batches

    # -- the start offset ------------------------------------------------------------------

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """The log's start offset moved past the start offset (retention, DeleteRecords):
        the records before it are gone, whatever their state, and the window starts there
        (Kafka's updateCacheAndOffsets; an acknowledgement of them is then skipped)."""
        if log_start_offset <= self.start_offset:
            return
        in_flight = self._in_flight
        while in_flight:
            offset = next(iter(in_flight))
            if offset >= log_start_offset:
                break
            _, state = in_flight.popitem(last=False)
            self._unlock(state)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._maybe_move_start()
        self._notify()

    def close(self) -> None:
        """This broker no longer serves the share partition: cancel every lock."""
        for state in self._in_flight.values():
            self._unlock(state)
        self._in_flight.clear()
        self._find_next = False

    # -- internals -------------------------------------------------------------------------

    def _in_flight_between(self, first: int, last: int) -> list[tuple[int, InFlightState]]:
        """The in-flight entries with offsets in [first, last], ascending: by lookup for a
        short range, by a walk when the range is longer than the window holds."""
        in_flight = self._in_flight
        if last - first < len(in_flight):
            found = []
            for offset in range(first, last + 1):
                state = in_flight.get(offset)
                if state is not None:
                    found.append((offset, state))
            return found
        return [(o, s) for o, s in in_flight.items() if first <= o <= last]

    def _finish(self, state: InFlightState, new_state: RecordState) -> bool:
        """Move an ACQUIRED offset out of ACQUIRED, unlocking it; AVAILABLE becomes ARCHIVED
        once the delivery count reached its limit. True when it is AVAILABLE now."""
        self._unlock(state)
        if new_state is RecordState.AVAILABLE and state.delivery_count >= self.delivery_count_limit:
            new_state = RecordState.ARCHIVED
        state.state = new_state
        state.member_id = EMPTY_MEMBER_ID
        if new_state is RecordState.ARCHIVED:
            self.stats.archived += 1
        if new_state is RecordState.AVAILABLE:
            self._find_next = True
            return True
        return False

    @staticmethod
    def _unlock(state: InFlightState) -> None:
        lock = state.lock
        if lock is not None:
            state.lock = None
            lock.pending -= 1
            if lock.pending == 0:
                lock.cancel()

    def _maybe_move_start(self) -> bool:
        """Move the start offset past the leading ACKNOWLEDGED and ARCHIVED offsets (and
        the gaps among them), forgetting them. True when it moved."""
        in_flight = self._in_flight
        moved = False
        while in_flight:
            state = next(iter(in_flight.values()))
            if (
                state.state is not RecordState.ACKNOWLEDGED
                and state.state is not RecordState.ARCHIVED
            ):
                break
            in_flight.popitem(last=False)
            moved = True
        if moved:
            self.start_offset = next(iter(in_flight)) if in_flight else self.end_offset
        return moved

    def _release_on_lock_timeout(self, lock: AcquisitionLockTimerTask) -> None:
        """The lock expired: its offsets still ACQUIRED under it are AVAILABLE again (ARCHIVED
        at the delivery count limit)."""
        available = False
        expired = 0
        in_flight = self._in_flight
        for offset in lock.offsets:
            state = in_flight.get(offset)
            if state is not None and state.lock is lock:
                available |= self._finish(state, RecordState.AVAILABLE)
                expired += 1
        self.stats.lock_timeouts += expired
        if self._maybe_move_start() or available:
            self._notify()
        if expired and self.on_state_changed is not None:
            self.on_state_changed(self)

    def _notify(self) -> None:
        if self.on_acquirable is not None:
            self.on_acquirable(self)


def _validate_batches(batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
    """Kafka's checks of a request's acknowledgement batches for one partition."""
    previous_last = -1
    for first, last, types in batches:
        # As Kafka's: a batch may start at the offset the one before ends at (that offset,
        # acknowledged twice, is then INVALID_RECORD_STATE), not before it.
        if first > last or first < previous_last:
            return ErrorCode.INVALID_REQUEST
        if len(types) != 1 and len(types) != last - first + 1:
            return ErrorCode.INVALID_REQUEST
        if any(t not in _VALID_TYPES for t in types):
            return ErrorCode.INVALID_REQUEST
        previous_last = last
    return ErrorCode.NONE


_VALID_TYPES = frozenset(int(t) for t in AcknowledgeType)
