"""LogSegment: consecutive record batches of one partition log, in memory (Kafka's
LogSegment, without the files), and what the log keeps of a segment moved to the remote
tier (``RemoteLogSegmentMetadata``)."""

from __future__ import annotations

import bisect
from typing import NamedTuple


class LogSegment:
    """Consecutive batches of one partition, from ``base_offset`` to ``next_offset`` - 1.

    Invariants: ``bases[i]`` is the base offset of ``batches[i]`` and
    ``bases[i+1] == bases[i] + record count of batch i``; ``ends[i]`` is the number of bytes
    ever appended to the log up to and including batch i (log-wide, so the bytes between two
    offsets in different segments are still a subtraction); ``size_bytes`` is the sum of
    the batch sizes; ``max_timestamp`` the largest record timestamp (-1 when empty) and
    ``first_timestamp`` the first batch's largest (-1 when empty or not known: it decides
    when the active segment rolls by time).
    A segment is never changed once closed, but replaced whole: by the log cleaner's copy
    (broker/log/cleaner/), whose batches keep their offsets with gaps between them, so
    ``bases[i+1] >= bases[i] + record count of batch i`` there.
    """

    __slots__ = (
        "base_offset",
        "bases",
        "batches",
        "ends",
        "first_timestamp",
        "max_timestamp",
        "next_offset",
        "size_bytes",
    )

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.bases: list[int] = []
        self.batches: list[bytes] = []
        self.ends: list[int] = []
        self.max_timestamp = -1
        self.first_timestamp = -1
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.batches)

    def metadata(self) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(
            self.base_offset, self.next_offset, self.size_bytes, self.max_timestamp
        )

    def read(self, offset: int, max_bytes: int, first: bool = True) -> list[bytes]:
        """Batches from the one holding ``offset`` to the segment's end, within ``max_bytes``
        (the first one regardless when ``first``)."""
        index = bisect.bisect_right(self.bases, offset) - 1
        out: list[bytes] = []
        total = 0
        for batch in self.batches[index:]:
            if (out or not first) and total + len(batch) > max_bytes:
                break
            out.append(batch)
            total += len(batch)
        return out


class RemoteLogSegmentMetadata(NamedTuple):
    """What the log knows of a segment in the remote tier (Kafka's class of that name)."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int
