"""SampleRing: the latest N samples of a few floats each, packed in one buffer.

A ``deque(maxlen=N)`` of tuples holds a tuple and three float objects per sample, about
136 bytes: 2.7 MB for a follower's 20,000 latest fetch round trips per leader, filling
slowly enough (a few fetches a second) to look like a leak in an hour-long soak. Here a
sample takes 8 bytes per field and the memory is taken once, when the ring is made. A
sample is packed by one ``struct`` call (a follower appends one every fetch round).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator


class SampleRing:
    """Oldest first when iterated; appending to a full ring drops the oldest sample."""

    __slots__ = ("_buffer", "_count", "_next", "_row", "capacity", "width")

    def __init__(self, capacity: int, width: int) -> None:
        if capacity < 1 or width < 1:
            raise ValueError(f"a ring needs capacity >= 1 and width >= 1, got {capacity}, {width}")
        self.capacity = capacity
        self.width = width
        self._row = struct.Struct(f"={width}d")
        self._buffer = bytearray(self._row.size * capacity)
        self._next = 0  # where the next sample goes
        self._count = 0

    def append(self, *sample: float) -> None:
        at = self._next
        row = self._row
        try:
            row.pack_into(self._buffer, at * row.size, *sample)
        except struct.error as exc:  # only on a bad sample: the append path stays one call
            if len(sample) != self.width:
                raise ValueError(f"a sample has {self.width} fields, got {len(sample)}") from None
            raise ValueError(f"a sample's fields are floats: {exc}") from None
        self._next = 0 if at + 1 == self.capacity else at + 1
        if self._count < self.capacity:
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[float, ...]]:
        start = (self._next - self._count) % self.capacity
        row, buffer = self._row, self._buffer
        for i in range(self._count):
            yield row.unpack_from(buffer, ((start + i) % self.capacity) * row.size)
