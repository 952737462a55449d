"""Percentiles of raw samples (latencies in ms), as the benchmarks print them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1, nearest rank) of sorted ``ordered``, rounded to three
    places; 0 when there are no samples."""
    if not ordered:
        return 0.0
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def latency_summary(samples: Iterable[float]) -> dict[str, float]:
    """p50, p99, p999 and max of ``samples`` (all 0 when there are none)."""
    ordered = sorted(samples)
    return {
        "p50": percentile(ordered, 0.5),
        "p99": percentile(ordered, 0.99),
        "p999": percentile(ordered, 0.999),
        "max": percentile(ordered, 1.0),
    }
