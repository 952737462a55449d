"""Prometheus metrics of one broker (its own registry, so several brokers share a process).

The request path only adds to plain integers and a bucket array (a prometheus_client
``inc`` takes a lock and costs more than a produce's own work); families are built from
them when /metrics is scraped. ``BrokerMetrics`` holds what the request path counts
(requests, errors, bytes, connections: Kafka's RequestMetrics, BrokerTopicStats and
SocketServer metrics); every other component registers a source of its own families with
``register`` (Kafka's ``metricsGroup.newGauge``), so this module knows no subsystem. Sources
may yield a family of the same name (every purgatory's owner yields ``purgatory_size``):
a scrape merges them into one family, as the exposition format requires. The standard
``process_*``, ``python_info`` and ``python_gc_*`` families come from prometheus_client's
own collectors. Names follow Prometheus conventions; docs/metrics.md maps each to the
Kafka JMX name it mirrors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from purgatory.broker.network.request_channel import PURGATORY
from purgatory.broker.purgatory import DelayedOperationPurgatory
from purgatory.common.gc_policy import GcPauses
from purgatory.common.histogram import Histogram
from purgatory.protocol.api import SCHEMAS, ApiKey
from purgatory.protocol.errors import error_name

MetricsSource = Callable[[], Iterable[Metric]]  # a component's families, built per scrape


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
        "observe_immediate",
    )

    def __init__(self) -> None:
        self.immediate = Histogram()
        # A request answered at once: one observation, one call (this is on every request).
        self.observe_immediate: Callable[[float], None] = self.immediate.observe
        self._delayed_total = Histogram()
        self._delayed_local = Histogram()
        self._delayed_remote = Histogram()
        self._delayed_total_local = Histogram()

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

    __slots__ = ("count", "listener", "name", "times", "version")

    def __init__(self, name: str, version: str, listener: str, times: RequestTimes) -> None:
        self.name = name
        self.version = version
        self.listener = listener
        self.count = 0
        self.times = times


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
        self._requests: dict[tuple[int, int, bool, str], RequestStats] = {}
        self._times: dict[tuple[str, str], RequestTimes] = {}  # (request, listener)
        self.sources: list[MetricsSource] = []
        self.registry.register(_BrokerCollector(self))
        # The process's own figures (CPU, memory, file descriptors, the interpreter, its
        # collections): brokers sharing a process report the same values.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def register(self, source: MetricsSource) -> None:
        """Add a component's families to every scrape, after the request-path ones."""
        self.sources.append(source)

    def for_request(
        self, api_key: int, version: int, follower: bool = False, listener: str = PURGATORY
    ) -> RequestStats:
        """The stats of an API version on a listener, created once. Fetches are told apart
        as Kafka does (FetchConsumer / FetchFollower). Unknown keys/versions share one
        entry per listener, so a peer cannot grow the label set."""
        key = (api_key, version, follower, listener)
        stats = self._requests.get(key)
        if stats is None:
            if listener == PURGATORY:
                known = (api_key, version) in SCHEMAS
            else:  # a Kafka connection: its listener's code (kio) is loaded by now
                from purgatory.protocol import kafka_schemas

                known = kafka_schemas.supports(api_key, version)
            if known:
                name = ApiKey(api_key).api_name
                if api_key == ApiKey.FETCH:
                    name = "FetchFollower" if follower else "FetchConsumer"
                label = str(version)
            else:
                name, label, key = "Unknown", "unknown", (-1, -1, False, listener)
            stats = self._requests.get(key)
            if stats is None:
                times = self._times.setdefault((name, listener), RequestTimes())
                stats = RequestStats(name, label, listener, times)
                self._requests[key] = stats
            self._requests[(api_key, version, follower, listener)] = stats
        return stats

    def record_error(self, request: str, code: int, count: int = 1) -> None:
        key = (request, code)
        self.errors[key] = self.errors.get(key, 0) + count

    def record_bad_request(self, reason: str) -> None:
        self.bad_requests[reason] = self.bad_requests.get(reason, 0) + 1


def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def add_histogram(family: HistogramMetricFamily, labels: list[str], hist: Histogram) -> None:
    family.add_metric(labels, hist.cumulative(), hist.sum)


def gc_pause_families(pauses: GcPauses) -> Callable[[], Iterator[Metric]]:
    """The process's collection pauses, by generation (the JVM's GarbageCollector beans)."""

    def collect() -> Iterator[Metric]:
        family = HistogramMetricFamily(
            "purgatory_gc_pause_seconds",
            "Cyclic garbage collections of this broker's process and how long each stopped "
            "it, by generation (2: a full collection). Brokers sharing a process share it.",
            labels=["generation"],
        )
        for generation, histogram in pauses.by_generation.items():
            add_histogram(family, [str(generation)], histogram)
        yield family

    return collect


def purgatory_families(purgatories: Iterable[DelayedOperationPurgatory[Any]]) -> Iterator[Metric]:
    """The gauges and counters every purgatory has (Kafka's PurgatorySize,
    NumDelayedOperations and expiration meters), labelled with its name."""
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
    for p in purgatories:
        size.add_metric([p.name], p.watched)
        delayed.add_metric([p.name], p.delayed)
        expirations.add_metric([p.name], p.expirations)
        completions.add_metric([p.name], p.completions)
        purges.add_metric([p.name], p.purges)
    yield from (size, delayed, expirations, completions, purges)


class _BrokerCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        sources = (family for source in self.metrics.sources for family in source())
        return merged(itertools.chain(self._request_families(), sources))

    def _request_families(self) -> Iterator[Metric]:
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
            "Requests received, by request type, version and listener (PURGATORY: our "
            "protocol; Kafka's is labelled with the name of the listener it came in on).",
            labels=["request", "version", "listener"],
        )
        seen: set[int] = set()
        for stats in mt._requests.values():
            if id(stats) not in seen:
                seen.add(id(stats))
                requests.add_metric([stats.name, stats.version, stats.listener], stats.count)
        yield requests
        for part, doc in (
            ("total", "Time from a request's arrival to its response being queued for the socket."),
            ("local", "Time a request was handled before it waited (or in all, if it never did)."),
            ("remote", "Time a request waited: in a purgatory, or for the controller."),
            ("total_local", "Total time minus remote time: what the broker itself took (KIP-736)."),
        ):
            family = HistogramMetricFamily(
                f"purgatory_request_{part}_time_seconds", doc, labels=["request", "listener"]
            )
            for (name, listener), times in sorted(mt._times.items()):
                hist = getattr(times, part)
                family.add_metric([name, listener], hist.cumulative(), hist.sum)
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
        yield counter(
            "purgatory_bytes_in", "Record batch bytes appended by producers.", mt.bytes_in
        )
        yield counter(
            "purgatory_bytes_out", "Record batch bytes returned by fetches.", mt.bytes_out
        )
        yield counter("purgatory_messages_in", "Records appended by producers.", mt.messages_in)
        yield counter(
            "purgatory_network_received_bytes", "Bytes read from client sockets.", mt.network_in
        )
        yield counter(
            "purgatory_network_sent_bytes", "Bytes written to client sockets.", mt.network_out
        )
        yield gauge("purgatory_connections", "Open client connections.", mt.connections)
        yield counter(
            "purgatory_connections_created", "Client connections accepted.", mt.connections_created
        )
        yield counter(
            "purgatory_connections_closed", "Client connections closed.", mt.connections_closed
        )


def merged(families: Iterable[Metric]) -> list[Metric]:
    """Families of the same name as one, with all their samples, in order of first
    appearance: the text format allows a name's HELP and TYPE once. Families sharing a
    name must agree on type and help and not repeat a sample (a programming error)."""
    by_name: dict[str, Metric] = {}
    for family in families:
        first = by_name.get(family.name)
        if first is None:
            by_name[family.name] = family
            continue
        if (family.type, family.documentation, family.unit) != (
            first.type,
            first.documentation,
            first.unit,
        ):
            raise ValueError(
                f"two sources yield {family.name} as different families: {first.type} "
                f"{first.documentation!r} and {family.type} {family.documentation!r}"
            )
        held = {(s.name, tuple(sorted(s.labels.items()))) for s in first.samples}
        for sample in family.samples:
            if (sample.name, tuple(sorted(sample.labels.items()))) in held:
                raise ValueError(f"two sources yield the sample {sample.name}{sample.labels}")
        both = Metric(first.name, first.documentation, first.type, first.unit)
        both.samples = [*first.samples, *family.samples]  # the sources' families stay as built
        by_name[family.name] = both
    return list(by_name.values())
