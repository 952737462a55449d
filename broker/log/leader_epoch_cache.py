"""The leader-epoch cache of a log (Kafka's LeaderEpochFileCache, KIP-101).

For each leader epoch that wrote to the log, the offset of its first record. A follower
that starts following a new leader asks it for the end offset of the follower's latest
epoch (OffsetsForLeaderEpoch) and truncates what it has beyond that: a suffix written by a
former leader that never reached the ISR, so never committed.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEndOffset(NamedTuple):
    """An epoch (the largest at most the one asked about) and the offset where it ends
    (the start of the next epoch, or the log end for the latest); both -1 if undefined."""

    leader_epoch: int
    end_offset: int


UNDEFINED_EPOCH_END = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)


class LeaderEpochCache:
    __slots__ = ("_epochs", "_starts", "latest_epoch")

    def __init__(self) -> None:
        self._epochs: list[int] = []  # increasing
        self._starts: list[int] = []  # non-decreasing, one per epoch
        # The last of _epochs, kept as a field: every append compares with it, and only a
        # later epoch (rare: a new leader) calls assign.
        self.latest_epoch = UNDEFINED_EPOCH

    def __len__(self) -> int:
        return len(self._epochs)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records of ``epoch`` start at ``start_offset`` (kept only for a new, later epoch)."""
        if epoch <= self.latest_epoch:  # also every negative epoch: latest is at least -1
            return
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.latest_epoch = epoch

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Where ``epoch`` ends, as Kafka's ``LeaderEpochFileCache.endOffsetFor`` answers a
        follower's or a consumer's OffsetForLeaderEpoch:

        A. no epoch (-1), or one after every epoch held: undefined;
        B. the latest epoch: the log end offset;
        C. one before every epoch held (their records deleted): that epoch, ending where
           the first epoch held starts;
        D. otherwise the largest epoch at most ``epoch``, ending where the next one starts.
        """
        if epoch == UNDEFINED_EPOCH or epoch > self.latest_epoch:  # A
            return UNDEFINED_EPOCH_END
        if epoch == self.latest_epoch:  # B
            return EpochEndOffset(epoch, log_end_offset)
        index = bisect.bisect_right(self._epochs, epoch) - 1
        if index < 0:  # C
            return EpochEndOffset(epoch, self._starts[0])
        return EpochEndOffset(self._epochs[index], self._starts[index + 1])  # D

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: forget epochs that start at or after it."""
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self.latest_epoch = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: epochs wholly before it go; the one
        holding it starts there."""
        index = bisect.bisect_right(self._starts, start_offset) - 1
        if index < 0:
            return
        del self._epochs[:index], self._starts[:index]
        self._starts[0] = start_offset

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.latest_epoch = UNDEFINED_EPOCH
