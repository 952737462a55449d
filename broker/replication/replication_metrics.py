"""The replica manager's own metrics: per-partition log gauges, the partition counts, ISR
changes and the delayed fetches' expirations and wake-ups (Kafka's ReplicaManager,
UnifiedLog and DelayedFetchMetrics gauges and meters). The replica manager registers
``collect`` with the broker's metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from purgatory.broker.ops.metrics import add_histogram, counter, gauge
from purgatory.broker.replication.partition import Partition
from purgatory.common.histogram import Histogram


class ReplicationMetrics:
    __slots__ = (
        "fetch_expirations",
        "fetch_wake",
        "isr_expands",
        "isr_shrinks",
        "partitions",
        "remote_fetch_expirations",
    )

    def __init__(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self.partitions = partitions
        self.isr_shrinks = 0  # followers removed from an ISR
        self.isr_expands = 0  # followers added to one
        self.fetch_expirations = {"consumer": 0, "follower": 0}
        self.remote_fetch_expirations = 0
        # Parked fetches woken by an event: completion -> response queued, by follower or not.
        self.fetch_wake = {False: Histogram(), True: Histogram()}

    def collect(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "purgatory_log_size_bytes", "Bytes held by a partition log.", labels=labels
        )
        start = GaugeMetricFamily(
            "purgatory_log_start_offset", "First offset a partition log holds.", labels=labels
        )
        end = GaugeMetricFamily(
            "purgatory_log_end_offset", "Offset the next appended record gets.", labels=labels
        )
        hw = GaugeMetricFamily(
            "purgatory_high_watermark", "Offset up to which consumers may read.", labels=labels
        )
        hosted = leaders = under_replicated = under_min_isr = 0
        for p in self.partitions():
            hosted += 1
            key = [p.topic, str(p.index)]
            log = p.log
            size.add_metric(key, log.size_bytes)
            start.add_metric(key, log.log_start_offset)
            end.add_metric(key, log.log_end_offset)
            hw.add_metric(key, p.high_watermark)
            leaders += p.is_leader
            under_replicated += p.under_replicated()
            under_min_isr += p.under_min_isr()
        yield from (size, start, end, hw)
        yield gauge("purgatory_leader_partitions", "Partitions this broker leads.", leaders)
        yield gauge(
            "purgatory_hosted_partitions",
            "Partitions this broker holds a replica of, led or followed.",
            hosted,
        )
        yield gauge(
            "purgatory_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            under_replicated,
        )
        yield gauge(
            "purgatory_under_min_isr_partitions",
            "Partitions led here whose ISR is smaller than min.insync.replicas.",
            under_min_isr,
        )
        yield counter("purgatory_isr_shrinks", "Followers removed from an ISR.", self.isr_shrinks)
        yield counter("purgatory_isr_expands", "Followers added to an ISR.", self.isr_expands)
        yield from self._delayed_fetch_families()

    def _delayed_fetch_families(self) -> Iterator[Metric]:
        expirations = CounterMetricFamily(
            "purgatory_delayed_fetch_expirations",
            "Delayed fetches that timed out, by who fetched.",
            labels=["fetcher_type"],
        )
        for kind, count in sorted(self.fetch_expirations.items()):
            expirations.add_metric([kind], count)
        yield expirations
        wake = HistogramMetricFamily(
            "purgatory_delayed_fetch_wake_seconds",
            "A parked fetch completed by an event (an append, a high watermark move): from the "
            "event to its response being queued for the socket.",
            labels=["fetcher_type"],
        )
        for follower in (False, True):
            add_histogram(wake, ["follower" if follower else "consumer"], self.fetch_wake[follower])
        yield wake
        yield counter(
            "purgatory_remote_fetch_expirations",
            "Remote fetches answered because remote.fetch.max.wait.ms passed.",
            self.remote_fetch_expirations,
        )
