"""Prometheus metrics of one broker (its own registry, so several brokers share a process).

Names follow Prometheus conventions; docs/metrics.md maps each to the Kafka JMX name it
mirrors. Per-partition figures are read at scrape time, never counted on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from protocol.api import SCHEMAS, ApiKey
from protocol.errors import error_name

# Request times from 50 us to 30 s: fine where a healthy broker lives, coarse beyond.
TIME_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


class BrokerMetrics:
    def __init__(self, broker_id: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "purgatory_requests", "Requests received, by request type and version.",
            ["request", "version"], registry=r)
        self.request_time = Histogram(
            "purgatory_request_total_time_seconds",
            "Time from a request's arrival to its response being queued for the socket.",
            ["request"], buckets=TIME_BUCKETS, registry=r)
        self.errors = Counter(
            "purgatory_errors", "Error codes returned, by request type and error name.",
            ["request", "error"], registry=r)
        self.bad_requests = Counter(
            "purgatory_bad_requests",
            "Input that could not be served as sent, by reason (the connection is closed "
            "when the request header is unreadable).", ["reason"], registry=r)
        self.bytes_in = Counter(
            "purgatory_bytes_in", "Record batch bytes appended by producers.", registry=r)
        self.bytes_out = Counter(
            "purgatory_bytes_out", "Record batch bytes returned by fetches.", registry=r)
        self.messages_in = Counter(
            "purgatory_messages_in", "Records appended by producers.", registry=r)
        self.network_in = Counter(
            "purgatory_network_received_bytes", "Bytes read from client sockets.", registry=r)
        self.network_out = Counter(
            "purgatory_network_sent_bytes", "Bytes written to client sockets.", registry=r)
        self.connections = Gauge(
            "purgatory_connections", "Open client connections.", registry=r)
        self.connections_created = Counter(
            "purgatory_connections_created", "Client connections accepted.", registry=r)
        self.connections_closed = Counter(
            "purgatory_connections_closed", "Client connections closed.", registry=r)
        info = Gauge("purgatory_broker_info", "Constant 1, labelled with the broker id.",
                     ["broker_id"], registry=r)
        info.labels(str(broker_id)).set(1)
        self._request_children: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._error_children: dict[tuple[str, int], Any] = {}

    def for_request(self, api_key: int, version: int) -> tuple[Any, Any]:
        """(request counter, time histogram) children for an API, resolved once."""
        key = (api_key, version)
        children = self._request_children.get(key)
        if children is None:
            if (api_key, version) in SCHEMAS:
                name, label = ApiKey(api_key).api_name, str(version)
            else:  # never a label per value a peer sends: cardinality stays bounded
                name, label = "Unknown", "unknown"
            children = (self.requests.labels(name, label), self.request_time.labels(name))
            if len(self._request_children) < 1000:
                self._request_children[key] = children
        return children

    def record_error(self, request: str, code: int, count: int = 1) -> None:
        key = (request, code)
        child = self._error_children.get(key)
        if child is None:
            child = self.errors.labels(request, error_name(code))
            self._error_children[key] = child
        child.inc(count)

    def add_partition_collector(self, source: Callable[[], Iterable[tuple[str, int, int, int, int, int]]]) -> None:
        """Register scrape-time gauges of (topic, partition, size, start, end, hw) rows."""
        self.registry.register(_PartitionCollector(source))


class _PartitionCollector(Collector):
    def __init__(self, source: Callable[[], Iterable[tuple[str, int, int, int, int, int]]]) -> None:
        self.source = source

    def collect(self) -> Iterable[GaugeMetricFamily]:
        size = GaugeMetricFamily("purgatory_log_size_bytes", "Bytes held by a partition log.",
                                 labels=["topic", "partition"])
        start = GaugeMetricFamily("purgatory_log_start_offset", "First offset a partition log holds.",
                                  labels=["topic", "partition"])
        end = GaugeMetricFamily("purgatory_log_end_offset", "Offset the next appended record gets.",
                                labels=["topic", "partition"])
        hw = GaugeMetricFamily("purgatory_high_watermark", "Offset up to which consumers may read.",
                               labels=["topic", "partition"])
        count = 0
        for topic, partition, size_bytes, log_start, log_end, high_watermark in self.source():
            labels = [topic, str(partition)]
            size.add_metric(labels, size_bytes)
            start.add_metric(labels, log_start)
            end.add_metric(labels, log_end)
            hw.add_metric(labels, high_watermark)
            count += 1
        partitions = GaugeMetricFamily("purgatory_partitions", "Partitions this broker leads.",
                                       value=count)
        return [size, start, end, hw, partitions]

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []
