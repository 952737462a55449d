"""Which log the cleaner cleans next, and how far (Kafka's ``LogCleanerManager``).

A compacted log's closed segments divide at its ``cleaner_checkpoint`` (the first dirty
offset) into a clean head and a dirty tail; the tail ends at the first uncleanable offset,
the least of:

A. the active segment's base offset (the active segment is never cleaned);
B. the high watermark and the first unstable offset (only committed records are
   cleaned, and nothing of an open transaction, or one whose marker is not committed:
   Kafka's cleaner stops at the last stable offset);
C. the first segment holding a record younger than ``min.compaction.lag.ms``.

Cleaning ends at a segment boundary, so the tail counts whole segments ending at or
before that offset. The dirty ratio is dirty bytes / (clean + dirty bytes); a log is
cleanable when it passes ``min.cleanable.dirty.ratio``, or when a dirty record is older
than ``max.compaction.lag.ms`` (it must be cleaned now, KIP-354), or when a kept
tombstone's delete horizon has passed (so tombstones go even if nothing else is written;
Kafka waits for the next cleaning). The filthiest log goes first: forced ones, then by
ratio. Times are wall-clock milliseconds (record timestamps).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple

from purgatory.broker.log.log import Log


class LogToClean(NamedTuple):
    key: Hashable
    log: Log
    first_dirty: int
    end: int  # the first uncleanable offset, a segment boundary
    dirty_ratio: float
    forced: bool  # past max.compaction.lag.ms, or a tombstone horizon passed


def cleanable_range(log: Log, high_watermark: int, now_ms: int) -> tuple[int, int]:
    """(first dirty offset, end of the last whole cleanable segment) of ``log``."""
    first_dirty = min(max(log.cleaner_checkpoint, log.local_log_start_offset), log.log_end_offset)
    limit = min(log.active_segment.base_offset, high_watermark)  # A, B
    log.producer_state.on_high_watermark_updated(high_watermark)
    unstable = log.first_unstable_offset
    if unstable is not None:
        limit = min(limit, unstable)  # B
    lag = log.config.min_compaction_lag_ms
    end = first_dirty
    for segment in log.segments[:-1]:
        if segment.next_offset <= first_dirty:
            continue
        if segment.next_offset > limit:
            break
        if lag > 0 and segment.max_timestamp > now_ms - lag:  # C
            break
        end = segment.next_offset
    return first_dirty, end


def dirty_ratio(log: Log, first_dirty: int, end: int) -> float:
    clean = dirty = 0
    for segment in log.segments[:-1]:
        if segment.next_offset <= first_dirty:
            clean += segment.size_bytes
        elif segment.next_offset <= end:
            dirty += segment.size_bytes
    total = clean + dirty
    return dirty / total if total else 0.0


class LogCleanerManager:
    """Chooses logs to clean; keeps what Kafka keeps per log: the tombstone horizons of
    each log's batches, and the logs that failed (uncleanable until they are removed)."""

    def __init__(self) -> None:
        self.horizons: dict[Hashable, dict[int, int]] = {}
        self.uncleanable: set[Hashable] = set()
        self.max_dirty_ratio = 0.0  # of the last choice, over every compacted log

    def horizons_of(self, key: Hashable) -> dict[int, int]:
        return self.horizons.setdefault(key, {})

    def forget(self, keys: Iterable[Hashable]) -> None:
        """These logs are gone (or no longer compacted)."""
        for key in list(keys):
            self.horizons.pop(key, None)
            self.uncleanable.discard(key)

    def grab_filthiest(
        self, logs: Iterable[tuple[Hashable, Log, int]], now_ms: int
    ) -> LogToClean | None:
        """The log to clean next among (key, log, high watermark), or None. What is kept
        of a log no longer listed is forgotten."""
        best: LogToClean | None = None
        self.max_dirty_ratio = 0.0
        seen: set[Hashable] = set()
        for key, log, high_watermark in logs:
            seen.add(key)
            cfg = log.config
            if not cfg.compact or key in self.uncleanable:
                continue
            first_dirty, end = cleanable_range(log, high_watermark, now_ms)
            ratio = dirty_ratio(log, first_dirty, end)
            self.max_dirty_ratio = max(self.max_dirty_ratio, ratio)
            forced = end > first_dirty and _past_max_lag(log, first_dirty, now_ms)
            horizons = self.horizons.get(key)
            if horizons and min(horizons.values()) <= now_ms:
                forced = True
                end = max(end, first_dirty)  # the clean head alone is cleaned again
            if not forced and (end <= first_dirty or ratio <= cfg.min_cleanable_dirty_ratio):
                continue
            candidate = LogToClean(key, log, first_dirty, end, ratio, forced)
            if best is None or (candidate.forced, candidate.dirty_ratio) > (
                best.forced,
                best.dirty_ratio,
            ):
                best = candidate
        self.forget([k for k in (*self.horizons, *self.uncleanable) if k not in seen])
        return best


def _past_max_lag(log: Log, first_dirty: int, now_ms: int) -> bool:
    """A dirty record older than ``max.compaction.lag.ms`` (by its batch's first
    timestamp)."""
    max_lag = log.config.max_compaction_lag_ms
    for segment in log.segments[:-1]:
        if segment.next_offset > first_dirty and segment.batches:
            first = segment.batches[0]
            at = 27 if first[16] == 2 else 23  # base timestamp: Kafka's batch, ours
            return now_ms - int.from_bytes(first[at : at + 8], "big", signed=True) > max_lag
    return False
