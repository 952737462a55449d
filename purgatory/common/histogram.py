"""Latency histograms without locks, for the request path of brokers and clients alike."""

from __future__ import annotations

import bisect

# Request times from 50 us to 30 s: fine where a healthy broker lives, coarse beyond.
TIME_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class Histogram:
    """A Prometheus-style histogram without locks: ``counts[i]`` holds observations in
    (bounds[i-1], bounds[i]]; the last slot holds those above every bound."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = TIME_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def merged(self, other: Histogram) -> Histogram:
        """A new histogram holding the observations of both (same bounds)."""
        out = Histogram(self.bounds)
        out.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        out.sum = self.sum + other.sum
        return out

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((_fmt(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


def _fmt(bound: float) -> str:
    return repr(float(bound))


class FetchLatency:
    """Fetch round trips to one broker: total, *true* (total minus the broker's
    ``wait_time_ms``: what the network and the broker itself took, KIP-736) and the wait."""

    __slots__ = ("total", "true", "wait")

    def __init__(self) -> None:
        self.total = Histogram()
        self.true = Histogram()
        self.wait = Histogram()

    def observe(self, total_s: float, wait_s: float) -> None:
        self.total.observe(total_s)
        self.true.observe(max(total_s - wait_s, 0.0))
        self.wait.observe(wait_s)
