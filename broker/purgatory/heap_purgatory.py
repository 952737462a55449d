"""A model of Kafka 0.8's RequestPurgatory, the design the timing wheel replaced.

Kept as the benchmark's baseline (`purgatory perf purgatory --impl heap`), faithful to how
the old design behaves, not tuned:

- the timer is a priority queue with one entry per operation (Java's DelayQueue); a
  completed operation is not removed from it, only skipped when its entry is popped;
- watcher lists drop completed operations only when they are scanned for a key;
- every ``purge_interval`` delayed operations, everything (the queue and every watcher
  list) is scanned and completed operations dropped, whatever fraction is completed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from purgatory.broker.purgatory.clock import Alarm, Scheduler
from purgatory.broker.purgatory.delayed_operation import DelayedOperation

Op = TypeVar("Op", bound=DelayedOperation)


class HeapPurgatory(Generic[Op]):
    def __init__(self, name: str, scheduler: Scheduler, *, purge_interval: int = 1000) -> None:
        self.name = name
        self.scheduler = scheduler
        self.purge_interval = purge_interval
        self._watchers: dict[Hashable, list[Op]] = {}
        self._queue: list[tuple[int, int, Op]] = []
        self._seq = itertools.count()
        self._alarm = Alarm(scheduler, self._reap)
        self.request_counter = 0  # delayed operations since the last purge
        self.expirations = 0
        self.purges = 0

    @property
    def watched(self) -> int:
        return sum(len(ops) for ops in self._watchers.values())

    @property
    def delayed(self) -> int:
        """Entries in the delay queue, completed ones included until popped or purged."""
        return len(self._queue)

    @property
    def watched_keys(self) -> int:
        return len(self._watchers)

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        if operation.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, []).append(operation)
        expiration = self.scheduler.now_ms() + operation.delay_ms
        heapq.heappush(self._queue, (expiration, next(self._seq), operation))
        self._alarm.no_later_than(expiration)
        self.request_counter += 1
        if self.request_counter >= self.purge_interval:
            self.purge_completed()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        kept = []
        for op in ops:
            if op.completed:
                continue
            if op.try_complete():
                completed += 1
            else:
                kept.append(op)
        if kept:
            self._watchers[key] = kept
        else:
            del self._watchers[key]
        return completed

    def purge_completed(self) -> int:
        """Scan the delay queue and every watcher list (the old reaper's purge)."""
        self.request_counter = 0
        self.purges += 1
        before = len(self._queue)
        self._queue = [entry for entry in self._queue if not entry[2].completed]
        heapq.heapify(self._queue)
        removed = before - len(self._queue)
        for key in list(self._watchers):
            ops = [op for op in self._watchers[key] if not op.completed]
            removed += len(self._watchers[key]) - len(ops)
            if ops:
                self._watchers[key] = ops
            else:
                del self._watchers[key]
        return removed

    def _reap(self, now: int) -> None:
        """The reaper: expire every due operation; completed entries are just skipped."""
        queue = self._queue
        while queue and queue[0][0] <= now:
            _, _, op = heapq.heappop(queue)
            if not op.completed and op.force_complete():
                self.expirations += 1
                op.on_expiration()
        if queue:
            self._alarm.no_later_than(queue[0][0])

    def cancel_all(self) -> int:
        pending = sum(1 for _, _, op in self._queue if not op.completed)
        self._queue.clear()
        self._watchers.clear()
        self._alarm.cancel()
        return pending
