"""Deterministic time for the simulation (FoundationDB's and TigerBeetle's way): every
simulated process runs the broker's real asyncio code on an event loop of its own whose
clock is the simulation's, and one ``Simulation`` steps the loops in a seeded order,
jumping time to the next thing due when nothing is ready. Nothing sleeps, nothing reads
the machine's clock, and a seed replays a whole run.

A paused process (SIGSTOP) is a loop that is not stepped: what is sent to it queues, its
timers fall due and wait, and all of it runs late, at once, when it resumes. A crashed
process is a loop that is dropped with everything on it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable
from typing import Any

from purgatory.broker.purgatory.clock import LoopScheduler

START_WALL_MS = 1_700_000_000_000


class SimulationError(AssertionError):
    """The simulated cluster did something it must never do (or the simulator could not go
    on); the message says what, and when."""


class SimClock:
    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 1000.0  # seconds on every simulated monotonic clock


class _NoSelector:
    """A simulated process has no sockets: nothing to wait for but its timers."""

    def select(self, timeout: float | None) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """An event loop whose ``time()`` is the simulation's clock, run one pass at a time
    (``step``) by the simulation, never by ``run_forever``."""

    def __init__(self, clock: SimClock, name: str, on_error: Callable[[str], None]) -> None:
        super().__init__()
        self._clock = clock
        self._selector = _NoSelector()
        self._clock_resolution = 1e-9
        self.name = name
        self._on_error = on_error
        self.set_exception_handler(self._exception)

    def time(self) -> float:
        return self._clock.now

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def _exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, asyncio.CancelledError):
            return
        message = context.get("message", "")
        if "was never retrieved" in message and isinstance(exc, ConnectionError):
            return
        self._on_error(f"{self.name}: unhandled {message}: {exc!r}")

    def next_due(self) -> float | None:
        """When this loop next has something to run (now, if anything is ready)."""
        if self._ready:
            return self._clock.now
        scheduled = self._scheduled
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled)._scheduled = False
        return scheduled[0]._when if scheduled else None

    def step(self) -> None:
        asyncio._set_running_loop(self)
        try:
            self._run_once()
        finally:
            asyncio._set_running_loop(None)

    def abandon(self) -> None:
        """A crash: everything on this loop is dropped, never to run."""
        for task in asyncio.all_tasks(self):
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        self._ready.clear()
        self._scheduled.clear()


class SimScheduler(LoopScheduler):
    """The broker's ``Scheduler`` on a simulated loop: every clock is the simulation's."""

    def precise_s(self) -> float:
        return self.loop.time()

    def wall_ms(self) -> int:
        return START_WALL_MS + int(self.loop.time() * 1000)


class Simulation:
    """The simulated world: one clock, the loops of the processes alive in it, and the
    world's own events (deliveries of the network, the faults' schedule).

    Invariant: ``clock.now`` never goes back; every loop and event due at ``now`` runs
    before time moves on; a paused loop is never stepped."""

    MAX_STEPS_PER_INSTANT = 200_000

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = SimClock()
        self.loops: dict[int, SimLoop] = {}
        self.paused: set[int] = set()
        self.errors: list[str] = []
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.after_step: Callable[[int], None] | None = None  # checks run after every step

    @property
    def now(self) -> float:
        return self.clock.now

    def new_loop(self, node_id: int) -> SimLoop:
        loop = SimLoop(self.clock, f"node {node_id}", self.errors.append)
        self.loops[node_id] = loop
        return loop

    def drop_loop(self, node_id: int) -> None:
        loop = self.loops.pop(node_id, None)
        if loop is not None:
            loop.abandon()
        self.paused.discard(node_id)

    def at(self, delay_s: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._events, (self.clock.now + delay_s, next(self._seq), callback))

    def run_in(self, node_id: int, callback: Callable[[], Any]) -> None:
        """Run ``callback`` on a process's loop (as if it came from its network)."""
        loop = self.loops.get(node_id)
        if loop is not None:
            loop.call_soon(callback)

    def run_until(self, deadline: float, stop: Callable[[], bool] | None = None) -> None:
        """Advance the world to ``deadline`` (seconds), or until ``stop()`` holds."""
        while True:
            self._run_instant()
            if self.errors:
                raise SimulationError(self.errors[0])
            if stop is not None and stop():
                return
            upcoming = [
                t for t in (self._next_loop_time(), self._next_event_time()) if t is not None
            ]
            if not upcoming or min(upcoming) > deadline:
                self.clock.now = max(self.clock.now, deadline)
                return
            self.clock.now = max(self.clock.now, min(upcoming))

    def _next_event_time(self) -> float | None:
        return self._events[0][0] if self._events else None

    def _next_loop_time(self) -> float | None:
        times = [
            t
            for node, loop in self.loops.items()
            if node not in self.paused and (t := loop.next_due()) is not None
        ]
        return min(times) if times else None

    def _run_instant(self) -> None:
        now = self.clock.now
        for _ in range(self.MAX_STEPS_PER_INSTANT):
            ran = False
            while self._events and self._events[0][0] <= now:
                _, _, callback = heapq.heappop(self._events)
                callback()
                ran = True
            nodes = [
                n
                for n, loop in self.loops.items()
                if n not in self.paused and (t := loop.next_due()) is not None and t <= now
            ]
            self.rng.shuffle(nodes)  # the seed picks the interleaving
            for node in nodes:
                loop = self.loops.get(node)
                if loop is not None and node not in self.paused:
                    loop.step()
                    ran = True
                    if self.after_step is not None:
                        self.after_step(node)
            if not ran:
                return
        raise SimulationError(f"livelock: work kept coming at t={now:.3f}")
