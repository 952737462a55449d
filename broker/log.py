"""An in-memory partition log: record batches by offset, log start/end, size-bounded retention."""

from __future__ import annotations

import bisect

from protocol.records import BatchInfo, assign_offsets, decode_records


class OffsetOutOfRange(Exception):
    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside the log [{log_start}, {log_end}]")
        self.offset = offset


class Log:
    """The batches of one partition replica, in offset order.

    Invariants: ``_bases[i]`` is the base offset of ``_batches[i]``; entries before
    ``_head`` are deleted (kept until compaction so deletion from the head is O(1));
    ``log_start_offset`` is the base offset of the first live batch (or ``log_end_offset``
    when the log is empty); ``size_bytes`` is the sum of the live batch sizes; base offsets
    are consecutive: ``_bases[i+1] == _bases[i] + count of batch i``; ``_ends[i]`` is the
    number of bytes ever appended up to and including batch i (so byte counts between two
    offsets are a subtraction, never a scan).
    """

    __slots__ = (
        "_appended_bytes",
        "_bases",
        "_batches",
        "_ends",
        "_head",
        "_max_timestamps",
        "log_end_offset",
        "log_start_offset",
        "retention_bytes",
        "size_bytes",
    )

    def __init__(self, retention_bytes: int = -1) -> None:
        self.retention_bytes = retention_bytes
        self._bases: list[int] = []
        self._batches: list[bytes] = []
        self._max_timestamps: list[int] = []
        self._ends: list[int] = []
        self._appended_bytes = 0
        self._head = 0
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self._batches) - self._head

    def append(self, batch: bytes, info: BatchInfo, leader_epoch: int) -> int:
        """Append a validated batch, assigning its offsets; return its base offset."""
        base = self.log_end_offset
        self._store(base, assign_offsets(batch, base, leader_epoch), info)
        return base

    def append_as_follower(self, batch: bytes, info: BatchInfo, base_offset: int) -> None:
        """Append a batch exactly as the leader stored it (its offsets kept).

        Raises ValueError if it does not start at this log's end: a follower fetches from
        its log end, so anything else means the two logs disagree.
        """
        if base_offset != self.log_end_offset:
            raise ValueError(
                f"replicated batch starts at offset {base_offset}, the log ends at {self.log_end_offset}"
            )
        self._store(base_offset, batch, info)

    def reset_to(self, offset: int) -> None:
        """Drop everything and start empty at ``offset`` (a follower behind the leader's log
        start begins again where the leader's log begins)."""
        self._bases.clear()
        self._batches.clear()
        self._max_timestamps.clear()
        self._ends.clear()
        self._head = 0
        self.size_bytes = 0
        self.log_start_offset = self.log_end_offset = offset

    def _store(self, base: int, batch: bytes, info: BatchInfo) -> None:
        self._bases.append(base)
        self._batches.append(batch)
        self._max_timestamps.append(info.max_timestamp)
        self._appended_bytes += info.size
        self._ends.append(self._appended_bytes)
        self.log_end_offset = base + info.record_count
        self.size_bytes += info.size
        if self.retention_bytes >= 0 and self.size_bytes > self.retention_bytes:
            self._enforce_retention()

    def _enforce_retention(self) -> None:
        # Delete whole batches from the head, but never the newest one.
        last = len(self._batches) - 1
        while self.size_bytes > self.retention_bytes and self._head < last:
            self.size_bytes -= len(self._batches[self._head])
            self._head += 1
        self.log_start_offset = self._bases[self._head]
        if self._head > 1024 and self._head * 2 > len(self._batches):
            del self._bases[: self._head]
            del self._batches[: self._head]
            del self._max_timestamps[: self._head]
            del self._ends[: self._head]
            self._head = 0

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> list[bytes]:
        """Batches holding ``offset`` onwards, below ``max_offset`` (the high watermark).

        The first batch is returned even if it is larger than ``max_bytes`` (so a consumer
        always makes progress); later ones only while the total stays within it.
        Raises OffsetOutOfRange below the log start or above the log end.
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        limit = self.log_end_offset if max_offset is None else max_offset
        if offset >= limit:
            return []
        index = bisect.bisect_right(self._bases, offset, self._head) - 1
        out: list[bytes] = []
        total = 0
        batches = self._batches
        bases = self._bases
        n = len(batches)
        while index < n and bases[index] < limit:
            batch = batches[index]
            size = len(batch)
            if out and total + size > max_bytes:
                break
            out.append(batch)
            total += size
            index += 1
        return out

    def available_bytes(self, offset: int, max_offset: int) -> int:
        """Bytes a fetch from ``offset`` would find below ``max_offset`` (whole batches,
        from the one holding ``offset``). O(log n)."""
        if offset >= max_offset or offset < self.log_start_offset:
            return 0
        bases = self._bases
        first = bisect.bisect_right(bases, offset, self._head) - 1
        last = bisect.bisect_left(bases, max_offset, self._head) - 1
        if last < first:
            return 0
        return self._ends[last] - self._ends[first] + len(self._batches[first])

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        for index in range(self._head, len(self._batches)):
            if self._max_timestamps[index] >= timestamp:
                for record in decode_records(self._batches[index]):
                    if record.timestamp >= timestamp:
                        return record.offset, record.timestamp
        return None
