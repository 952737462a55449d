"""Time for the timer: read the clock, schedule a callback. Injected, so tests drive it.

Nothing under broker/purgatory/ reads a clock or sleeps except through a Scheduler.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Milliseconds on a monotonic clock, and callbacks at a time or as soon as possible;
    also a precise monotonic reading for durations, and the wall clock (record timestamps
    and time-based retention are wall-clock milliseconds, as in Kafka)."""

    def now_ms(self) -> int: ...

    def precise_s(self) -> float: ...

    def wall_ms(self) -> int: ...

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable: ...

    def call_soon(self, callback: Callable[[], None]) -> None: ...


def whole_ms(seconds: float) -> int:
    """A loop clock reading in whole milliseconds, rounded down. uvloop's clock counts whole
    milliseconds, and one of them in seconds times 1000 can fall a hair short of it
    (16741.156 * 1000 == 16741155.999...): truncated, about a quarter of all readings lost a
    millisecond, so a deadline came a millisecond early and an answer up to two before it.
    A microsecond of slack absorbs the float's error."""
    return int(seconds * 1000 + 0.001)


class LoopScheduler:
    """The running event loop's clock (monotonic) and its call_at/call_soon."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self._time = self.loop.time

    def now_ms(self) -> int:
        return whole_ms(self._time())

    def precise_s(self) -> float:
        # The loop's clock may be cached for a loop iteration (uvloop): durations of a
        # fraction of a millisecond need the process counter.
        return time.perf_counter()

    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self.loop.call_at(when_ms / 1000, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.loop.call_soon(callback)


class _ManualHandle:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """A clock that moves only when told to (``advance``), for tests and benchmarks.

    Invariant: ``_timers`` holds (when_ms, sequence, handle) for every scheduled callback not
    yet run; callbacks due at the same time run in the order they were scheduled.
    """

    def __init__(self, start_ms: int = 0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._wall_offset = wall_start_ms - start_ms
        self._timers: list[tuple[int, int, _ManualHandle]] = []
        self._soon: list[Callable[[], None]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def precise_s(self) -> float:
        return self._now / 1000

    def wall_ms(self) -> int:
        return self._now + self._wall_offset

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> Cancellable:
        handle = _ManualHandle(callback)
        heapq.heappush(self._timers, (when_ms, next(self._seq), handle))
        return handle

    def call_soon(self, callback: Callable[[], None]) -> None:
        self._soon.append(callback)

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, h in self._timers if not h.cancelled)

    def run_ready(self) -> None:
        """Run every call_soon callback (including ones they schedule)."""
        while self._soon:
            ready, self._soon = self._soon, []
            for callback in ready:
                callback()

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, running every callback that falls due, in time order."""
        if ms < 0:
            raise ValueError("time does not go backwards")
        target = self._now + ms
        self.run_ready()
        while self._timers and self._timers[0][0] <= target:
            when, _, handle = heapq.heappop(self._timers)
            if handle.cancelled:
                continue
            self._now = max(self._now, when)
            handle.callback()
            self.run_ready()
        self._now = target


class Alarm:
    """One scheduled wake-up that can only be brought forward: the shared mechanism of
    everything here that sleeps until its earliest deadline (the timer's bucket queue).

    Invariant: ``when_ms`` is the time the single pending callback is set for, or None
    when none is. The callback receives the time it was set for, or the clock if that is
    later: a loop may fire a fraction of a millisecond early, and the deadline is trusted.
    """

    __slots__ = ("_callback", "_handle", "scheduler", "when_ms")

    def __init__(self, scheduler: Scheduler, callback: Callable[[int], None]) -> None:
        self.scheduler = scheduler
        self._callback = callback
        self._handle: Cancellable | None = None
        self.when_ms: int | None = None

    def no_later_than(self, when_ms: int) -> None:
        """Make sure a wake-up happens at ``when_ms`` or earlier."""
        if self.when_ms is not None and self.when_ms <= when_ms:
            return
        if self._handle is not None:
            self._handle.cancel()
        self.when_ms = when_ms
        self._handle = self.scheduler.call_at(when_ms, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self.when_ms = None

    def _fire(self) -> None:
        due = self.when_ms
        self._handle = None
        self.when_ms = None
        now = self.scheduler.now_ms()
        self._callback(now if due is None else max(now, due))


class Periodic:
    """Runs ``task`` every ``period_ms()`` milliseconds on a scheduler (Kafka's
    ``scheduler.schedule(name, task, period)``). The period is read again after each run,
    so a changed dynamic config applies from the next one; ``restart`` applies it now."""

    __slots__ = ("_handle", "period_ms", "scheduler", "task")

    def __init__(
        self, scheduler: Scheduler, period_ms: Callable[[], int], task: Callable[[], None]
    ) -> None:
        self.scheduler = scheduler
        self.period_ms = period_ms
        self.task = task
        self._handle: Cancellable | None = None

    def start(self) -> None:
        self.cancel()
        self._handle = self.scheduler.call_at(
            self.scheduler.now_ms() + max(1, self.period_ms()), self._run
        )

    restart = start

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _run(self) -> None:
        self._handle = None
        try:
            self.task()
        finally:
            if self._handle is None:  # the task did not restart or cancel it
                self.start()
