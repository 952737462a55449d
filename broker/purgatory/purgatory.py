"""DelayedOperationPurgatory: delayed operations watched by keys and timed by a SystemTimer.

Operations wait until an event on one of their keys lets them complete
(``check_and_complete(key)``) or their timer expires. Two ways to keep watcher lists from
holding completed operations (``purgatory.watcher.removal``):

- ``eager``: a completing operation removes itself from its keys' lists at once (O(keys),
  lists are dicts), so ``watched`` is exact and no purge ever scans;
- ``purge``: Kafka's way: lists are cleaned lazily when scanned, and all of them are purged
  when the estimated number of completed-but-watched operations
  (``estimated_total - delayed``) exceeds ``purge_interval``; the estimate is then reset to
  the number of pending operations.

Either way memory stays flat however many operations complete.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, Literal, TypeVar

from purgatory.broker.purgatory.delayed_operation import DelayedOperation
from purgatory.broker.purgatory.timer import SystemTimer

Op = TypeVar("Op", bound=DelayedOperation)
WatcherRemoval = Literal["eager", "purge"]


class DelayedOperationPurgatory(Generic[Op]):
    """Invariants: every operation in a watcher list was watched on that key; with eager
    removal no completed operation is in any list; ``_watched`` is the sum of the lists'
    lengths (Kafka's PurgatorySize); an empty list is never kept."""

    def __init__(
        self,
        name: str,
        timer: SystemTimer,
        *,
        purge_interval: int = 1000,
        watcher_removal: WatcherRemoval = "eager",
    ) -> None:
        if watcher_removal not in ("eager", "purge"):
            raise ValueError(f"watcher_removal must be 'eager' or 'purge', got {watcher_removal!r}")
        self.name = name
        self.timer = timer
        self.purge_interval = purge_interval
        self.eager = watcher_removal == "eager"
        self._watchers: dict[Hashable, dict[Op, bool]] = {}  # key -> operations (values True)
        self._watched = 0
        self.estimated_total = 0
        self.expirations = 0
        self.completions = 0
        self.purges = 0

    # -- figures -------------------------------------------------------------------------

    @property
    def watched(self) -> int:
        """Entries across all watcher lists (Kafka's PurgatorySize)."""
        return self._watched

    @property
    def delayed(self) -> int:
        """Operations waiting in the timer (Kafka's NumDelayedOperations)."""
        return len(self.timer)

    @property
    def watched_keys(self) -> int:
        return len(self._watchers)

    # -- operations ----------------------------------------------------------------------

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on every key and start
        its timer. True if it completed here.

        Kafka tries again after watching, because another thread may have made progress
        in between; on one event loop nothing can, so one try is enough.
        """
        if operation.try_complete():
            return True
        if not isinstance(keys, tuple):
            # Kept until the operation completes: a tuple of (immutable) keys is left out
            # of the cycle collector's later walks, a list never is.
            keys = tuple(keys)
        operation._purgatory = self
        operation._watch_keys = keys
        watchers = self._watchers
        watched = 0
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                ops = watchers[key] = {}
            if operation not in ops:  # a key named twice is watched once
                ops[operation] = True
                watched += 1
        self._watched += watched
        self.estimated_total += 1
        self.timer.add(operation)
        if not self.eager and self.estimated_total - len(self.timer) > self.purge_interval:
            self.purge_completed()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched on ``key``; return how many completed."""
        ops = self._watchers.get(key)
        if ops is None:
            return 0
        completed = 0
        if self.eager:
            for op in list(ops):  # completing operations remove themselves from ``ops``
                if not op.completed and op.try_complete():
                    completed += 1
        else:  # Kafka: drop completed operations from the list being scanned
            for op in list(ops):
                if op.completed:
                    del ops[op]
                    self._watched -= 1
                elif op.try_complete():
                    completed += 1
                    del ops[op]
                    self._watched -= 1
            if not ops:
                del self._watchers[key]
        return completed

    def _completed(self, operation: Op) -> None:
        """An operation completed (called by ``force_complete``)."""
        self.completions += 1
        if not self.eager:
            return
        watchers = self._watchers
        for key in operation._watch_keys:
            ops = watchers.get(key)
            if ops is not None and ops.pop(operation, False):
                self._watched -= 1
                if not ops:
                    del watchers[key]
        operation._watch_keys = ()

    def purge_completed(self) -> int:
        """Drop completed operations from every watcher list; return how many entries went."""
        self.estimated_total = len(self.timer)
        self.purges += 1
        removed = 0
        for key in list(self._watchers):
            ops = self._watchers[key]
            done = [op for op in ops if op.completed]
            for op in done:
                del ops[op]
            removed += len(done)
            if not ops:
                del self._watchers[key]
        self._watched -= removed
        return removed

    def cancel_all(self) -> int:
        """Complete nothing, forget everything (broker shutdown); return how many were pending."""
        pending = {op for ops in self._watchers.values() for op in ops if not op.completed}
        for op in pending:
            op.cancel()
        self._watchers.clear()
        self._watched = 0
        self.estimated_total = 0
        return len(pending)
