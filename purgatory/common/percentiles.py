"""Percentiles of raw samples (latencies in ms), as the benchmarks print them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1, nearest rank) of sorted ``ordered``, rounded to three
    places; 0 when there are no samples."""
    if not ordered:
        return 0.0
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


_SPREAD = (("p50", 0.5), ("p99", 0.99), ("max", 1.0))
_LATENCY = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))


def _at(samples: Iterable[float], points: tuple[tuple[str, float], ...]) -> dict[str, float]:
    ordered = sorted(samples)
    return {name: percentile(ordered, q) for name, q in points}


def spread(samples: Iterable[float]) -> dict[str, float]:
    """p50, p99 and max of ``samples`` (all 0 when there are none)."""
    return _at(samples, _SPREAD)


def latency_summary(samples: Iterable[float]) -> dict[str, float]:
    """p50, p99, p999 and max of ``samples`` (all 0 when there are none)."""
    return _at(samples, _LATENCY)
