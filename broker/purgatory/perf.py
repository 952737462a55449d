"""`purgatory perf purgatory`: Kafka's TestPurgatoryPerformance (the Scala original), ported.

A generator enqueues ``num`` fake operations at a target rate (exponential inter-arrival
times) into a purgatory, each watched on the same ``keys`` keys and timing out after
``timeout`` ms. Each has a log-normal latency (mu = ln pct50, sigma = (ln pct75 - mu) /
0.674490); if that is below the timeout, a separate completer completes it then (as the
original's CompletionQueue thread does with forceComplete), else it expires. The run ends
when every operation has completed. Printed, as the original: elapsed ms, target rate,
actual rate, process CPU ms, GC counts and times.

Implementations: ``wheel`` (the timing wheel, eager watcher removal), ``wheel-purge``
(the same with Kafka's estimate-driven purge) and ``heap`` (a model of the old design).
Everything runs on one event loop, on one core. Time comes from the loop's scheduler;
CPU time from getrusage.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import heapq
import math
import random
import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any

from purgatory.broker.purgatory.clock import Alarm, LoopScheduler, Scheduler
from purgatory.broker.purgatory.delayed_operation import DelayedOperation
from purgatory.broker.purgatory.heap_purgatory import HeapPurgatory
from purgatory.broker.purgatory.purgatory import DelayedOperationPurgatory
from purgatory.broker.purgatory.timer import SystemTimer
from purgatory.common import gc_policy

IMPLEMENTATIONS = ("wheel", "wheel-purge", "heap")
# The post's two cases (timeout 200 ms): a low and a high timeout rate.
CASES = {"low": {"pct75": 60.0, "pct50": 20.0}, "high": {"pct75": 400.0, "pct50": 200.0}}


def rss_mb() -> float:
    """Resident memory of this process now (Linux), or -1 where /proc is missing."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return -1.0
    return round(pages * resource.getpagesize() / 2**20, 1)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Latch:
    """Counts completions down to zero (the original's CountDownLatch)."""

    __slots__ = ("count", "done")

    def __init__(self, count: int, done: asyncio.Future[None]) -> None:
        self.count = count
        self.done = done

    def count_down(self) -> None:
        self.count -= 1
        if self.count == 0 and not self.done.done():
            self.done.set_result(None)


class FakeOperation(DelayedOperation):
    """Completes when its latency has passed (checked in try_complete) or is forced."""

    __slots__ = ("completes_at", "latch", "scheduler")

    def __init__(
        self, delay_ms: int, latency_ms: int, now_ms: int, scheduler: Scheduler, latch: Latch
    ) -> None:
        # DelayedOperation's fields, set here as it sets TimerTask's: one call less each.
        self.delay_ms = delay_ms
        self.expiration_ms = 0
        self._bucket = None
        self.completed = False
        self._purgatory = None
        self._watch_keys = ()
        self.scheduler = scheduler
        self.completes_at = now_ms + latency_ms
        self.latch = latch

    def try_complete(self) -> bool:
        return self.scheduler.now_ms() >= self.completes_at and self.force_complete()

    def on_complete(self) -> None:
        self.latch.count_down()

    def on_expiration(self) -> None:
        pass


def latency_samples(size: int, pct75: float, pct50: float, rng: random.Random) -> list[int]:
    """Log-normal latencies in ms with the given median and 75th percentile."""
    mu = math.log(pct50)
    sigma = (math.log(pct75) - mu) / 0.674490  # 0.674490: the 75th percentile of N(0, 1)
    return [int(rng.lognormvariate(mu, sigma)) for _ in range(size)]


def interval_samples(size: int, per_second: float, rng: random.Random) -> list[int]:
    """Exponential inter-arrival times in whole ms, carrying the fractions forward."""
    out = []
    residue = 0.0
    rate_per_ms = per_second / 1000.0
    for _ in range(size):
        interval = rng.expovariate(rate_per_ms) + residue
        whole = int(interval)
        residue = interval - whole
        out.append(whole)
    return out


class CompletionQueue:
    """Completes operations at their latency (the original's DelayQueue + thread).

    Latencies are whole milliseconds, so operations wait in one list per millisecond and
    only the milliseconds are in a heap.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._due: dict[int, list[FakeOperation]] = {}
        self._times: list[int] = []
        self._alarm = Alarm(scheduler, self._complete_due)

    def add(self, operation: FakeOperation) -> None:
        at = operation.completes_at
        due = self._due.get(at)
        if due is None:
            self._due[at] = [operation]
            heapq.heappush(self._times, at)
            self._alarm.no_later_than(at)
        else:
            due.append(operation)

    def _complete_due(self, now: int) -> None:
        times = self._times
        while times and times[0] <= now:
            for operation in self._due.pop(heapq.heappop(times)):
                operation.force_complete()
        if times:
            self._alarm.no_later_than(times[0])


@dataclass
class RunResult:
    impl: str
    num: int
    target_rate_requested: float
    timeout_ms: int
    pct75: float
    pct50: float
    keys: int
    elapsed_ms: int
    target_rate: float
    actual_rate: float
    cpu_ms: int
    gc_policy: str
    gc_thresholds: list[int]
    gc_counts: list[int]
    gc_cpu_ms: list[float]
    expirations: int
    watched_after: int
    delayed_after: int  # entries left in the timer or heap (the heap keeps completed ones)
    pending_after: int  # operations neither completed nor expired: 0 when the run drained
    rss_mb_start: float
    rss_mb_end: float

    def line(self) -> str:
        """The original's output line."""
        return (
            f"{self.elapsed_ms}\t{self.target_rate:f}\t{self.actual_rate:f}\t{self.cpu_ms}\t"
            f"{' '.join(map(str, self.gc_counts))}\t{' '.join(f'{t:.0f}' for t in self.gc_cpu_ms)}"
        )


def make_purgatory(impl: str, scheduler: Scheduler, purge_interval: int) -> Any:
    if impl == "wheel":
        return DelayedOperationPurgatory(
            "Fake", SystemTimer(scheduler), purge_interval=purge_interval
        )
    if impl == "wheel-purge":
        return DelayedOperationPurgatory(
            "Fake", SystemTimer(scheduler), purge_interval=purge_interval, watcher_removal="purge"
        )
    if impl == "heap":
        return HeapPurgatory("Fake", scheduler, purge_interval=purge_interval)
    raise ValueError(f"unknown implementation {impl!r}; one of {', '.join(IMPLEMENTATIONS)}")


async def run(
    impl: str,
    *,
    num: int,
    rate: float,
    keys: int = 3,
    key_space_size: int = 100,
    timeout_ms: int = 200,
    pct75: float = 60.0,
    pct50: float = 20.0,
    purge_interval: int = 1000,
    seed: int | None = None,
    collector: str = "broker",
) -> RunResult:
    if num < 1 or rate <= 0 or keys < 1 or key_space_size < 1 or timeout_ms < 0:
        raise ValueError("num, rate, keys and key space must be positive, timeout not negative")
    if not 0 < pct50 <= pct75:
        raise ValueError("pct50 must be positive and at most pct75")
    loop = asyncio.get_running_loop()
    scheduler = LoopScheduler(loop)
    rng = random.Random(seed)
    samples = min(num, 1_000_000)
    latencies = latency_samples(samples, pct75, pct50, rng)
    intervals = interval_samples(samples, rate, rng)
    purgatory = make_purgatory(impl, scheduler, purge_interval)
    completer = CompletionQueue(scheduler)
    done: asyncio.Future[None] = loop.create_future()
    latch = Latch(num, done)
    watch_keys = tuple(f"fakeKey{rng.randrange(key_space_size)}" for _ in range(keys))
    gc_watch = gc_policy.GcPauses(clock=cpu_seconds)
    previous_thresholds = gc.get_threshold()
    thresholds = gc_policy.use(collector)
    gc.collect()
    rss_start = rss_mb()
    gc.callbacks.append(gc_watch)
    cpu_start = cpu_seconds()
    start = scheduler.now_ms()
    arrival = start
    try:
        # The samples are independent draws: taking them in turn is the original's
        # "a random one of a million" without a random index per request.
        for i in range(num):
            arrival += intervals[i % samples]
            latency = latencies[i % samples]
            now = scheduler.now_ms()
            if arrival > now:
                await _sleep_until(scheduler, arrival)
                now = scheduler.now_ms()
            elif i & 63 == 0:
                await _yield(scheduler)  # behind schedule: still let timers and the completer run
            operation = FakeOperation(timeout_ms, latency, now, scheduler, latch)
            if latency < timeout_ms:
                completer.add(operation)
            purgatory.try_complete_else_watch(operation, watch_keys)
        end = scheduler.now_ms()
        await done
        finished = scheduler.now_ms()
    finally:
        gc.callbacks.remove(gc_watch)
        gc.set_threshold(*previous_thresholds)
    cpu_ms = int((cpu_seconds() - cpu_start) * 1000)
    gc.collect()
    watched_after, delayed_after = purgatory.watched, purgatory.delayed
    result = RunResult(
        impl=impl,
        num=num,
        target_rate_requested=rate,
        timeout_ms=timeout_ms,
        pct75=pct75,
        pct50=pct50,
        keys=keys,
        elapsed_ms=finished - start,
        target_rate=num * 1000 / max(arrival - start, 1),
        actual_rate=num * 1000 / max(end - start, 1),
        cpu_ms=cpu_ms,
        gc_policy=collector,
        gc_thresholds=list(thresholds),
        gc_counts=gc_watch.counts(),
        gc_cpu_ms=[round(t * 1000, 1) for t in gc_watch.seconds()],
        expirations=purgatory.expirations,
        watched_after=watched_after,
        delayed_after=delayed_after,
        pending_after=purgatory.cancel_all(),
        rss_mb_start=rss_start,
        rss_mb_end=rss_mb(),
    )
    return result


def _sleep_until(scheduler: Scheduler, when_ms: int) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scheduler.call_at(when_ms, functools.partial(_resolve, future))
    return future


def _yield(scheduler: Scheduler) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scheduler.call_soon(functools.partial(_resolve, future))
    return future


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def result_dict(result: RunResult) -> dict[str, Any]:
    out = asdict(result)
    out["target_rate"] = round(out["target_rate"], 1)
    out["actual_rate"] = round(out["actual_rate"], 1)
    return out


def main(args: Any) -> int:
    """`purgatory perf purgatory`: one run, or --sweep over rates for the post's two cases."""
    import json

    import uvloop

    if args.sweep:
        return _sweep(args)
    try:
        result = uvloop.run(
            run(
                args.impl,
                num=args.num,
                rate=args.rate,
                keys=args.keys,
                key_space_size=args.key_space_size,
                timeout_ms=args.timeout,
                pct75=args.pct75,
                pct50=args.pct50,
                purge_interval=args.purge_interval,
                seed=args.seed,
                collector=args.gc,
            )
        )
    except ValueError as exc:
        print(f"purgatory perf purgatory: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result_dict(result)))
    else:
        print(
            f"# {args.impl}: {args.num} requests, timeout {args.timeout} ms, "
            f"pct75 {args.pct75} ms, pct50 {args.pct50} ms, {args.keys} keys, "
            f"gc thresholds {result.gc_thresholds} ({args.gc})"
        )
        print(
            "# <elapsed time ms>\t<target rate>\t<actual rate>\t<process cpu time ms>\t"
            "<gc counts gen0 gen1 gen2>\t<gc cpu ms gen0 gen1 gen2>"
        )
        print(result.line())
    return 0


def _sweep(args: Any) -> int:
    import json
    from pathlib import Path

    import uvloop
    from rich.progress import Progress

    rates = [float(r) for r in args.rates.split(",")]
    impls = args.impls.split(",")
    for impl in impls:
        if impl not in IMPLEMENTATIONS:
            print(f"purgatory perf purgatory: unknown implementation {impl!r}", file=sys.stderr)
            return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    total = len(CASES) * len(impls) * len(rates)
    with Progress(transient=True, disable=args.json) as progress:
        task = progress.add_task("sweep", total=total)
        for case, shape in CASES.items():
            for impl in impls:
                for rate in rates:
                    result = uvloop.run(
                        run(
                            impl,
                            num=args.num,
                            rate=rate,
                            keys=args.keys,
                            key_space_size=args.key_space_size,
                            timeout_ms=args.timeout,
                            purge_interval=args.purge_interval,
                            seed=args.seed,
                            collector=args.gc,
                            **shape,
                        )
                    )
                    results.append({"case": case, **result_dict(result)})
                    progress.advance(task)
    (out_dir / "purgatory-sweep.json").write_text(json.dumps(results, indent=2))
    png = out_dir / "purgatory-sweep.png"
    plot_sweep(results, png)
    summary = {
        "results": str(out_dir / "purgatory-sweep.json"),
        "plot": str(png),
        "saturation": saturation(results),
    }
    print(json.dumps(summary, indent=None if args.json else 2))
    return 0


def saturation(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per case and implementation: the highest target rate it kept up with (actual >=
    0.95 x target), and the highest actual rate it reached."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        entry = out.setdefault(r["case"], {}).setdefault(
            r["impl"], {"kept_up_to": 0.0, "max_actual_rate": 0.0}
        )
        if r["actual_rate"] >= 0.95 * r["target_rate"]:
            entry["kept_up_to"] = max(entry["kept_up_to"], r["target_rate"])
        entry["max_actual_rate"] = max(entry["max_actual_rate"], r["actual_rate"])
    return out


def plot_sweep(results: list[dict[str, Any]], path: Any) -> None:
    """The post's figures: actual vs target rate, and CPU per second of run vs target rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(CASES)
    fig, axes = plt.subplots(len(cases), 2, figsize=(12, 4.5 * len(cases)), squeeze=False)
    for row, case in enumerate(cases):
        shape = CASES[case]
        rate_ax, cpu_ax = axes[row]
        for impl in IMPLEMENTATIONS:
            points = sorted(
                (r for r in results if r["case"] == case and r["impl"] == impl),
                key=lambda r: r["target_rate"],
            )
            if not points:
                continue
            target = [r["target_rate"] / 1000 for r in points]
            rate_ax.plot(target, [r["actual_rate"] / 1000 for r in points], marker="o", label=impl)
            cpu_ax.plot(
                target,
                [r["cpu_ms"] / max(r["elapsed_ms"], 1) for r in points],
                marker="o",
                label=impl,
            )
        top = max((r["target_rate"] / 1000 for r in results if r["case"] == case), default=1)
        rate_ax.plot([0, top], [0, top], color="grey", linestyle=":", label="keeps up")
        title = f"{case} timeout rate (pct75={shape['pct75']:g} ms, pct50={shape['pct50']:g} ms)"
        rate_ax.set(
            title=f"Enqueue rate, {title}",
            xlabel="target rate (k requests/s)",
            ylabel="actual rate (k requests/s)",
        )
        cpu_ax.set(
            title=f"CPU, {title}",
            xlabel="target rate (k requests/s)",
            ylabel="CPU seconds per second of run",
        )
        for ax in (rate_ax, cpu_ax):
            ax.grid(True, alpha=0.3)
            ax.legend()
    fig.suptitle("Purgatory benchmark (TestPurgatoryPerformance port), one core")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
