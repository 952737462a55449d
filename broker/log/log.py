"""A partition log: record batches in segments, a local tier and (optionally) a remote tier,
size- and time-bounded retention of each.

The local tier is a list of ``LogSegment``s, the newest one active (appends go there; it
rolls when the next batch would take it past ``segment.bytes``). With
``remote.storage.enable``, closed segments are copied to the remote tier (the
RemoteLogManager does it and calls ``segment_copied``); copied segments may then be dropped
locally beyond ``local.retention.bytes`` / ``local.retention.ms``, which moves the *local*
log start offset. ``retention.bytes`` / ``retention.ms`` bound the whole log, remote tier
included; the log start offset reported to clients is the start of the whole log.

Deletion is by whole segments, never the active one, as in Kafka. Nothing here reads a
clock: time-based retention is given the time.

Transactions: the producer state (broker/log/producer_state.py) knows each open
transaction; ``first_unstable_offset`` is where the first of them (or of those ended by a
marker not yet committed) starts, and the last stable offset (a partition's, the high
watermark at most) never passes it. Each transaction ended by an abort marker is kept in
``aborted_txns`` (Kafka's TransactionIndex, one for the whole log), which answers a
read_committed fetch's ``aborted_transactions``. A truncation replays the batch headers
left to rebuild both (truncation is rare; Kafka reloads from a snapshot instead); an
entry goes when its marker is truncated away or the log start passes it.
"""

from __future__ import annotations

import bisect
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from purgatory.broker.log.leader_epoch_cache import LeaderEpochCache
from purgatory.broker.log.log_segment import LogSegment, RemoteLogSegmentMetadata
from purgatory.broker.log.producer_state import CompletedTxn, ProducerStateManager
from purgatory.protocol.kafka_records import parse_end_txn_marker, stored_info
from purgatory.protocol.records import (
    KAFKA_MAGIC,
    BatchInfo,
    assign_offsets,
    batch_end,
    decode_records,
)

# Kafka's "use the value of retention.*" marker for local.retention.*.
USE_TOTAL_RETENTION = -2

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1  # the latest offset (the high watermark)
EARLIEST_TIMESTAMP = -2  # the log start offset
MAX_TIMESTAMP = -3  # the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # the local log start (tiered storage, KIP-1005)


class OffsetOutOfRange(Exception):
    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{log_start}, {log_end}]")
        self.offset = offset


@dataclass(frozen=True)
class LogConfig:
    """The topic configs a log obeys (Kafka's LogConfig); -1 means unlimited."""

    segment_bytes: int = 16 * 1024 * 1024
    segment_ms: int = 604_800_000
    retention_bytes: int = -1
    retention_ms: int = -1
    local_retention_bytes: int = USE_TOTAL_RETENTION
    local_retention_ms: int = USE_TOTAL_RETENTION
    remote_storage_enable: bool = False
    # Compaction (the log cleaner, broker/log/cleaner/): cleanup.policy has compact.
    compact: bool = False
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = sys.maxsize
    delete_retention_ms: int = 86_400_000

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, Any]) -> LogConfig:
        """A topic's parsed configs. Retention deletes only under ``cleanup.policy``
        ``delete``: as in Kafka, a compacted-only topic (or one with no policy) keeps every
        segment whatever ``retention.*`` say."""
        delete = "delete" in configs["cleanup.policy"]
        return cls(
            segment_bytes=int(configs["segment.bytes"]),
            segment_ms=int(configs["segment.ms"]),
            retention_bytes=int(configs["retention.bytes"]) if delete else -1,
            retention_ms=int(configs["retention.ms"]) if delete else -1,
            local_retention_bytes=int(configs["local.retention.bytes"]),
            local_retention_ms=int(configs["local.retention.ms"]),
            remote_storage_enable=bool(configs["remote.storage.enable"]),
            compact="compact" in configs["cleanup.policy"],
            min_cleanable_dirty_ratio=float(configs["min.cleanable.dirty.ratio"]),
            min_compaction_lag_ms=int(configs["min.compaction.lag.ms"]),
            max_compaction_lag_ms=int(configs["max.compaction.lag.ms"]),
            delete_retention_ms=int(configs["delete.retention.ms"]),
        )

    @property
    def effective_local_retention_bytes(self) -> int:
        if self.local_retention_bytes == USE_TOTAL_RETENTION:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def effective_local_retention_ms(self) -> int:
        if self.local_retention_ms == USE_TOTAL_RETENTION:
            return self.retention_ms
        return self.local_retention_ms


class LogMemory:
    """Bytes held by all local logs of a broker (every Log keeps ``used`` exact); an
    append that takes it past ``trigger`` calls ``over`` (the broker's memory budget,
    ``log_memory_budget``). A Log made without one has its own, without a trigger."""

    __slots__ = ("over", "trigger", "used")

    def __init__(self, over: Callable[[], None] | None = None) -> None:
        self.used = 0
        self.trigger = sys.maxsize
        self.over = over or (lambda: None)


class Log:
    """The batches of one partition replica, in offset order, in segments.

    ``log_start_offset`` is where the whole log starts (the remote tier's start when it
    holds older data); ``local_log_start_offset`` where the local segments start; reads
    from this object serve the local tier only. ``size_bytes`` counts local bytes,
    ``remote_size_bytes`` remote ones (a copied segment still held locally counts in both).

    A compacted log (the log cleaner) has gaps: batches keep their offsets when records
    leave them, so a batch may span more offsets than it holds records, a later batch may
    start after the previous one ends, and a segment's first batch after its base offset.
    ``cleaner_checkpoint`` is the cleaner's first dirty offset (Kafka's
    cleaner-offset-checkpoint): everything below it has been cleaned.
    """

    __slots__ = (
        "_appended_bytes",
        "_copied_to",
        "_segment_bases",
        "aborted_txns",
        "cleaner_checkpoint",
        "config",
        "leader_epochs",
        "local_log_start_offset",
        "log_end_offset",
        "log_start_offset",
        "memory",
        "producer_state",
        "remote_segments",
        "remote_size_bytes",
        "segments",
        "size_bytes",
    )

    def __init__(self, config: LogConfig | None = None, memory: LogMemory | None = None) -> None:
        self.config = config or LogConfig()
        self.memory = memory or LogMemory()
        self.segments: list[LogSegment] = [LogSegment(0)]
        self._segment_bases: list[int] = [0]
        self.remote_segments: list[RemoteLogSegmentMetadata] = []
        self._copied_to = 0  # every offset below this is in the remote tier (or deleted)
        self._appended_bytes = 0
        self.log_start_offset = 0
        self.local_log_start_offset = 0
        self.log_end_offset = 0
        self.size_bytes = 0
        self.remote_size_bytes = 0
        self.leader_epochs = LeaderEpochCache()
        self.producer_state = ProducerStateManager()
        # Aborted transactions in the order of their markers (Kafka's TransactionIndex).
        self.aborted_txns: list[CompletedTxn] = []
        self.cleaner_checkpoint = 0

    def __len__(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def tiered(self) -> bool:
        return self.config.remote_storage_enable

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    # -- appends ---------------------------------------------------------------------------

    def append(self, batch: bytes, info: BatchInfo, leader_epoch: int) -> int:
        """Append a validated batch, assigning its offsets; return its base offset. (An
        idempotent producer's batch is first checked with ``producer_state.check``.)"""
        base = self.log_end_offset
        self._store(base, assign_offsets(batch, base, leader_epoch), info, leader_epoch)
        return base

    def append_as_follower(self, batch: bytes, info: BatchInfo) -> None:
        """Append a batch exactly as the leader stored it (its offsets and leader epoch,
        which ``info`` read from it, kept; ``record_count`` the offsets it spans).

        Raises ValueError if it does not start at this log's end: a follower fetches from
        its log end, so anything else means the two logs disagree. In a compacted log it
        may start after it: the leader's cleaner removed the records between (a gap, as in
        Kafka). An empty log may start inside it (below).
        """
        base = info.base_offset
        end = self.log_end_offset
        if base < end < base + info.record_count and end == self.log_start_offset:
            # An empty log starting inside the batch: the leader's log start is not at a
            # batch's start (DeleteRecords moves it to any offset), and reads from it return
            # the batch holding it. Kafka's follower then starts its log over at the batch
            # (truncateFullyAndStartAt on UnexpectedAppendOffsetException); the log start
            # stays where the leader's is.
            self.reset_to(base)
            self._store(base, batch, info, info.partition_leader_epoch)
            self.maybe_increment_log_start_offset(end)
            return
        if base < end or (base > end and not self.config.compact):
            raise ValueError(f"replicated batch starts at offset {base}, the log ends at {end}")
        self._store(base, batch, info, info.partition_leader_epoch)

    def reset_to(self, offset: int) -> None:
        """Drop everything, both tiers, and start empty at ``offset`` (a follower behind the
        leader's log start begins again where the leader's local log begins)."""
        self.memory.used -= self.size_bytes
        self.segments = [LogSegment(offset)]
        self._segment_bases = [offset]
        self.remote_segments = []
        self._copied_to = offset
        self.size_bytes = self.remote_size_bytes = 0
        self.log_start_offset = self.local_log_start_offset = self.log_end_offset = offset
        self.leader_epochs.clear()
        self.producer_state.clear()
        self.aborted_txns = []
        self.cleaner_checkpoint = offset

    def truncate_to(self, offset: int) -> None:
        """Drop the records at ``offset`` and after (a follower's divergent suffix); a batch
        holding ``offset`` goes whole, as in Kafka, so the log may end before ``offset``.
        At or below the local log start, the log starts over empty at ``offset``."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.local_log_start_offset:
            self.reset_to(offset)
            return
        while self.segments[-1].base_offset >= offset:
            dropped = self.segments.pop()
            self._segment_bases.pop()
            self.size_bytes -= dropped.size_bytes
            self.memory.used -= dropped.size_bytes
        segment = self.segments[-1]  # starts below offset
        if segment.next_offset > offset:  # and holds it: drop from the batch holding it
            index = max(bisect.bisect_right(segment.bases, offset) - 1, 0)
            end = segment.bases[index]
            if index < len(segment.bases) and batch_end(segment.batches[index]) <= offset:
                index, end = index + 1, offset  # offset is in a gap after that batch
            removed = sum(len(b) for b in segment.batches[index:])
            segment.next_offset = end
            del segment.bases[index:], segment.batches[index:], segment.ends[index:]
            if not segment.batches:
                segment.first_timestamp = -1
            segment.size_bytes -= removed
            self.size_bytes -= removed
            self.memory.used -= removed
        # Byte positions go on from the last batch kept (reads measure spans by them).
        last = next((s.ends[-1] for s in reversed(self.segments) if s.ends), None)
        if last is not None:
            self._appended_bytes = last
        new_end = self.log_end_offset = segment.next_offset
        self.leader_epochs.truncate_from_end(new_end)
        if self.producer_state.transactional:
            self._rebuild_producer_state(new_end)
        else:
            self.producer_state.truncate_from(new_end)
        self.cleaner_checkpoint = min(self.cleaner_checkpoint, new_end)

    def _rebuild_producer_state(self, end: int) -> None:
        """The producer state and aborted transactions of the batches left below ``end``,
        replayed from their headers (a marker's record read too)."""
        self.aborted_txns = [t for t in self.aborted_txns if t.last_offset < end]
        state = self.producer_state
        state.clear()
        for segment in self.segments:
            for base, batch in zip(segment.bases, segment.batches, strict=True):
                if batch[16] != KAFKA_MAGIC:
                    continue
                info = stored_info(batch)
                if info.producer_id < 0:
                    continue
                if info.control:
                    commit, coordinator_epoch = parse_end_txn_marker(batch)
                    state.complete_txn(info, base, commit, coordinator_epoch)
                else:
                    state.update(info, base)

    def _store(self, base: int, batch: bytes, info: BatchInfo, leader_epoch: int) -> None:
        """Add a batch, its offsets assigned, at ``base``: a later epoch to the epoch cache,
        the batch to the active segment (rolled when full or old), size retention and the memory
        budget applied, then an idempotent producer's batch to the producer state. The
        cache and the producer state are called only when they have something to record:
        a call each saved per batch on the append path. A transaction marker is read
        first (a bad one raises CorruptRecordError before anything changes)."""
        marker = parse_end_txn_marker(batch) if info.control and info.producer_id >= 0 else None
        if leader_epoch > self.leader_epochs.latest_epoch:
            self.leader_epochs.assign(leader_epoch, base)
        config = self.config
        segment = self.segments[-1]
        first = segment.first_timestamp
        if segment.batches and (
            segment.size_bytes + info.size > config.segment_bytes
            # Kafka's time rule (LogSegment.shouldRoll): the batch's largest timestamp more
            # than segment.ms past the first batch's. Where that has none, Kafka goes by the
            # segment's creation on its clock; here such a segment rolls by size only.
            or (first >= 0 and info.max_timestamp - first > config.segment_ms)
        ):
            segment = LogSegment(base)  # roll
            self.segments.append(segment)
            self._segment_bases.append(base)
        if not segment.batches:
            segment.first_timestamp = info.max_timestamp
        segment.bases.append(base)
        segment.batches.append(batch)
        self._appended_bytes += info.size
        segment.ends.append(self._appended_bytes)
        segment.size_bytes += info.size
        segment.next_offset = self.log_end_offset = base + info.record_count
        if info.max_timestamp > segment.max_timestamp:
            segment.max_timestamp = info.max_timestamp
        self.size_bytes += info.size
        if (  # (the config's fields, not the log's properties: this runs on every append)
            config.retention_bytes >= 0
            and not config.remote_storage_enable
            and len(self.segments) > 1
            and _breaches(self.size_bytes, self.segments[0].size_bytes, config.retention_bytes)
        ):
            self.delete_old_segments(None)
        memory = self.memory
        memory.used += info.size
        if memory.used > memory.trigger:
            memory.over()
        if info.producer_id >= 0:
            if marker is None:
                self.producer_state.update(info, base)
            else:
                ended = self.producer_state.complete_txn(info, base, *marker)
                if ended.aborted:
                    self.aborted_txns.append(ended)

    # -- transactions ----------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """Where the first open transaction starts (or the first ended by a marker the high
        watermark has not passed yet: ``producer_state.on_high_watermark_updated``); None
        when there is none. Never below the log start."""
        first = self.producer_state.first_unstable_offset()
        return None if first is None else max(first, self.log_start_offset)

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction overlapping the offsets
        [``start``, ``upper``) (Kafka's collectAbortedTransactions): what a read_committed
        consumer of those offsets must drop."""
        txns = self.aborted_txns
        if not txns:
            return []
        out: list[tuple[int, int]] = []
        for i in range(bisect.bisect_left(txns, start, key=_marker_offset), len(txns)):
            txn = txns[i]
            if txn.first_offset < upper:
                out.append((txn.producer_id, txn.first_offset))
            if txn.last_stable_offset >= upper:  # every later one starts after upper
                break
        return out

    def _transactions_start_at(self, offset: int) -> None:
        """The log starts at ``offset`` now: aborted transactions wholly below it go."""
        txns = self.aborted_txns
        if txns and txns[0].last_offset < offset:
            self.aborted_txns = [t for t in txns if t.last_offset >= offset]

    # -- the remote tier ---------------------------------------------------------------------

    def segments_to_copy(self, high_watermark: int) -> list[LogSegment]:
        """Closed local segments not yet in the remote tier whose records are all below
        ``high_watermark`` (Kafka copies only committed data, below the last stable
        offset: the RemoteLogManager gives that), oldest first."""
        out = []
        for segment in self.segments[:-1]:
            if segment.next_offset > high_watermark:
                break
            if segment.base_offset >= self._copied_to:
                out.append(segment)
        return out

    def segment_copied(self, segment: LogSegment) -> None:
        """The remote tier now holds ``segment`` (it must be the next one in order)."""
        if segment.base_offset != self._copied_to:
            raise ValueError(
                f"segment at {segment.base_offset} copied out of order: the remote tier "
                f"ends at {self._copied_to}"
            )
        self.remote_segments.append(segment.metadata())
        self.remote_size_bytes += segment.size_bytes
        self._copied_to = segment.next_offset

    @property
    def remote_log_end_offset(self) -> int:
        """Every offset below this was copied to the remote tier."""
        return self._copied_to

    def remote_segment_for(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The remote segment holding ``offset``, if the remote tier has it."""
        index = bisect.bisect_right(self.remote_segments, offset, key=lambda s: s.base_offset) - 1
        if index >= 0 and offset < self.remote_segments[index].next_offset:
            return self.remote_segments[index]
        return None

    def in_remote_tier(self, offset: int) -> bool:
        """``offset`` is gone locally but the remote tier has it."""
        return self.log_start_offset <= offset < self.local_log_start_offset

    # -- retention ---------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None) -> list[RemoteLogSegmentMetadata]:
        """Apply retention, oldest segments first, never the active one:

        A. whole-log retention (``retention.bytes`` / ``retention.ms``) to remote segments;
        B. local segments the remote tier no longer holds (or never copied) go with A's rule;
        C. in a tiered log, copied local segments go by local retention
           (``local.retention.bytes`` / ``local.retention.ms``).

        Size rules delete a segment only if what remains is still at least the limit
        (Kafka's rule); time rules compare the segment's largest timestamp to ``now_ms``,
        and apply only when it is given. Returns the remote segments deleted (the caller
        deletes them from the remote store)."""
        cfg = self.config
        deleted_remote: list[RemoteLogSegmentMetadata] = []
        # The whole log: the remote tier plus local bytes not copied to it.
        total = self.remote_size_bytes + sum(
            s.size_bytes for s in self.segments if s.next_offset > self._copied_to
        )
        while self.remote_segments:  # A
            oldest = self.remote_segments[0]
            if not _deletable(oldest, total, cfg.retention_bytes, now_ms, cfg.retention_ms):
                break
            self.remote_segments.pop(0)
            self.remote_size_bytes -= oldest.size_bytes
            total -= oldest.size_bytes
            deleted_remote.append(oldest)
            self.log_start_offset = max(self.log_start_offset, oldest.next_offset)
        local_bytes = self.size_bytes
        while len(self.segments) > 1:
            oldest_local = self.segments[0]
            if oldest_local.next_offset <= self.log_start_offset:
                pass  # B: its remote copy went in A
            elif oldest_local.next_offset > self._copied_to:  # B: never copied
                if not _deletable(
                    oldest_local, total, cfg.retention_bytes, now_ms, cfg.retention_ms
                ):
                    break
                total -= oldest_local.size_bytes
                self.log_start_offset = max(self.log_start_offset, oldest_local.next_offset)
                if self.tiered:  # nothing left to copy below it
                    self._copied_to = oldest_local.next_offset
            elif not _deletable(  # C
                oldest_local,
                local_bytes,
                cfg.effective_local_retention_bytes,
                now_ms,
                cfg.effective_local_retention_ms,
            ):
                break
            local_bytes -= oldest_local.size_bytes
            self._drop_oldest_local()
        self._start_moved()
        return deleted_remote

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start up to ``offset`` (Kafka's ``maybeIncrementLogStartOffset``:
        DeleteRecords on a leader, the leader's log start on a follower); True if it moved.
        The caller keeps ``offset`` at most the high watermark. Segments (of either tier)
        wholly below it go now, as does the active one when nothing of it is left; a
        segment holding ``offset`` stays, and reads below it are out of range."""
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        while self.remote_segments and self.remote_segments[0].next_offset <= offset:
            self.remote_size_bytes -= self.remote_segments.pop(0).size_bytes
        while self.segments[0].next_offset <= offset and self.segments[0].batches:
            if len(self.segments) == 1:  # nothing left of the active segment: a new one
                self.segments.append(LogSegment(self.log_end_offset))
                self._segment_bases.append(self.log_end_offset)
            if self.tiered:  # nothing left to copy below it
                self._copied_to = max(self._copied_to, self.segments[0].next_offset)
            self._drop_oldest_local()
        self.local_log_start_offset = max(self.local_log_start_offset, offset)
        self.leader_epochs.truncate_from_start(offset)
        self._transactions_start_at(offset)
        return True

    def evict_oldest_segment(self, high_watermark: int) -> int:
        """Delete the oldest closed local segment for the broker's memory budget, as
        retention would: only one whose records are all below ``high_watermark``
        (committed), and in a tiered log only one the remote tier holds. Returns the bytes
        freed; 0 when no segment may go."""
        if len(self.segments) < 2:
            return 0
        oldest = self.segments[0]
        if oldest.next_offset > high_watermark:
            return 0
        if self.tiered and oldest.next_offset > self._copied_to:
            return 0
        self._drop_oldest_local()
        self._start_moved()
        return oldest.size_bytes

    # -- the log cleaner -------------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> bool:
        """Put ``new`` (the cleaned copy of ``old``, consecutive closed segments) in their
        place; False, and nothing changed, if the log no longer holds ``old`` as they were
        (retention, truncation or DeleteRecords ran meanwhile). ``new`` spans the offsets
        ``old`` did; None when nothing of them is left: the next segment then starts where
        they started. Byte positions (``ends``) stay those of the old batches' neighbours:
        spans that cross a cleaned segment count what it held before."""
        try:
            first = next(i for i, s in enumerate(self.segments) if s is old[0])
        except StopIteration:
            return False
        if (
            first + len(old) >= len(self.segments)  # never the active segment
            or any(self.segments[first + i] is not s for i, s in enumerate(old))
        ):
            return False
        removed = sum(s.size_bytes for s in old)
        added = 0 if new is None else new.size_bytes
        if new is None:
            following = self.segments[first + len(old)]
            following.base_offset = old[0].base_offset
            self.segments[first : first + len(old) + 1] = [following]
        else:
            self.segments[first : first + len(old)] = [new]
        self._segment_bases = [s.base_offset for s in self.segments]
        self.size_bytes += added - removed
        self.memory.used += added - removed
        return True

    def release(self) -> None:
        """The broker no longer keeps this log (its replica was removed): its bytes leave
        the memory account."""
        self.memory.used -= self.size_bytes
        self.memory = LogMemory()

    def _drop_oldest_local(self) -> None:
        segment = self.segments.pop(0)
        self._segment_bases.pop(0)
        self.size_bytes -= segment.size_bytes
        self.memory.used -= segment.size_bytes
        self.local_log_start_offset = self.segments[0].base_offset

    def _start_moved(self) -> None:
        """Local segments went: the log starts at the local start unless the remote tier
        holds older records."""
        if not self.remote_segments:
            self.log_start_offset = max(self.log_start_offset, self.local_log_start_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._transactions_start_at(self.log_start_offset)

    # -- reads -------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> list[bytes]:
        """Local batches holding ``offset`` onwards, below ``max_offset`` (the high
        watermark), across segments.

        The first batch is returned even if it is larger than ``max_bytes`` (so a consumer
        always makes progress); later ones only while the total stays within it.
        Raises OffsetOutOfRange below the local log start or above the log end.
        """
        if offset < self.local_log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.local_log_start_offset, self.log_end_offset)
        limit = self.log_end_offset if max_offset is None else max_offset
        if offset >= limit:
            return []
        s = bisect.bisect_right(self._segment_bases, offset) - 1
        segments = self.segments
        out: list[bytes] = []
        total = 0
        while s < len(segments):
            segment = segments[s]
            bases = segment.bases
            index = max(bisect.bisect_right(bases, offset) - 1, 0) if not out else 0
            batches = segment.batches
            n = len(batches)
            while index < n and bases[index] < limit:
                batch = batches[index]
                size = len(batch)
                if out and total + size > max_bytes:
                    return out
                out.append(batch)
                total += size
                index += 1
            if index < n:  # stopped at the limit
                return out
            s += 1
        return out

    def batch_checksums(self, from_offset: int) -> list[tuple[int, int, int]]:
        """(base offset, next offset, CRC-32 of its bytes) of each local batch ending after
        ``from_offset``: what tells two replicas apart without shipping their records (a
        follower stores the leader's batches byte for byte)."""
        out: list[tuple[int, int, int]] = []
        for segment in self.segments:
            if segment.next_offset <= from_offset:
                continue
            bases = segment.bases
            for i, batch in enumerate(segment.batches):
                end = bases[i + 1] if i + 1 < len(bases) else segment.next_offset
                if end > from_offset:  # (a compacted batch: to the next, its gap with it)
                    out.append((bases[i], end, zlib.crc32(batch)))
        return out

    def available_bytes(self, offset: int, max_offset: int) -> int:
        """Local bytes a fetch from ``offset`` would find below ``max_offset`` (whole batches,
        from the one holding ``offset``). O(log n)."""
        if offset >= max_offset or offset < self.local_log_start_offset:
            return 0
        first_segment = self.segments[bisect.bisect_right(self._segment_bases, offset) - 1]
        last_segment = self.segments[bisect.bisect_right(self._segment_bases, max_offset - 1) - 1]
        first = max(bisect.bisect_right(first_segment.bases, offset) - 1, 0)
        last = bisect.bisect_left(last_segment.bases, max_offset) - 1
        if last < 0 or not first_segment.bases or (first_segment is last_segment and last < first):
            return 0
        return (
            last_segment.ends[last] - first_segment.ends[first] + len(first_segment.batches[first])
        )

    def fetch_offset_by_timestamp(self, timestamp: int, high_watermark: int) -> tuple[int, int]:
        """(timestamp, offset) for ListOffsets (Kafka's ``fetchOffsetByTimestamp``): -1
        asks for the latest offset (the high watermark), -2 the earliest (the log start),
        -3 the record with the largest timestamp, -4 the earliest local offset, else the
        first offset whose record timestamp is at least ``timestamp``; (-1, -1) when no
        record qualifies. Raises ValueError for another negative timestamp."""
        if timestamp == LATEST_TIMESTAMP:
            return -1, high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == EARLIEST_LOCAL_TIMESTAMP:
            return -1, self.local_log_start_offset
        if timestamp == MAX_TIMESTAMP:
            found = self.max_timestamp_record(high_watermark)
        elif timestamp < 0:
            raise ValueError(f"no ListOffsets timestamp {timestamp}")
        else:
            found = self.offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        offset, ts = found
        return ts, offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first local record with timestamp >= ``timestamp``
        (none of those below the local start that a segment still holds)."""
        start = self.local_log_start_offset
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            for batch in segment.batches:
                for record in decode_records(batch):
                    if record.timestamp >= timestamp and record.offset >= start:
                        return record.offset, record.timestamp
        return None

    def max_timestamp_record(self, below: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first local record below offset ``below`` with the
        largest timestamp (ListOffsets -3)."""
        best: tuple[int, int] | None = None
        for segment in self.segments:
            if segment.base_offset >= below or (
                best is not None and segment.max_timestamp <= best[1]
            ):
                continue
            for batch in segment.batches:
                for record in decode_records(batch):
                    if self.local_log_start_offset <= record.offset < below and (
                        best is None or record.timestamp > best[1]
                    ):
                        best = record.offset, record.timestamp
        return best


def _marker_offset(txn: CompletedTxn) -> int:
    return txn.last_offset


def _deletable(
    segment: LogSegment | RemoteLogSegmentMetadata,
    total: int,
    limit_bytes: int,
    now_ms: int | None,
    limit_ms: int,
) -> bool:
    return _breaches(total, segment.size_bytes, limit_bytes) or (
        now_ms is not None and limit_ms >= 0 and now_ms - segment.max_timestamp > limit_ms
    )


def _breaches(total: int, segment_size: int, limit: int) -> bool:
    """Deleting a segment of ``segment_size`` still leaves at least ``limit`` bytes."""
    return limit >= 0 and total - segment_size >= limit
