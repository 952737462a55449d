"""Kafka's sampled ``Rate`` (``SampledStat`` over a ``WindowedSum``) and QuotaUtils'
throttle time: a pure function of the values recorded and the times given (milliseconds;
no clock is read here, the tests drive time by hand).

A rate keeps up to ``samples`` + 1 samples of ``window_ms`` each; its value is the sum of
the samples not expired (no event for ``samples`` x ``window_ms``) over the time since
the oldest one began, taken to be at least ``samples`` - 1 whole windows (so a client's
first second does not measure as a huge rate: it may send that many windows' worth
before it is throttled, as Kafka's clients may).
"""

from __future__ import annotations

import math


class _Sample:
    """Invariant: ``value`` is the sum recorded since ``start_ms``; ``last_event_ms`` is
    when it was last recorded into (or started)."""

    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """Kafka's ``Rate`` of a quota sensor (``quota.window.num`` samples of
    ``quota.window.size.seconds``), in units per second."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One more than ``samples``: a sample overlapping the window's start is kept.
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the samples not expired (Kafka's WindowedSum)."""
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``): since the
        oldest sample began, at least ``samples`` - 1 whole windows, at least 1 ms."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        return self.total(now_ms) / (self.window_size_ms(now_ms) / 1000)


def throttle_time_ms(rate: float, bound: float, window_size_ms: int) -> int:
    """QuotaUtils.throttleTime: how long until a rate measured ``rate`` over
    ``window_size_ms`` is back to ``bound`` if nothing more is recorded."""
    return math.floor((rate - bound) / bound * window_size_ms + 0.5)  # Java's Math.round
