"""CoordinatorTimer (Kafka's): keyed timeouts of a coordinator on the timing wheel. A
key has at most one timeout: scheduling it again replaces the one before (a member's
session starts over with each heartbeat), and ``cancel`` takes it out."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from purgatory.broker.purgatory import Scheduler, SystemTimer, TimerTask


class _Timeout(TimerTask):
    __slots__ = ("key", "operation", "timer")

    def __init__(
        self, timer: CoordinatorTimer, key: Hashable, delay_ms: int, operation: Callable[[], None]
    ) -> None:
        super().__init__(delay_ms)
        self.timer = timer
        self.key = key
        self.operation = operation

    def run(self) -> None:
        if self.timer.tasks.get(self.key) is self:
            del self.timer.tasks[self.key]
            self.operation()


class CoordinatorTimer:
    def __init__(self, scheduler: Scheduler) -> None:
        self.timer = SystemTimer(scheduler)
        self.tasks: dict[Hashable, _Timeout] = {}

    def schedule(self, key: Hashable, delay_ms: int, operation: Callable[[], None]) -> None:
        """Run ``operation`` in ``delay_ms`` unless the key is scheduled again or
        cancelled first."""
        self.cancel(key)
        task = self.tasks[key] = _Timeout(self, key, delay_ms, operation)
        self.timer.add(task)

    def cancel(self, key: Hashable) -> None:
        task = self.tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self.tasks

    def cancel_all(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()

    def __len__(self) -> int:
        return len(self.tasks)
