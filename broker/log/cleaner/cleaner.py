"""The Cleaner: one compaction of one log, in bounded slices (Kafka's ``Cleaner``).

A cleaning of a log covers its closed segments from the log start to ``end`` (the first
uncleanable offset the LogCleanerManager found, a segment boundary), in two phases:

1. **the offset map** (Kafka's ``OffsetMap``, here a dict): the dirty segments (from the
   log's ``cleaner_checkpoint`` to ``end``) are read and each key mapped to its latest
   offset. It holds at most ``max_map_entries`` keys (``log.cleaner.dedupe.buffer.size``
   as Kafka sizes its map); when full, the cleaning ends at the segment that filled it.
2. **the copy**: every segment from the log start to ``end``, in groups whose total size
   fits ``segment.bytes`` (Kafka's ``groupSegmentsBySize``: small cleaned segments merge),
   is copied keeping a record only if

   A. it has a key (a keyless record is dropped, as Kafka's cleaner drops it; the
      LogValidator refuses them on a compacted topic);
   B. no later offset of its key is in the map;
   C. it is not a tombstone (null value) whose batch's delete horizon has passed: the first
      cleaning that keeps a tombstone gives its batch the horizon now +
      ``delete.retention.ms`` (KIP-534; Kafka writes it in the batch header, here it is
      kept in ``horizons``, by batch base offset), a later cleaning after it drops it.

   A batch keeps its offsets (base and ``last_offset_delta``): consumers see gaps, the log
   end never moves, offsets are never reused. A batch left empty goes, unless it is an
   idempotent producer's last batch (Kafka keeps its header so the producer's sequence
   survives). A batch that loses nothing is kept as the same bytes. Each group replaces
   the segments it came from at once (``Log.replace_segments``); if the log changed under
   the cleaning (retention, truncation, DeleteRecords) so that the group or a segment the
   map was read from is no longer there as it was, it is aborted there (what was swapped
   before stays: it was cleaned against records still held).

Control batches (transaction markers) are kept whole, and so are transactional batches:
when transactions exist, this is where aborted transactions' records and markers past
their horizon are removed (Kafka's ``Cleaner.shouldDiscardBatch`` and the aborted
transaction index).

Work is bounded: ``slices()`` is an iterator whose every step reads at most
``slice_records`` records (or one batch, if a batch holds more), so the broker runs a
cleaning a step per event-loop callback (broker/log/cleaner/log_cleaner.py) and unit tests
step it by hand. Nothing here reads a clock: the wall time is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from purgatory.broker.log.log import Log
from purgatory.broker.log.log_segment import LogSegment
from purgatory.protocol import kafka_records
from purgatory.protocol.kafka_records import CONTROL_FLAG, TRANSACTIONAL_FLAG
from purgatory.protocol.records import KAFKA_MAGIC, batch_end, decode_records, retained_runs

SLICE_RECORDS = 1000  # records read per slice: about 2-3 ms of this module's work
_ATTRIBUTES_LOW = 22  # the low byte of a batch's int16 attributes (either format)
_PRODUCER_ID_AT = 43  # a v2 batch's producer id


@dataclass
class CleanerStats:
    """What one cleaning did (Kafka's CleanerStats): reads and writes of the copy phase,
    records the map read, slices and the most records one slice read."""

    map_records: int = 0
    records_read: int = 0
    bytes_read: int = 0
    records_written: int = 0
    bytes_written: int = 0
    tombstones_removed: int = 0
    invalid_records: int = 0
    slices: int = 0
    max_slice_records: int = 0
    aborted: bool = False

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_written

    @property
    def bytes_removed(self) -> int:
        return self.bytes_read - self.bytes_written


class Cleaning:
    """One cleaning of ``log`` up to ``end`` at wall time ``now_ms``: iterate ``slices()``
    to run it; ``stats`` says what it did. ``horizons`` (batch base offset -> delete
    horizon) belongs to the log and outlives the cleaning."""

    def __init__(
        self,
        log: Log,
        end: int,
        now_ms: int,
        horizons: dict[int, int],
        *,
        max_map_entries: int = 1 << 62,
        slice_records: int = SLICE_RECORDS,
    ) -> None:
        self.log = log
        self.end = end
        self.now_ms = now_ms
        self.horizons = horizons
        self.max_map_entries = max_map_entries
        self.slice_records = slice_records
        self.offset_map: dict[bytes, int] = {}
        self.stats = CleanerStats()
        self._in_slice = 0

    def _tick(self, records: int) -> bool:
        """Count records read; True when the slice is full (the caller yields)."""
        self._in_slice += records
        if self._in_slice >= self.slice_records:
            self._end_slice()
            return True
        return False

    def _end_slice(self) -> None:
        self.stats.slices += 1
        self.stats.max_slice_records = max(self.stats.max_slice_records, self._in_slice)
        self._in_slice = 0

    def slices(self) -> Iterator[None]:
        """Run the cleaning a bounded step at a time."""
        log = self.log
        first_dirty = log.cleaner_checkpoint
        closed = [s for s in log.segments[:-1] if s.next_offset <= self.end]
        # 1. the offset map, over the dirty segments
        mapped_to: int | None = None
        mapped: list[tuple[LogSegment, int]] = []  # each with its batch count
        offset_map = self.offset_map
        for segment in closed:
            if segment.next_offset <= first_dirty:
                continue
            for batch in segment.batches:
                entries = _entries(batch)
                for offset, key, _, _ in entries:
                    if key is not None:
                        offset_map[key] = offset
                self.stats.map_records += len(entries)
                if self._tick(len(entries)):
                    yield
            mapped_to = segment.next_offset
            mapped.append((segment, len(segment.batches)))
            if len(offset_map) >= self.max_map_entries:
                break
        # Nothing dirty: the clean head is copied again (tombstones past their horizon).
        end = min(self.end, first_dirty) if mapped_to is None else mapped_to
        segments = [s for s in closed if s.next_offset <= end]
        if not segments:
            self._end_slice()
            return
        # 2. the copy, from the log start to the end of the dirty segments mapped
        replaced: set[int] = set()  # segments this cleaning put its copies in place of
        for group in _groups(segments, log.config.segment_bytes):
            cleaned = LogSegment(group[0].base_offset)
            cleaned.next_offset = group[-1].next_offset
            # The largest timestamp the group had (retention under compact,delete goes by
            # it): a v2 header's max timestamp is the producer's, not checked.
            cleaned.max_timestamp = max(s.max_timestamp for s in group)
            position = _first_position(group)
            for segment in group:
                for batch in segment.batches:
                    for kept in self._clean_batch(batch):
                        position += len(kept)
                        cleaned.bases.append(int.from_bytes(kept[:8], "big", signed=True))
                        cleaned.batches.append(kept)
                        cleaned.ends.append(position)
                        cleaned.size_bytes += len(kept)
                    if self._in_slice >= self.slice_records:
                        self._end_slice()
                        yield
            if not _still_holds(log, mapped, replaced) or not log.replace_segments(
                group, cleaned if cleaned.batches else None
            ):
                self.stats.aborted = True
                self._end_slice()
                return
            replaced.update(id(s) for s in group)
        log.cleaner_checkpoint = max(log.cleaner_checkpoint, end)
        for base in [b for b in self.horizons if b < log.log_start_offset]:
            del self.horizons[base]
        self._end_slice()

    def _clean_batch(self, batch: bytes) -> list[bytes]:
        """The batches left of ``batch`` (itself when it loses nothing)."""
        stats = self.stats
        stats.bytes_read += len(batch)
        kafka = batch[16] == KAFKA_MAGIC
        if kafka and batch[_ATTRIBUTES_LOW] & (CONTROL_FLAG | TRANSACTIONAL_FLAG):
            stats.bytes_written += len(batch)  # transactions: kept whole (see the module)
            return [batch]
        entries = _entries(batch)
        self._in_slice += len(entries)
        stats.records_read += len(entries)
        base = int.from_bytes(batch[:8], "big", signed=True)
        horizon = self.horizons.get(base)
        keep: list[bool] = []
        tombstone_kept = False
        for offset, key, tombstone, _ in entries:
            if key is None:  # A
                stats.invalid_records += 1
                keep.append(False)
            elif self.offset_map.get(key, -1) > offset:  # B
                keep.append(False)
            elif tombstone and horizon is not None and self.now_ms >= horizon:  # C
                stats.tombstones_removed += 1
                keep.append(False)
            else:
                tombstone_kept |= tombstone
                keep.append(True)
        if tombstone_kept and horizon is None:
            self.horizons[base] = self.now_ms + self.log.config.delete_retention_ms
        elif horizon is not None and not tombstone_kept:
            del self.horizons[base]  # its tombstones are gone
        kept_count = sum(keep)
        stats.records_written += kept_count
        if kept_count == len(entries):
            stats.bytes_written += len(batch)
            return [batch]
        if kafka:
            if kept_count == 0 and not self._producers_last_batch(batch):
                return []
            out = [
                kafka_records.with_records(
                    batch, [e[3] for e, k in zip(entries, keep, strict=False) if k]
                )
            ]
        else:
            out = retained_runs(batch, keep) if kept_count else []
        stats.bytes_written += sum(len(b) for b in out)
        return out

    def _producers_last_batch(self, batch: bytes) -> bool:
        producer_id = int.from_bytes(
            batch[_PRODUCER_ID_AT : _PRODUCER_ID_AT + 8], "big", signed=True
        )
        if producer_id < 0:
            return False
        entry = self.log.producer_state.producers.get(producer_id)
        return (
            entry is not None
            and bool(entry.batches)
            and entry.batches[-1].last_offset == batch_end(batch) - 1
        )


def _still_holds(log: Log, mapped: list[tuple[LogSegment, int]], replaced: set[int]) -> bool:
    """The log still holds the segments the offset map was read from (but those this
    cleaning replaced), closed and as they were: else the map may name records that are
    gone (a follower's truncation), and a record it supersedes must not go."""
    closed = {id(s) for s in log.segments[:-1]}
    return all(
        id(segment) in replaced or (id(segment) in closed and len(segment.batches) == count)
        for segment, count in mapped
    )


def _entries(batch: bytes) -> list[tuple[int, bytes | None, bool, bytes]]:
    """(offset, key, is a tombstone, record bytes) of each record of a stored batch; the
    record bytes only for a Kafka batch (ours are rewritten from decoded records)."""
    if batch[16] == KAFKA_MAGIC:
        return kafka_records.record_entries(batch)
    return [(r.offset, r.key, r.value is None, b"") for r in decode_records(batch)]


def _groups(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments in groups of total size within ``max_bytes`` (one at least)."""
    groups: list[list[LogSegment]] = []
    size = 0
    for segment in segments:
        if groups and size + segment.size_bytes <= max_bytes:
            groups[-1].append(segment)
            size += segment.size_bytes
        else:
            groups.append([segment])
            size = segment.size_bytes
    return groups


def _first_position(group: list[LogSegment]) -> int:
    """The log-wide byte position before the group's first batch."""
    for segment in group:
        if segment.batches:
            return segment.ends[0] - len(segment.batches[0])
    return 0
