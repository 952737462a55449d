"""The purgatory benchmarks compute what they claim (their speed is never asserted)."""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
from pathlib import Path

import pytest

from purgatory.broker.purgatory.clock import ManualScheduler
from purgatory.broker.purgatory.perf import (
    IMPLEMENTATIONS,
    CompletionQueue,
    FakeOperation,
    Latch,
    interval_samples,
    latency_samples,
    plot_sweep,
    run,
    saturation,
)
from purgatory.broker.purgatory.timer_perf import (
    cycles_per_second,
    insert_cancel_cost_us,
    run_workload,
)
from purgatory.common import gc_policy


def test_latencies_are_log_normal_with_the_requested_median_and_75th_percentile() -> None:
    samples = sorted(latency_samples(40_000, pct75=400.0, pct50=200.0, rng=random.Random(3)))
    assert statistics.median(samples) == pytest.approx(200, rel=0.05)
    assert samples[int(0.75 * len(samples))] == pytest.approx(400, rel=0.05)


def test_intervals_average_to_the_target_rate_with_fractions_carried() -> None:
    samples = interval_samples(50_000, per_second=20_000, rng=random.Random(5))
    assert all(isinstance(s, int) for s in samples)
    assert sum(samples) / len(samples) == pytest.approx(1000 / 20_000, rel=0.05)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
async def test_every_operation_completes_or_expires_and_structures_drain(impl: str) -> None:
    result = await run(impl, num=3000, rate=60_000, timeout_ms=50, pct75=80.0, pct50=30.0, seed=1)
    assert result.num == 3000
    assert 0 < result.expirations < 3000  # some latencies exceed the timeout, most do not
    assert result.pending_after == 0  # every operation completed or expired
    if impl != "heap":  # the heap keeps completed entries until their expiry pops them
        assert result.delayed_after == 0
    if impl == "wheel":
        assert result.watched_after == 0  # eager removal: nothing left in watcher lists
    assert result.line().count("\t") == 5  # the original's six columns


def test_saturation_is_the_highest_rate_kept_up_with() -> None:
    results = [
        {"case": "high", "impl": "wheel", "target_rate": 10_000, "actual_rate": 9_990},
        {"case": "high", "impl": "wheel", "target_rate": 20_000, "actual_rate": 19_500},
        {"case": "high", "impl": "wheel", "target_rate": 40_000, "actual_rate": 30_000},
    ]
    assert saturation(results) == {
        "high": {"wheel": {"kept_up_to": 20_000, "max_actual_rate": 30_000}}
    }


def test_the_sweep_plot_is_a_png(tmp_path: Path) -> None:
    results = [
        {
            "case": case,
            "impl": impl,
            "target_rate": rate,
            "actual_rate": rate * 0.9,
            "cpu_ms": 500,
            "elapsed_ms": 1000,
        }
        for case in ("low", "high")
        for impl in IMPLEMENTATIONS
        for rate in (1000, 2000)
    ]
    path = tmp_path / "sweep.png"
    plot_sweep(results, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_timer_micro_benchmarks_run_their_workloads() -> None:
    assert insert_cancel_cost_us(pending=2000, operations=2000, max_delay_ms=60_000) > 0
    assert run_workload("linked", tasks=100, cancel_fraction=0.5, rounds=3) > 0
    assert run_workload("dict", tasks=100, cancel_fraction=0.5, rounds=3) > 0
    assert cycles_per_second("eager", pending=500, cycles=2000) > 0
    assert cycles_per_second("purge", pending=500, cycles=2000) > 0


@pytest.mark.parametrize("collector", ["broker", "python"])
async def test_a_run_collects_garbage_as_asked_and_puts_the_thresholds_back(
    collector: str,
) -> None:
    before = gc.get_threshold()
    result = await run("wheel", num=500, rate=60_000, timeout_ms=20, seed=2, collector=collector)
    assert result.gc_policy == collector
    assert tuple(result.gc_thresholds) == gc_policy.POLICIES[collector]
    assert gc.get_threshold() == before


def test_the_broker_collects_young_garbage_less_often_than_python_does() -> None:
    before = gc.get_threshold()
    try:
        assert gc_policy.use("broker") == gc.get_threshold() == gc_policy.BROKER_THRESHOLDS
        assert gc_policy.BROKER_THRESHOLDS[0] > gc_policy.PYTHON_THRESHOLDS[0]
    finally:
        gc.set_threshold(*before)


def test_under_the_broker_policy_no_collection_walks_more_than_two_young_batches() -> None:
    # Objects that all survive (10,000 fetches parking at once) are the worst case: each
    # young collection promotes everything it walks. Generation 1 must be collected at
    # every second one, so that a single collection walks at most 2 x 10,000 objects.
    walked: list[tuple[int, int]] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generation = info["generation"]
            walked.append((generation, sum(len(gc.get_objects(g)) for g in range(generation + 1))))

    before = gc.get_threshold()
    gc.collect()
    gc.callbacks.append(watch)
    try:
        young = gc_policy.use("broker")[0]
        survivors = [[] for _ in range(12 * young)]
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*before)
    assert len(survivors) == 12 * young  # all alive until every collection was seen
    generations = [generation for generation, _ in walked]
    assert generations.count(1) >= 5 and 2 not in generations
    assert "0,0" not in ",".join(map(str, generations))  # never two young ones in a row
    assert max(objects for _, objects in walked) <= 2 * gc_policy.BROKER_THRESHOLDS[0] + 1000


async def test_the_completion_queue_completes_each_operation_at_its_latency() -> None:
    scheduler = ManualScheduler()
    completer = CompletionQueue(scheduler)
    latch = Latch(4, asyncio.get_running_loop().create_future())
    operations = [FakeOperation(1000, latency, 0, scheduler, latch) for latency in (5, 3, 5, 9)]
    for operation in operations:
        completer.add(operation)
    scheduler.advance(4)
    assert [op.completed for op in operations] == [False, True, False, False]
    scheduler.advance(1)
    assert [op.completed for op in operations] == [True, True, True, False]
    scheduler.advance(4)
    assert all(op.completed for op in operations) and latch.count == 0


def test_collector_off_restores_the_state_it_found() -> None:
    assert gc.isenabled()
    with gc_policy.collector_off():
        assert not gc.isenabled()
        with gc_policy.collector_off():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block's choice stands
    assert gc.isenabled()
