"""DelayedReceiver: received bytes handed on after a delay, in arrival order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class DelayedReceiver:
    """Hands received bytes on after a delay, in arrival order (fault injection: a latency
    fault on bytes received). Bytes with no delay still wait behind held ones."""

    __slots__ = ("_deliver", "_loop", "_release_at", "held")

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self._deliver = deliver
        self._loop = asyncio.get_running_loop()
        self._release_at = 0.0
        self.held = 0  # chunks waiting to be delivered

    def receive(self, data: bytes, delay_s: float) -> None:
        if delay_s <= 0 and not self.held:
            self._deliver(data)
            return
        self._release_at = max(self._loop.time() + delay_s, self._release_at)
        self.held += 1
        self._loop.call_at(self._release_at, self._release, data)

    def close(self) -> None:
        """Deliver nothing more (the connection is gone): bytes still held are dropped, and
        the receiver lets go of its owner's method, so the owner needs no cycle collection
        to be freed."""
        self._deliver = _discard

    def _release(self, data: bytes) -> None:
        self.held -= 1
        self._deliver(data)


def _discard(data: bytes) -> None:
    pass
