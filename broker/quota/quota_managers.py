"""QuotaManagers (Kafka's QuotaFactory.QuotaManagers): the broker's produce and fetch
byte-rate quotas, applied to the request being handled as Kafka's KafkaApis applies them.

- Produce: the request's size is recorded when it arrives (Kafka: when it is answered;
  the difference is the append's wait); over the quota, the response carries
  ``throttle_time_ms`` and the connection is not read for that long (KIP-219).
- Fetch: a fetch's max bytes is capped at what the quota allows in its window; the
  response's record bytes are recorded when it completes; over the quota, the response
  goes out empty with ``throttle_time_ms`` (what was recorded taken back) and the
  connection is muted.

Whose quota: the connection's principal (``User:ANONYMOUS`` without SASL or TLS) and the
request's client id. Brokers (connections that proved cluster.secret) are never
throttled.
- request_percentage (Kafka's ClientRequestQuotaManager): the time the broker spent
  handling each request of a client (when its handler returned: Kafka's request thread
  time) counts against it, on both listeners; over it, the connection is muted for the
  throttle time (at most one window) and an answer made at once carries it in
  ``throttle_time_ms`` (an answer that waits does not).

controller_mutation_rate is stored and described but not enforced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from purgatory.broker.controller.client_quota_control import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from purgatory.broker.metadata.client_quota_image import ClientQuotasImage
from purgatory.broker.quota.client_quota_manager import ClientQuotaManager
from purgatory.broker.replication.fetch_params import FetchResult

if TYPE_CHECKING:
    from purgatory.broker.network.broker_connection import BrokerConnection
    from purgatory.broker.network.socket_server import SocketServer

PRODUCE = "Produce"
FETCH = "Fetch"
REQUEST = "Request"


class QuotaManagers:
    def __init__(self, samples: int, window_seconds: int, clock_ms: Callable[[], int]) -> None:
        window_ms = window_seconds * 1000
        self.produce = ClientQuotaManager(PRODUCE, PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotaManager(FETCH, CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = ClientQuotaManager(
            REQUEST, REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms
        )
        self.clock_ms = clock_ms
        self.server: SocketServer | None = None  # set once the socket server exists

    def update(self, quotas: ClientQuotasImage) -> None:
        self.produce.update(quotas)
        self.fetch.update(quotas)
        self.request.update(quotas)
        if self.server is not None:  # what the connections ask after each request
            self.server.request_quotas = self if self.request.enabled else None

    # -- request_percentage ------------------------------------------------------------------

    def request_throttle_ms(
        self, connection: BrokerConnection, client_id: str, seconds: float
    ) -> int:
        """Record ``seconds`` of handling a client's request against its
        request_percentage (Kafka's ClientRequestQuotaManager: 100 is one thread's whole
        time); the throttle time, at most a window (its connection muted for it), or 0."""
        user = connection.principal.name
        manager = self.request
        throttle_ms = manager.record_and_get_throttle_time_ms(
            user, client_id, seconds * 100, self.clock_ms()
        )
        if throttle_ms > 0:
            manager.throttled(user, client_id, throttle_ms)
            connection.throttle(throttle_ms)
        return throttle_ms

    # -- Produce -----------------------------------------------------------------------------

    def produce_throttle_ms(self) -> int:
        """Record the size of the produce request being handled (Kafka's
        request.sizeInBytes); the throttle time (its connection muted for it), or 0. Ask
        only when ``produce.enabled``."""
        server = self.server
        if server is None or server.current_broker is not None:
            return 0
        user, client_id = server.current_principal.name, server.current_client or ""
        manager = self.produce
        throttle_ms = manager.record_and_get_throttle_time_ms(
            user, client_id, server.current_request_bytes, self.clock_ms()
        )
        if throttle_ms > 0:
            manager.throttled(user, client_id, throttle_ms)
            server.current_connection.throttle(throttle_ms)
        return throttle_ms

    # -- Fetch -------------------------------------------------------------------------------

    def fetch_quota(self, max_bytes: int) -> tuple[FetchQuota | None, int]:
        """For the fetch being handled (ask only when ``fetch.enabled``): what completes
        it under its quota (None: not limited) and its max bytes, capped at what the
        quota allows in its window (Kafka's getMaxValueInQuotaWindow)."""
        server = self.server
        if server is None or server.current_broker is not None:
            return None, max_bytes
        user, client_id = server.current_principal.name, server.current_client or ""
        most = self.fetch.max_value_in_quota_window(user, client_id)
        if most is None:
            return None, max_bytes
        quota = FetchQuota(self, server.current_connection, user, client_id)
        return quota, min(max_bytes, int(most))

    # -- metrics -----------------------------------------------------------------------------

    def collect_metrics(self) -> Iterator[Metric]:
        throttle = CounterMetricFamily(
            "purgatory_quota_throttle_time_seconds",
            "Throttle time given to clients over a byte-rate quota, by quota type (Produce, "
            "Fetch), user and client id as the quota shares them (Kafka's throttle-time, "
            "summed).",
            labels=["quota_type", "user", "client_id"],
        )
        throttles = CounterMetricFamily(
            "purgatory_quota_throttled_responses",
            "Responses throttled by a byte-rate quota (each one carries throttle_time_ms "
            "and mutes its connection for it), by quota type, user and client id.",
            labels=["quota_type", "user", "client_id"],
        )
        rate = GaugeMetricFamily(
            "purgatory_quota_byte_rate",
            "Bytes per second a quota is measured on (Kafka's byte-rate: quota.window.num "
            "windows of quota.window.size.seconds), by quota type, user and client id.",
            labels=["quota_type", "user", "client_id"],
        )
        percentage = GaugeMetricFamily(
            "purgatory_quota_request_percentage",
            "Request handling time a request_percentage quota is measured on, in percent "
            "of one thread (Kafka's request-time), by user and client id.",
            labels=["user", "client_id"],
        )
        now_ms = self.clock_ms()
        for manager in (self.produce, self.fetch, self.request):
            for (user, client_id), sensors in sorted(manager.sensors.items()):
                labels = [manager.quota_type, user, client_id]
                throttle.add_metric(labels, sensors.throttle_time_ms / 1000)
                throttles.add_metric(labels, sensors.throttles)
                measured = sensors.rate.measure(now_ms)
                if manager is self.request:
                    percentage.add_metric([user, client_id], measured)
                else:
                    rate.add_metric(labels, measured)
        yield throttle
        yield throttles
        yield rate
        yield percentage


class FetchQuota:
    """A fetch's quota, applied when it completes (Kafka's handleFetchRequest): its
    record bytes recorded; over the quota they are taken back and the response is the
    throttled one, empty."""

    __slots__ = ("client_id", "connection", "quotas", "user")

    def __init__(
        self, quotas: QuotaManagers, connection: BrokerConnection, user: str, client_id: str
    ) -> None:
        self.quotas = quotas
        self.connection = connection
        self.user = user
        self.client_id = client_id

    def throttle_ms(self, result: FetchResult) -> int:
        """Record the fetch's record bytes; its throttle time (0: none)."""
        size = sum(len(data.records) for _, data in result.partitions)
        manager = self.quotas.fetch
        now_ms = self.quotas.clock_ms()
        throttle_ms = manager.record_and_get_throttle_time_ms(
            self.user, self.client_id, size, now_ms
        )
        if throttle_ms > 0:
            manager.unrecord(self.user, self.client_id, size, now_ms)
            manager.throttled(self.user, self.client_id, throttle_ms)
            self.connection.throttle(throttle_ms)
        return throttle_ms

    def answer(self, to_response: Callable[[FetchResult], Any], result: FetchResult) -> Any:
        """``to_response`` of the fetch's result, or of none when it is throttled, with
        the throttle time."""
        throttle_ms = self.throttle_ms(result)
        if throttle_ms == 0:
            return to_response(result)
        body = to_response(FetchResult([], result.wait_ms))
        body.throttle_time_ms = throttle_ms
        return body
