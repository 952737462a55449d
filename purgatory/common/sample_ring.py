"""SampleRing: the latest N samples of a few floats each, in flat arrays.

A ``deque(maxlen=N)`` of tuples holds a tuple and three float objects per sample, about
136 bytes: 2.7 MB for a follower's 20,000 latest fetch round trips per leader, filling
slowly enough (a few fetches a second) to look like a leak in an hour-long soak. Here a
sample takes 8 bytes per field and the memory is taken once, when the ring is made.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator


class SampleRing:
    """Oldest first when iterated; appending to a full ring drops the oldest sample."""

    __slots__ = ("_columns", "_count", "_next", "capacity", "width")

    def __init__(self, capacity: int, width: int) -> None:
        if capacity < 1 or width < 1:
            raise ValueError(f"a ring needs capacity >= 1 and width >= 1, got {capacity}, {width}")
        self.capacity = capacity
        self.width = width
        self._columns = [array("d", bytes(8 * capacity)) for _ in range(width)]
        self._next = 0  # where the next sample goes
        self._count = 0

    def append(self, *sample: float) -> None:
        if len(sample) != self.width:
            raise ValueError(f"a sample has {self.width} fields, got {len(sample)}")
        at = self._next
        for column, value in zip(self._columns, sample, strict=True):
            column[at] = value
        self._next = 0 if at + 1 == self.capacity else at + 1
        if self._count < self.capacity:
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[float, ...]]:
        start = (self._next - self._count) % self.capacity
        columns = self._columns
        for i in range(self._count):
            at = (start + i) % self.capacity
            yield tuple(column[at] for column in columns)
