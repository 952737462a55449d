"""Prometheus metrics of a Consumer, served over HTTP when given a port
(`purgatory consume --metrics-port`). Read at scrape time from the consumer's state."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from purgatory.clients.consumer import Consumer
from purgatory.common.http_server import HttpRequest, HttpResponse, HttpServer, Router


class ConsumerCollector(Collector):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def collect(self) -> Iterable[Metric]:
        c = self.consumer
        labels = ["topic", "partition"]
        fetcher_lag = GaugeMetricFamily(
            "purgatory_consumer_fetcher_lag",
            "High watermark minus the fetcher's next fetch offset.",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "purgatory_consumer_lag",
            "High watermark minus the application's next offset (what it has not consumed).",
            labels=labels,
        )
        for tp in c.assignment():
            key = [tp[0], str(tp[1])]
            if (value := c.fetcher_lag(tp)) is not None:
                fetcher_lag.add_metric(key, value)
            if (value := c.consumer_lag(tp)) is not None:
                lag.add_metric(key, value)
        yield fetcher_lag
        yield lag
        yield GaugeMetricFamily(
            "purgatory_consumer_fetcher_max_lag",
            "The largest fetcher lag over the assigned partitions (Kafka's MaxLag).",
            value=c.max_lag(),
        )
        yield GaugeMetricFamily(
            "purgatory_consumer_queued_chunks",
            "Chunks waiting in the queue.",
            value=c.queued_chunks(),
        )
        yield GaugeMetricFamily(
            "purgatory_consumer_queued_chunks_limit",
            "queued.max.message.chunks.",
            value=c.queue.maxsize,
        )
        latency = HistogramMetricFamily(
            "purgatory_consumer_fetch_latency_seconds",
            "Fetch round trips: total, and true (total minus the broker's wait_time_ms).",
            labels=["broker", "kind"],
        )
        wait = HistogramMetricFamily(
            "purgatory_consumer_fetch_wait_seconds",
            "Time fetches waited in the broker's purgatory (wait_time_ms).",
            labels=["broker"],
        )
        for broker, stats in sorted(c.fetch_latency.items()):
            for kind, hist in (("total", stats.total), ("true", stats.true)):
                latency.add_metric([str(broker), kind], hist.cumulative(), hist.sum)
            wait.add_metric([str(broker)], stats.wait.cumulative(), stats.wait.sum)
        yield latency
        yield wait


async def serve_metrics(consumer: Consumer, host: str, port: int) -> HttpServer:
    """Serve GET /metrics for ``consumer`` until the returned server is stopped."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConsumerCollector(consumer))

    async def metrics(_: HttpRequest) -> HttpResponse:
        return HttpResponse(body=generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    router = Router()
    router.add("GET", "/metrics", metrics)
    server = HttpServer(router)
    await server.start(host, port)
    return server
