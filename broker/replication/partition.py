"""Partition: one partition replica on this broker, as leader or follower (Kafka's Partition).

As leader it tracks each follower's log end offset (LEO) from the offsets the follower
fetches at, when each was last caught up, the ISR, and the high watermark (HW): the
smallest LEO in the ISR, which never moves back. As follower it only appends what its
leader sends, with the leader's offsets, and keeps HW = min(leader HW, own LEO). The last stable offset (LSO),
where read_committed consumers stop, is the HW or the first offset of the first
transaction still open (or whose marker the HW has not passed), whichever is less.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import msgspec

from purgatory.broker.log.log import Log
from purgatory.broker.log.log_validator import LogValidator, RecordValidationError
from purgatory.common.broker_state import ReplicaInfo
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.kafka_records import end_txn_marker, validate
from purgatory.protocol.records import batch_base_offset, is_kafka_batch

UNKNOWN_OFFSET = -1  # a follower's log end before its first fetch from this leadership


class AppendRefused(Exception):
    """A batch the leader will not append: the error code and the message for the
    producer."""

    def __init__(
        self, code: int, message: str, record_errors: tuple[tuple[int, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors  # (index in the batch, message) per bad record


DELETE_TO_HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "up to the high watermark"


class DeleteRecordsRefused(Exception):
    """A DeleteRecords this leader refuses: the error code and Kafka's message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class LeaderAppend(msgspec.Struct, gc=False):
    """Where a batch the leader took landed: its first offset and the offset the high
    watermark must pass for it to be committed. ``records`` is how many records were
    appended: 0 for an idempotent producer's retry, answered from where its batch landed
    before (a batch holds at least one record). ``log_append_time_ms``: the time the
    leader stamped the batch with on a LogAppendTime topic, else -1."""

    base_offset: int
    required_offset: int
    records: int
    log_append_time_ms: int = -1


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET  # as its fetches tell (for DeleteRecords)
    last_caught_up_ms: int = 0  # the follower had everything the leader had at this time
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = 0  # the leader's LEO when the follower last fetched
    broker_epoch: int = -1  # the run of the follower its fetches came from (KIP-903)


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: str
    broker_id: int
    log: Log
    max_message_bytes: int
    min_insync_replicas: int
    validator: LogValidator
    # unclean.leader.election.enable of its topic: only then may it lose records it saw
    # acknowledged (a follower truncating to an uncleanly elected leader).
    unclean_allowed: bool = False
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    high_watermark: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # The ISR proposed to the controller and not answered yet (an AlterPartition in
    # flight), else None. Until it is committed, the high watermark counts the members
    # of both (Kafka's maximal ISR): a follower being added has to hold what is
    # acknowledged meanwhile, and one being removed still counts.
    proposed_isr: list[int] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def isr_change_pending(self) -> bool:
        return self.proposed_isr is not None

    def maximal_isr(self) -> list[int]:
        proposed = self.proposed_isr
        if proposed is None:
            return self.isr
        return self.isr + [r for r in proposed if r not in self.isr]

    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, at most the replication factor (Kafka's effectiveMinIsr):
        a topic of fewer replicas than its min.insync.replicas still takes acks=-1."""
        return min(self.min_insync_replicas, len(self.replicas))

    def under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first unstable offset) (Kafka's lastStableOffset): what a
        read_committed consumer may read below."""
        hw = self.high_watermark
        state = self.log.producer_state
        if not state.transactional:
            return hw
        state.on_high_watermark_updated(hw)
        first = self.log.first_unstable_offset
        return hw if first is None or first > hw else first

    # -- appends ---------------------------------------------------------------------------

    def append_records_to_leader(
        self, records: bytes, acks: int, now_ms: int, kafka_batches_only: bool = False
    ) -> LeaderAppend:
        """Validate a producer's batch and append it to the log (Kafka's
        appendRecordsToLeader with its LogValidator, broker/log/log_validator.py; ``now_ms``
        is wall-clock time, for the timestamp bounds). Raises ``AppendRefused``: the batch
        is too large (for max.message.bytes or a segment), acks=-1 finds the ISR below
        min.insync.replicas, the Kafka listener sent a batch that is not Kafka's v2
        (``kafka_batches_only``), the validator refuses it, or the producer's state refuses
        its sequence."""
        size = len(records)
        if size > self.max_message_bytes:
            raise AppendRefused(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {size} bytes exceeds max.message.bytes {self.max_message_bytes}",
            )
        if acks == -1 and len(self.isr) < self.effective_min_isr:
            raise AppendRefused(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{len(self.isr)} in-sync replicas {self.isr}, "
                f"min.insync.replicas is {self.effective_min_isr}",
            )
        if kafka_batches_only and not is_kafka_batch(records):
            raise AppendRefused(
                ErrorCode.INVALID_RECORD, "Produce v3+ carries record batches of magic 2 only"
            )
        if kafka_batches_only and batch_base_offset(records) != 0:  # Kafka: clients send 0
            raise AppendRefused(
                ErrorCode.INVALID_RECORD,
                f"a producer's batch has base offset {batch_base_offset(records)}, not 0",
            )
        try:
            info = self.validator.validate(records, now_ms)
        except RecordValidationError as exc:
            raise AppendRefused(exc.code, exc.message, exc.record_errors) from exc
        log = self.log
        if size > log.config.segment_bytes:  # Kafka's RecordBatchTooLargeException
            raise AppendRefused(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"batch of {size} bytes exceeds segment.bytes {log.config.segment_bytes}",
            )
        if info.producer_id >= 0:  # an idempotent producer: its sequence is checked
            try:
                retried = log.producer_state.check(info)
            except KafkaError as exc:
                raise AppendRefused(exc.code, str(exc)) from exc
            if retried is not None:  # a retry: answered, not appended
                return LeaderAppend(retried.first_offset, retried.last_offset + 1, 0)
        append_time = -1
        validator = self.validator
        if validator.rewrites:  # recompressed or stamped (LogAppendTime)
            records, info = validator.assign(records, info, now_ms)
            append_time = now_ms if validator.log_append_time else -1
            if len(records) > self.max_message_bytes:  # recompressed larger, as Kafka checks
                raise AppendRefused(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {len(records)} bytes once recompressed exceeds "
                    f"max.message.bytes {self.max_message_bytes}",
                )
        base = log.append(records, info, self.leader_epoch)
        return LeaderAppend(base, log.log_end_offset, info.record_count, append_time)

    def append_txn_marker_to_leader(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
    ) -> LeaderAppend:
        """Write the marker ending ``producer_id``'s transaction (Kafka's
        appendRecordsToLeader with AppendOrigin.COORDINATOR and acks=-1: no LogValidator,
        the producer state's checks G). Raises ``AppendRefused``: NOT_ENOUGH_REPLICAS
        below min.insync.replicas, INVALID_PRODUCER_EPOCH or
        TRANSACTION_COORDINATOR_FENCED."""
        if len(self.isr) < self.effective_min_isr:
            raise AppendRefused(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{len(self.isr)} in-sync replicas {self.isr}, "
                f"min.insync.replicas is {self.effective_min_isr}",
            )
        marker = end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        info = validate(marker)
        log = self.log
        try:
            log.producer_state.check_marker(info, coordinator_epoch)
        except KafkaError as exc:
            raise AppendRefused(exc.code, str(exc)) from exc
        base = log.append(marker, info, self.leader_epoch)
        return LeaderAppend(base, log.log_end_offset, 1)

    # -- roles ----------------------------------------------------------------------------

    def make_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        now_ms: int,
    ) -> bool:
        """Take (or keep) leadership; True if this is a new leadership (a new epoch).

        Followers start as caught up now: they get ``replica.lag.time.max.ms`` to show they
        keep up, as in Kafka. What they hold is unknown until they fetch from this
        leadership: a new leader's high watermark waits for its ISR's fetches, and no
        follower joins the ISR on what it fetched from an earlier leader."""
        new = not self.is_leader or leader_epoch != self.leader_epoch
        old_isr = self.isr
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.proposed_isr = None
        if new:
            leo = self.log.log_end_offset
            self.followers = {
                r: FollowerState(
                    last_caught_up_ms=now_ms, last_fetch_ms=now_ms, last_fetch_leader_leo=leo
                )
                for r in replicas
                if r != self.broker_id
            }
            self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
            # Kafka's makeLeader: the new epoch starts at the log end now, before any append,
            # so OffsetForLeaderEpoch of a leader that has written nothing yet is its LEO.
            self.log.leader_epochs.assign(leader_epoch, leo)
        else:
            for r in replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerState(
                        last_caught_up_ms=now_ms, last_fetch_ms=now_ms
                    )
            for r in set(old_isr) - set(isr):
                # Removed by the controller (it may have restarted without its log): what it
                # holds is known again from its next fetch, not from an older incarnation's.
                if r in self.followers:
                    self.followers[r].log_end_offset = UNKNOWN_OFFSET
        return new

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {}
        self.proposed_isr = None

    # -- leader side ---------------------------------------------------------------------

    def record_follower_fetch(
        self,
        follower_id: int,
        fetch_offset: int,
        now_ms: int,
        broker_epoch: int = -1,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> None:
        """A follower fetched at ``fetch_offset``: it has everything below it (its LEO),
        and its log starts at ``log_start_offset``.

        Kafka's rule for ``last_caught_up``: caught up now if it asked for the leader's log
        end; caught up as of its previous fetch if it asked for at least what the leader's
        log end was then. A fetch from another run of the follower (a new broker epoch)
        starts its record afresh: nothing the earlier run fetched speaks for this one."""
        state = self.followers.get(follower_id)
        if state is None:
            return
        if broker_epoch >= 0 and state.broker_epoch != broker_epoch:
            if state.broker_epoch >= 0:
                state.last_caught_up_ms = state.last_fetch_ms = 0
                state.last_fetch_leader_leo = self.log.log_end_offset
            state.broker_epoch = broker_epoch
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (the leader's own included); True if it moved
        up."""
        if not self.is_leader:
            return False
        hw = self.log.log_end_offset
        for replica in self.maximal_isr():
            if replica != self.broker_id:
                state = self.followers.get(replica)
                hw = min(hw, state.log_end_offset if state is not None else UNKNOWN_OFFSET)
        if hw > self.high_watermark:
            self.high_watermark = hw
            if self.log.producer_state.unreplicated:  # ended transactions now stable
                self.log.producer_state.on_high_watermark_updated(hw)
            return True
        return False

    def low_watermark(self, live_brokers: AbstractSet[int]) -> int:
        """The smallest log start offset of the replicas on live brokers, this one
        included (Kafka's ``lowWatermarkIfLeader``): DeleteRecords is done when it passes
        the offset asked for. A follower yet to fetch from this leadership counts as -1."""
        low = self.log.log_start_offset
        for replica, state in self.followers.items():
            if replica in live_brokers and state.log_start_offset < low:
                low = state.log_start_offset
        return low

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords on this leader (Kafka's ``deleteRecordsOnLeader``): move the log
        start to ``offset`` (-1: the high watermark) and return the offset the low
        watermark must reach. Raises ``DeleteRecordsRefused``: OFFSET_OUT_OF_RANGE for an
        offset below -1 or past the high watermark."""
        requested = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if requested < 0:
            raise DeleteRecordsRefused(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"The offset {requested} for partition {self.topic}-{self.index} is not valid",
            )
        if requested > self.high_watermark:
            raise DeleteRecordsRefused(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {requested} of partition "
                f"{self.topic}-{self.index} since it is larger than the high watermark "
                f"{self.high_watermark}",
            )
        self.log.maybe_increment_log_start_offset(requested)
        return requested

    def out_of_sync_followers(self, now_ms: int, lag_time_ms: int) -> list[int]:
        """ISR members (the leader aside) not caught up within ``lag_time_ms``."""
        return [
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_time_ms
        ]

    def may_join_isr(self, follower_id: int) -> bool:
        """A follower outside the ISR that has reached the HW (as its fetches from this
        leadership tell) may join it; Kafka asks this of the follower that just fetched."""
        state = self.followers.get(follower_id)
        return (
            state is not None
            and follower_id not in self.isr
            and state.log_end_offset >= max(self.high_watermark, 0)
            and state.log_end_offset != UNKNOWN_OFFSET
        )

    # -- follower side -------------------------------------------------------------------

    def follower_update_high_watermark(self, leader_high_watermark: int) -> None:
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if self.log.producer_state.unreplicated:  # ended transactions now stable
            self.log.producer_state.on_high_watermark_updated(self.high_watermark)

    def follower_update_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """The leader's log start, from its fetch answer (records deleted there): this
        replica's log starts there too, never past its own high watermark; True if it
        moved."""
        return self.log.maybe_increment_log_start_offset(
            min(leader_log_start_offset, self.high_watermark)
        )

    # -- observation ----------------------------------------------------------------------

    def describe(self) -> ReplicaInfo:
        """This replica as the admin state dump (GET /v1/state) shows it."""
        log = self.log
        return ReplicaInfo(
            topic=self.topic,
            partition=self.index,
            topic_id=self.topic_id,
            role="leader" if self.is_leader else "follower",
            leader=self.leader_id,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            replicas=list(self.replicas),
            isr=list(self.isr),
            log_start_offset=log.log_start_offset,
            local_log_start_offset=log.local_log_start_offset,
            high_watermark=self.high_watermark,
            log_end_offset=log.log_end_offset,
            replica_log_end_offsets=(
                {str(self.broker_id): log.log_end_offset}
                | {str(r): f.log_end_offset for r, f in self.followers.items()}
                if self.is_leader
                else {}
            ),
            size_bytes=log.size_bytes,
            batches=len(log),
            segments=len(log.segments),
            remote_segments=len(log.remote_segments),
            remote_size_bytes=log.remote_size_bytes,
            remote_log_end_offset=log.remote_log_end_offset,
            log_config=dataclasses.asdict(log.config),
            min_insync_replicas=self.min_insync_replicas,
        )
