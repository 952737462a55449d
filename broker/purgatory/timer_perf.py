"""Micro-benchmarks of the timer, in process CPU time (immune to other load).

- `purgatory perf timer-buckets`: bucket storage. Kafka's TimerTaskList is a hand-written
  doubly linked list (O(1) add and remove through the entry's link cell); in CPython a
  dict used as an insertion-ordered set gives the same O(1) in C. Runs the timer's bucket
  workload on both: add N tasks, cancel a fraction, flush the rest.
- `purgatory perf timer-scaling`: the cost of an insert + cancel with 10^4 .. 10^6 tasks
  pending, which a timing wheel keeps flat (a heap's grows with log n).
- `purgatory perf purgatory-cycle`: the bare purgatory cycle (create an operation, watch it
  on 3 keys, start its timer, complete it) with many operations pending, for each watcher
  removal mode.
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

from purgatory.broker.purgatory.clock import ManualScheduler
from purgatory.broker.purgatory.delayed_operation import DelayedOperation
from purgatory.broker.purgatory.perf import cpu_seconds
from purgatory.broker.purgatory.purgatory import DelayedOperationPurgatory, WatcherRemoval
from purgatory.broker.purgatory.timer import SystemTimer, TimerTask


class _Entry:
    __slots__ = ("bucket", "next", "prev")

    def __init__(self) -> None:
        self.bucket: _LinkedBucket | None = None
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


class _LinkedBucket:
    """Kafka's shape: a circular doubly linked list with a sentinel root."""

    __slots__ = ("root", "size")

    def __init__(self) -> None:
        self.root = _Entry()
        self.root.prev = self.root.next = self.root
        self.size = 0

    def add(self, entry: _Entry) -> None:
        tail = self.root.prev
        assert tail is not None
        entry.next = self.root
        entry.prev = tail
        entry.bucket = self
        tail.next = entry
        self.root.prev = entry
        self.size += 1

    def remove(self, entry: _Entry) -> None:
        if entry.bucket is self:
            assert entry.prev is not None and entry.next is not None
            entry.next.prev = entry.prev
            entry.prev.next = entry.next
            entry.next = entry.prev = None
            entry.bucket = None
            self.size -= 1

    def flush(self) -> int:
        count = 0
        head = self.root.next
        while head is not None and head is not self.root:
            following = head.next
            self.remove(head)
            count += 1
            head = following
        return count


class _DictBucket:
    """The timer's choice: an insertion-ordered dict used as a set."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: dict[_Entry, None] = {}

    def add(self, entry: _Entry) -> None:
        self.tasks[entry] = None
        entry.bucket = self  # type: ignore[assignment]

    def remove(self, entry: _Entry) -> None:
        if entry.bucket is self:  # type: ignore[comparison-overlap]
            del self.tasks[entry]
            entry.bucket = None

    def flush(self) -> int:
        tasks = self.tasks
        self.tasks = {}
        for entry in tasks:
            entry.bucket = None
        return len(tasks)


def run_workload(
    kind: str, tasks: int, cancel_fraction: float, rounds: int, seed: int = 1
) -> float:
    """Operations (add + cancel-or-flush) per second for one storage kind."""
    rng = random.Random(seed)
    entries = [_Entry() for _ in range(tasks)]
    cancelled = [e for e in entries if rng.random() < cancel_fraction]
    make = _LinkedBucket if kind == "linked" else _DictBucket
    start = cpu_seconds()
    for _ in range(rounds):
        bucket: Any = make()
        for entry in entries:
            bucket.add(entry)
        for entry in cancelled:
            bucket.remove(entry)
        bucket.flush()
    elapsed = cpu_seconds() - start
    return rounds * tasks * 2 / max(elapsed, 1e-9)


class _Task(TimerTask):
    __slots__ = ()

    def run(self) -> None:
        pass


def insert_cancel_cost_us(pending: int, operations: int, max_delay_ms: int, seed: int = 1) -> float:
    """CPU microseconds per (insert + cancel) into a timer already holding ``pending`` tasks
    with delays spread up to ``max_delay_ms`` (so every wheel level is populated)."""
    rng = random.Random(seed)
    timer = SystemTimer(ManualScheduler())
    for _ in range(pending):
        timer.add(_Task(rng.randint(1, max_delay_ms)))
    delays = [rng.randint(1, max_delay_ms) for _ in range(operations)]
    tasks = [_Task(d) for d in delays]
    start = cpu_seconds()
    for task in tasks:
        timer.add(task)
        task.cancel()
    elapsed = cpu_seconds() - start
    assert len(timer) == pending
    return elapsed / operations * 1e6


def scaling_main(args: argparse.Namespace) -> int:
    pendings = [int(p) for p in args.pending.split(",")]
    costs = {
        str(p): round(
            min(
                insert_cancel_cost_us(p, args.operations, args.max_delay_ms, seed)
                for seed in range(3)
            ),
            3,
        )
        for p in pendings
    }
    values = list(costs.values())
    result = {
        "benchmark": "timer-scaling",
        "max_delay_ms": args.max_delay_ms,
        "operations": args.operations,
        "us_per_insert_cancel": costs,
        "growth": round(max(values) / min(values), 3),
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


class _Operation(DelayedOperation):
    __slots__ = ()

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass


def cycles_per_second(
    removal: WatcherRemoval,
    pending: int,
    cycles: int,
    keys: int = 3,
    key_space: int = 100,
    seed: int = 1,
) -> float:
    """Create, watch on ``keys`` keys, time and complete operations, with ``pending`` others
    waiting (their keys drawn from the same key space)."""
    rng = random.Random(seed)
    purgatory: DelayedOperationPurgatory[_Operation] = DelayedOperationPurgatory(
        "Cycle", SystemTimer(ManualScheduler()), watcher_removal=removal
    )
    space = [f"key{i}" for i in range(key_space)]
    for _ in range(pending):
        purgatory.try_complete_else_watch(
            _Operation(rng.randint(1000, 600_000)), rng.sample(space, keys)
        )
    key_sets = [tuple(rng.sample(space, keys)) for _ in range(1000)]
    start = cpu_seconds()
    for i in range(cycles):
        operation = _Operation(rng.randint(1000, 600_000))
        purgatory.try_complete_else_watch(operation, key_sets[i % 1000])
        operation.force_complete()
    return cycles / max(cpu_seconds() - start, 1e-9)


def cycle_main(args: argparse.Namespace) -> int:
    result = {
        "benchmark": "purgatory-cycle",
        "pending": args.pending,
        "keys": 3,
        "cycles_per_sec": {
            removal: round(
                max(cycles_per_second(removal, args.pending, args.cycles) for _ in range(3))
            )
            for removal in ("eager", "purge")
        },
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def main(args: argparse.Namespace) -> int:
    results: dict[str, Any] = {
        "benchmark": "timer-buckets",
        "tasks_per_bucket": args.tasks,
        "cancel_fraction": args.cancel_fraction,
        "ops_per_sec": {},
    }
    for kind in ("linked", "dict"):
        best = max(
            run_workload(kind, args.tasks, args.cancel_fraction, args.rounds) for _ in range(3)
        )
        results["ops_per_sec"][kind] = round(best)
    results["dict_over_linked"] = round(
        results["ops_per_sec"]["dict"] / results["ops_per_sec"]["linked"], 2
    )
    print(json.dumps(results, indent=None if args.json else 2))
    return 0
