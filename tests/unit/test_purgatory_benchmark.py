"""The purgatory benchmarks compute what they claim (their speed is never asserted)."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from purgatory.broker.purgatory.perf import (
    IMPLEMENTATIONS,
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
