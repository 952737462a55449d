"""Prometheus metrics of one broker (its own registry, so several brokers share a process).

The request path only adds to plain integers and a bucket array (a prometheus_client
``inc`` takes a lock and costs more than a produce's own work); a collector turns them into
metric families when /metrics is scraped. Names follow Prometheus conventions;
docs/metrics.md maps each to the Kafka JMX name it mirrors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from broker.purgatory import DelayedOperationPurgatory
from protocol.api import SCHEMAS, ApiKey
from protocol.errors import error_name
from purgatory.common.histogram import FetchLatency, Histogram

if TYPE_CHECKING:
    from broker.log.tiered.remote_log_manager import RemoteLogManager
    from broker.ops.faults import FaultInjector

SAMPLES_KEPT = 20000  # per source broker

# topic, partition, size, log start, log end, high watermark, leads it here,
# under-replicated, under min ISR
PartitionRow = tuple[str, int, int, int, int, int, bool, bool, bool]


class RequestTimes:
    """Kafka's request time split for one request type (RequestMetrics):

    - ``local``: handling on the request thread (here: on the loop, before any wait);
    - ``remote``: waiting for something else: the purgatory, the controller;
    - ``total``: arrival to the response being queued for the socket;
    - ``total_local``: total - remote (KIP-736's TotalLocalTime), what the broker itself took.

    Requests answered without waiting (most) cost one observation: their local, total and
    total_local times are the same figure and their remote time is 0, so they share one
    histogram that is merged into all four when scraped.
    """

    __slots__ = (
        "_delayed_local",
        "_delayed_remote",
        "_delayed_total",
        "_delayed_total_local",
        "immediate",
    )

    def __init__(self) -> None:
        self.immediate = Histogram()
        self._delayed_total = Histogram()
        self._delayed_local = Histogram()
        self._delayed_remote = Histogram()
        self._delayed_total_local = Histogram()

    def observe_immediate(self, seconds: float) -> None:
        self.immediate.observe(seconds)

    def observe_delayed(self, local: float, remote: float, total: float) -> None:
        self._delayed_total.observe(total)
        self._delayed_local.observe(local)
        self._delayed_remote.observe(remote)
        self._delayed_total_local.observe(total - remote)

    @property
    def total(self) -> Histogram:
        return self.immediate.merged(self._delayed_total)

    @property
    def local(self) -> Histogram:
        return self.immediate.merged(self._delayed_local)

    @property
    def total_local(self) -> Histogram:
        return self.immediate.merged(self._delayed_total_local)

    @property
    def remote(self) -> Histogram:
        zeros = Histogram(self.immediate.bounds)
        zeros.counts[0] = sum(self.immediate.counts)
        return zeros.merged(self._delayed_remote)


class RequestStats:
    """Count and times of one request type and version."""

    __slots__ = ("count", "name", "times", "version")

    def __init__(self, name: str, version: str, times: RequestTimes) -> None:
        self.name = name
        self.version = version
        self.count = 0
        self.times = times


class FetcherStats:
    """A follower's fetching from one leader broker (Kafka's FetcherStats and lag)."""

    __slots__ = ("bytes", "errors", "lag", "latency", "requests", "samples")

    def __init__(self) -> None:
        # The latest fetch round trips, (wall-clock end, total s, wait s), for experiments
        # that need request-level samples (GET /v1/samples/replica-fetch).
        self.samples: deque[tuple[float, float, float]] = deque(maxlen=SAMPLES_KEPT)
        self.requests = 0
        self.bytes = 0
        self.errors = 0
        self.latency = FetchLatency()
        self.lag: dict[tuple[str, int], int] = {}  # leader HW - own LEO, per partition


class BrokerMetrics:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.registry = CollectorRegistry(auto_describe=False)
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0
        self.network_in = 0
        self.network_out = 0
        self.connections = 0
        self.connections_created = 0
        self.connections_closed = 0
        self.errors: dict[tuple[str, int], int] = {}
        self.bad_requests: dict[str, int] = {}
        self._requests: dict[tuple[int, int, bool], RequestStats] = {}
        self._times: dict[str, RequestTimes] = {}
        self._partition_sources: list[Callable[[], Iterable[PartitionRow]]] = []
        self.purgatories: list[DelayedOperationPurgatory[Any]] = []
        self.fetch_expirations = {"consumer": 0, "follower": 0}
        self.remote_fetch_expirations = 0
        self.remote_log_manager: RemoteLogManager | None = None
        self.faults: FaultInjector | None = None
        # Parked fetches woken by an event: completion -> response queued, by follower or not.
        self.fetch_wake = {False: Histogram(), True: Histogram()}
        self.fetchers: dict[int, FetcherStats] = {}  # by source (leader) broker
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.registry.register(_BrokerCollector(self))

    def for_request(self, api_key: int, version: int, follower: bool = False) -> RequestStats:
        """The stats of an API version, created once. Fetches are told apart as Kafka does
        (FetchConsumer / FetchFollower). Unknown keys/versions share one entry, so a peer
        cannot grow the label set."""
        key = (api_key, version, follower)
        stats = self._requests.get(key)
        if stats is None:
            if (api_key, version) in SCHEMAS:
                name = ApiKey(api_key).api_name
                if api_key == ApiKey.FETCH:
                    name = "FetchFollower" if follower else "FetchConsumer"
                label = str(version)
            else:
                name, label, key = "Unknown", "unknown", (-1, -1, False)
            stats = self._requests.get(key)
            if stats is None:
                stats = RequestStats(name, label, self._times.setdefault(name, RequestTimes()))
                self._requests[key] = stats
            self._requests[(api_key, version, follower)] = stats
        return stats

    def record_error(self, request: str, code: int, count: int = 1) -> None:
        key = (request, code)
        self.errors[key] = self.errors.get(key, 0) + count

    def record_bad_request(self, reason: str) -> None:
        self.bad_requests[reason] = self.bad_requests.get(reason, 0) + 1

    def fetcher_stats(self, source_broker: int) -> FetcherStats:
        stats = self.fetchers.get(source_broker)
        if stats is None:
            stats = self.fetchers[source_broker] = FetcherStats()
        return stats

    def add_purgatory(self, purgatory: DelayedOperationPurgatory[Any]) -> None:
        self.purgatories.append(purgatory)

    def add_partition_source(self, source: Callable[[], Iterable[PartitionRow]]) -> None:
        self._partition_sources.append(source)

    def partition_rows(self) -> Iterator[PartitionRow]:
        for source in self._partition_sources:
            yield from source()


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


class _BrokerCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        mt = self.metrics
        info = GaugeMetricFamily(
            "purgatory_broker_info",
            "Constant 1, labelled with the broker id.",
            labels=["broker_id"],
        )
        info.add_metric([str(mt.broker_id)], 1)
        yield info
        requests = CounterMetricFamily(
            "purgatory_requests",
            "Requests received, by request type and version.",
            labels=["request", "version"],
        )
        seen: set[int] = set()
        for stats in mt._requests.values():
            if id(stats) not in seen:
                seen.add(id(stats))
                requests.add_metric([stats.name, stats.version], stats.count)
        yield requests
        for part, doc in (
            ("total", "Time from a request's arrival to its response being queued for the socket."),
            ("local", "Time a request was handled before it waited (or in all, if it never did)."),
            ("remote", "Time a request waited: in a purgatory, or for the controller."),
            ("total_local", "Total time minus remote time: what the broker itself took (KIP-736)."),
        ):
            family = HistogramMetricFamily(
                f"purgatory_request_{part}_time_seconds", doc, labels=["request"]
            )
            for name, times in sorted(mt._times.items()):
                hist = getattr(times, part)
                family.add_metric([name], hist.cumulative(), hist.sum)
            yield family
        errors = CounterMetricFamily(
            "purgatory_errors",
            "Error codes returned, by request type and error name.",
            labels=["request", "error"],
        )
        for (request, code), count in sorted(mt.errors.items()):
            errors.add_metric([request, error_name(code)], count)
        yield errors
        bad = CounterMetricFamily(
            "purgatory_bad_requests",
            "Input that could not be served as sent, by reason (the connection is closed when "
            "the request header is unreadable).",
            labels=["reason"],
        )
        for reason, count in sorted(mt.bad_requests.items()):
            bad.add_metric([reason], count)
        yield bad
        yield _counter(
            "purgatory_bytes_in", "Record batch bytes appended by producers.", mt.bytes_in
        )
        yield _counter(
            "purgatory_bytes_out", "Record batch bytes returned by fetches.", mt.bytes_out
        )
        yield _counter("purgatory_messages_in", "Records appended by producers.", mt.messages_in)
        yield _counter(
            "purgatory_network_received_bytes", "Bytes read from client sockets.", mt.network_in
        )
        yield _counter(
            "purgatory_network_sent_bytes", "Bytes written to client sockets.", mt.network_out
        )
        yield GaugeMetricFamily(
            "purgatory_connections", "Open client connections.", value=mt.connections
        )
        yield _counter(
            "purgatory_connections_created", "Client connections accepted.", mt.connections_created
        )
        yield _counter(
            "purgatory_connections_closed", "Client connections closed.", mt.connections_closed
        )
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
        leaders = under_replicated = under_min_isr = 0
        for (
            topic,
            partition,
            size_bytes,
            log_start,
            log_end,
            high_watermark,
            leads,
            under,
            under_min,
        ) in mt.partition_rows():
            key = [topic, str(partition)]
            size.add_metric(key, size_bytes)
            start.add_metric(key, log_start)
            end.add_metric(key, log_end)
            hw.add_metric(key, high_watermark)
            leaders += leads
            under_replicated += under
            under_min_isr += under_min
        yield from (size, start, end, hw)
        yield GaugeMetricFamily(
            "purgatory_partitions", "Partitions this broker leads.", value=leaders
        )
        yield GaugeMetricFamily(
            "purgatory_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            value=under_replicated,
        )
        yield GaugeMetricFamily(
            "purgatory_under_min_isr_partitions",
            "Partitions led here whose ISR is smaller than min.insync.replicas.",
            value=under_min_isr,
        )
        yield _counter("purgatory_isr_shrinks", "Followers removed from an ISR.", mt.isr_shrinks)
        yield _counter("purgatory_isr_expands", "Followers added to an ISR.", mt.isr_expands)
        yield from self._fetcher_families()
        yield from self._purgatory_families()
        yield from self._remote_families()
        yield from self._fault_families()

    def _fetcher_families(self) -> Iterator[Metric]:
        mt = self.metrics
        source = ["source_broker"]
        requests = CounterMetricFamily(
            "purgatory_replica_fetcher_requests", "Fetches sent by this follower.", labels=source
        )
        fetched = CounterMetricFamily(
            "purgatory_replica_fetcher_bytes", "Record bytes replicated.", labels=source
        )
        errors = CounterMetricFamily(
            "purgatory_replica_fetcher_errors",
            "Failed fetches and partition errors.",
            labels=source,
        )
        latency = HistogramMetricFamily(
            "purgatory_replica_fetch_latency_seconds",
            "A follower's fetch round trips: total, and true (total minus the leader's "
            "wait_time_ms, KIP-736).",
            labels=["source_broker", "kind"],
        )
        wait = HistogramMetricFamily(
            "purgatory_replica_fetch_wait_seconds",
            "Time the follower's fetches waited in the leader's purgatory (wait_time_ms).",
            labels=source,
        )
        lag = GaugeMetricFamily(
            "purgatory_replica_fetcher_lag",
            "Leader high watermark minus this follower's log end offset, per partition.",
            labels=["topic", "partition"],
        )
        max_lag = 0
        for broker, stats in sorted(mt.fetchers.items()):
            label = [str(broker)]
            requests.add_metric(label, stats.requests)
            fetched.add_metric(label, stats.bytes)
            errors.add_metric(label, stats.errors)
            for kind, hist in (("total", stats.latency.total), ("true", stats.latency.true)):
                latency.add_metric([str(broker), kind], hist.cumulative(), hist.sum)
            wait.add_metric(label, stats.latency.wait.cumulative(), stats.latency.wait.sum)
            for (topic, partition), value in sorted(stats.lag.items()):
                lag.add_metric([topic, str(partition)], value)
                max_lag = max(max_lag, value)
        yield from (requests, fetched, errors, latency, wait, lag)
        yield GaugeMetricFamily(
            "purgatory_replica_fetcher_max_lag",
            "The largest lag over every partition this broker follows (Kafka's MaxLag).",
            value=max_lag,
        )

    def _purgatory_families(self) -> Iterator[Metric]:
        mt = self.metrics
        size = GaugeMetricFamily(
            "purgatory_size",
            "Entries in the purgatory's watcher lists (an operation counts once per key).",
            labels=["purgatory"],
        )
        delayed = GaugeMetricFamily(
            "purgatory_delayed_operations",
            "Operations waiting in the purgatory's timer.",
            labels=["purgatory"],
        )
        expirations = CounterMetricFamily(
            "purgatory_expirations", "Operations that timed out.", labels=["purgatory"]
        )
        completions = CounterMetricFamily(
            "purgatory_completions",
            "Operations completed after waiting, by their condition or by timing out.",
            labels=["purgatory"],
        )
        purges = CounterMetricFamily(
            "purgatory_purges",
            "Scans of every watcher list (purge mode only).",
            labels=["purgatory"],
        )
        for p in mt.purgatories:
            size.add_metric([p.name], p.watched)
            delayed.add_metric([p.name], p.delayed)
            expirations.add_metric([p.name], p.expirations)
            completions.add_metric([p.name], p.completions)
            purges.add_metric([p.name], p.purges)
        yield from (size, delayed, expirations, completions, purges)
        fetch = CounterMetricFamily(
            "purgatory_delayed_fetch_expirations",
            "Delayed fetches that timed out, by who fetched.",
            labels=["fetcher_type"],
        )
        for kind, count in sorted(mt.fetch_expirations.items()):
            fetch.add_metric([kind], count)
        yield fetch
        wake = HistogramMetricFamily(
            "purgatory_delayed_fetch_wake_seconds",
            "A parked fetch completed by an event (an append, a high watermark move): from the "
            "event to its response being queued for the socket.",
            labels=["fetcher_type"],
        )
        for follower, hist in ((False, mt.fetch_wake[False]), (True, mt.fetch_wake[True])):
            wake.add_metric(["follower" if follower else "consumer"], hist.cumulative(), hist.sum)
        yield wake

    def _remote_families(self) -> Iterator[Metric]:
        mt = self.metrics
        yield _counter(
            "purgatory_remote_fetch_expirations",
            "Remote fetches answered because remote.fetch.max.wait.ms passed.",
            mt.remote_fetch_expirations,
        )
        rlm = mt.remote_log_manager
        if rlm is None:
            return
        readers = rlm.readers
        yield GaugeMetricFamily(
            "purgatory_remote_log_reader_task_queue_size",
            "Remote reads queued behind the running ones.",
            value=readers.queue_size,
        )
        yield GaugeMetricFamily(
            "purgatory_remote_log_reader_running",
            "Remote reads running (at most remote.log.reader.threads).",
            value=readers.running,
        )
        yield GaugeMetricFamily(
            "purgatory_remote_log_reader_avg_idle_ratio",
            "Fraction of the remote reader slots' time spent idle, over the last 10 s or more.",
            value=readers.avg_idle_ratio(),
        )
        yield _counter(
            "purgatory_remote_log_reader_busy_seconds",
            "Slot-seconds the remote readers spent reading.",
            readers.busy_seconds(),
        )
        hist = HistogramMetricFamily(
            "purgatory_remote_log_reader_fetch_time_seconds",
            "Time of a remote read, from its start on a reader to its end.",
        )
        hist.add_metric([], readers.read_time.cumulative(), readers.read_time.sum)
        yield hist
        yield _counter("purgatory_remote_fetch_requests", "Remote reads run.", readers.reads)
        yield _counter(
            "purgatory_remote_fetch_bytes",
            "Record bytes read from the remote tier.",
            readers.bytes_read,
        )
        yield _counter("purgatory_remote_fetch_errors", "Remote reads that failed.", readers.errors)
        yield _counter(
            "purgatory_remote_fetch_rejected",
            "Remote reads refused because the reader queue was full.",
            readers.rejected,
        )
        yield _counter(
            "purgatory_remote_copy_bytes",
            "Bytes of segments copied to the remote tier.",
            rlm.copied_bytes,
        )
        yield _counter(
            "purgatory_remote_copy_requests",
            "Segments copied to the remote tier.",
            rlm.copied_segments,
        )
        yield _counter(
            "purgatory_remote_delete_requests",
            "Remote segments deleted by retention.",
            rlm.deleted_segments,
        )
        yield GaugeMetricFamily(
            "purgatory_remote_log_size_bytes",
            "Bytes this broker's replicas hold in the remote tier.",
            value=rlm.storage.size_bytes,
        )

    def _fault_families(self) -> Iterator[Metric]:
        faults = self.metrics.faults
        if faults is None:
            return
        active = GaugeMetricFamily(
            "purgatory_faults_active", "Injected faults in force, by kind.", labels=["kind"]
        )
        by_kind: dict[str, int] = {}
        for fault in faults.faults.values():
            by_kind[fault.spec.kind] = by_kind.get(fault.spec.kind, 0) + 1
        for kind in ("latency", "error", "pause", "disconnect"):
            active.add_metric([kind], by_kind.get(kind, 0))
        yield active
        injected = CounterMetricFamily(
            "purgatory_fault_injections",
            "Times a fault acted: bytes held, requests answered with an error, connections "
            "dropped, pauses begun.",
            labels=["fault", "kind"],
        )
        for (name, kind), count in sorted(faults.injected.items()):
            injected.add_metric([name, kind], count)
        yield injected
