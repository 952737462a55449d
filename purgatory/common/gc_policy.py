"""How often a broker process collects cyclic garbage, and how long each collection takes.

Python's default runs a young-generation collection every 700 net container allocations. A
broker allocates a few per request (the delayed operation, its response, buffers) and frees
almost all of them by reference counting, so at 250k operations a second the default
collects some 350 times a second and, worse, re-scans the operations still waiting in the
purgatory each time they are promoted. Measured with ``purgatory perf purgatory`` (the
timing-wheel post's high-timeout mix at 250k/s, 2 cores): about 11% of the CPU went to
collections with the defaults, about 1% with these thresholds.

The broker's thresholds, in CPython's terms:

- generation 0 after 7,000 net allocations;
- generation 1 at every second young collection (threshold 0: "more than 0 collections
  of generation 0 since"), so one collection walks at most about 14,000 objects: 3-7 ms
  of a broker's objects on this project's 2-core machine, whose speed varies by 1.6x.
  With CPython's threshold of 10, generation 1 waited for every eleventh young
  collection and then walked up to about 110,000 objects: 25 ms during which nothing was
  read, while 10,000 fetches parked within a second (``purgatory perf scale --modes
  parked-fetches``). Their clients saw it as lateness: p99 16-34 ms; 3-8 ms now;
- generation 2 (a full collection) only after 150 of those, about every 2 million net
  allocations as before (CPython also waits until the long-lived objects grew by 25%).

Collecting generation 1 more often walks the purgatory's waiting operations once more
while they pile up. That is the price of the short pauses: ``perf purgatory`` at 250k/s
spends 10-75 ms collecting per 300,000 operations, against 5-40 ms with a threshold of 10.
When a run falls behind, its operations pile up and it collects more. In 4 interleaved
runs it reached 206-242k operations a second, against 231-242k.

Under steady load the collector hardly runs: requests free what they allocate, so the net
count stays low (a soak's brokers ran one young collection in 42 minutes). Garbage in a
reference cycle waits that long with all it holds, so the broker leaves none: a closed
connection lets go of its own methods (``BrokerConnection.connection_lost``).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

from purgatory.common.histogram import Histogram

BROKER_THRESHOLDS = (7_000, 0, 150)
PYTHON_THRESHOLDS = (700, 10, 10)  # CPython's defaults
POLICIES = {"broker": BROKER_THRESHOLDS, "python": PYTHON_THRESHOLDS}


def use(policy: str = "broker") -> tuple[int, int, int]:
    """Collect as ``policy`` says (``broker`` or ``python``); return the thresholds."""
    thresholds = POLICIES[policy]
    gc.set_threshold(*thresholds)
    return thresholds


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """No cyclic collection inside (after one to start clean): a load generator's own
    pauses would count as the broker's time, and a test sees what reference counting
    alone frees. The collector's state before is restored after."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class GcPauses:
    """Collections timed by generation, while installed as a ``gc.callbacks`` entry: it
    reads ``clock`` twice per collection, the request path pays nothing. A broker's (wall
    time: the event loop stands still meanwhile) is ``purgatory_gc_pause_seconds``; the
    purgatory benchmark times the CPU its run spends collecting."""

    __slots__ = ("_clock", "_started", "by_generation")

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.by_generation = {generation: Histogram() for generation in (0, 1, 2)}
        self._clock = clock
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self._clock()
        else:
            self.by_generation[info["generation"]].observe(self._clock() - self._started)

    def counts(self) -> list[int]:
        return [sum(h.counts) for h in self.by_generation.values()]

    def seconds(self) -> list[float]:
        return [h.sum for h in self.by_generation.values()]


_pauses: GcPauses | None = None


def pauses() -> GcPauses:
    """The process's pause record, watching from the first call on (every broker of a
    process shares it: they share the collector)."""
    global _pauses
    if _pauses is None:
        _pauses = GcPauses()
        gc.callbacks.append(_pauses)
    return _pauses
