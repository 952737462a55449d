"""`LoopThread`: an asyncio event loop on a thread of its own, that another thread hands
coroutines to, and can freeze and thaw as SIGSTOP and SIGCONT do to a process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Invariants: ``run`` is called from other threads only; while frozen, nothing on
    the loop runs (timers, sockets, callbacks all wait) until ``thaw`` or ``close``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thaw: threading.Event | None = None
        self._thread.start()

    @property
    def frozen(self) -> bool:
        return self._thaw is not None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Run ``coro`` on the loop and wait for its result (TimeoutError after
        ``timeout`` seconds; the coroutine is cancelled then)."""
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError(f"{self.name}: the loop is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def freeze(self) -> None:
        """Block the loop's thread until ``thaw``; returns once it is blocked."""
        if self._thaw is not None:
            return
        thaw, blocked = threading.Event(), threading.Event()
        self._thaw = thaw

        def hold() -> None:
            blocked.set()
            thaw.wait()

        self.loop.call_soon_threadsafe(hold)
        blocked.wait()

    def thaw(self) -> None:
        if self._thaw is not None:
            self._thaw.set()
            self._thaw = None

    def close(self, timeout: float = 10) -> None:
        """Stop and close the loop (thawing it first); tasks still pending are dropped."""
        if self.loop.is_closed():
            return
        self.thaw()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
