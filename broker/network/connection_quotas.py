"""ConnectionQuotas: how many connections the broker, and each address, may have open
(Kafka's class of that name).

``max.connections`` bounds the broker: at the limit a new connection is closed at once
(Kafka's acceptor stops accepting instead, leaving it unanswered in the accept queue;
closed, a client knows at once and retries after its reconnect backoff). Brokers keep
their way in, as KIP-402 keeps the inter-broker listener's: connections on a listener
only brokers use (a controller listener, or the inter-broker listener beside client
listeners) are never refused for it, and brokers' own connections leave the count once
they prove the cluster secret (a cluster member's id, at most ``MAX_EXEMPT_PER_BROKER``
connections each, so a client cannot escape the limit by calling itself a broker).
``max.connections.per.ip`` (with per-address overrides) bounds one address: one
connection too many is closed at once. Refusals are counted by reason and logged once
per address or once a minute, not once per connection: a flood writes a few lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, Metric

K = TypeVar("K")

_FULL_LOG_EVERY_S = 60.0  # a broker at max.connections says so at most once a minute
# A broker opens a few connections to each other one (its replica fetcher, the controller's
# channel, forwarding, its lifecycle); more than this from one broker id count as clients.
MAX_EXEMPT_PER_BROKER = 8


class ConnectionQuotas:
    def __init__(
        self,
        log: Any,
        log_once: Callable[..., None],
        *,
        max_connections: int = 2147483647,
        max_connections_per_ip: int = 2147483647,
        per_ip_overrides: Mapping[str, int] | None = None,
        brokers: Collection[int] = (),
    ) -> None:
        self.log = log
        self.log_once = log_once  # the network layer's warn-once-per-(address, what)
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.total = 0  # connections admitted and not yet released
        self.per_ip: dict[str, int] = {}
        self.brokers = frozenset(brokers)  # the cluster's broker ids, this one included
        self.exempted: dict[int, int] = {}  # open exempt connections, by broker id
        # Connections closed at once, by reason: "per_ip", "max_connections".
        self.refused: dict[str, int] = {"per_ip": 0, "max_connections": 0}
        self._full_logged_at = -_FULL_LOG_EVERY_S
        self._full_since_log = 0

    def admit(self, ip: str, protected: bool = False) -> bool:
        """Count a new connection from ``ip``; False (and it is to be closed, uncounted)
        when the address has max.connections.per.ip (or its override) open already, or
        the broker max.connections (``protected``: a listener only brokers use, which the
        broker-wide limit does not close)."""
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        open_now = self.per_ip.get(ip, 0)
        if open_now >= limit:
            self.refused["per_ip"] += 1
            self.log_once(
                (ip, "connection_refused"),
                "connection_refused",
                ip=ip,
                open_connections=open_now,
                limit=limit,
                hint="max.connections.per.ip (or max.connections.per.ip.overrides); logged "
                "once per address, counted in purgatory_connections_refused_total",
            )
            return False
        if self.total >= self.max_connections and not protected:
            self._refuse_full()
            return False
        self.per_ip[ip] = open_now + 1
        self.total += 1
        return True

    def _refuse_full(self) -> None:
        self.refused["max_connections"] += 1
        self._full_since_log += 1
        now = time.monotonic()
        if now - self._full_logged_at >= _FULL_LOG_EVERY_S:
            self._full_logged_at = now
            self.log.warning(
                "max_connections_reached",
                open_connections=self.total,
                limit=self.max_connections,
                refused=self._full_since_log,
                hint="new connections are closed at once until one closes (max.connections; "
                'purgatory_connections_refused_total{reason="max_connections"}); give brokers '
                "a listener of their own (inter.broker.listener.name) to keep them out of "
                "it; logged at most once a minute",
            )
            self._full_since_log = 0

    def exempt(self, ip: str, broker_id: int) -> bool:
        """An admitted connection's first request named it broker ``broker_id``'s: it
        leaves the broker's count (Kafka exempts its inter-broker listener; one port
        serves both here) if that is a cluster member with fewer than
        ``MAX_EXEMPT_PER_BROKER`` exempt connections. True if it was exempted."""
        open_now = self.exempted.get(broker_id, 0)
        if broker_id not in self.brokers or open_now >= MAX_EXEMPT_PER_BROKER:
            self.log_once(
                (ip, "broker_connection_counted"),
                "broker_connection_counted",
                ip=ip,
                claimed_broker_id=broker_id,
                hint=f"a client id of a broker that is not a cluster member, or of one with "
                f"{MAX_EXEMPT_PER_BROKER} exempt connections open: counted in max.connections",
            )
            return False
        self.exempted[broker_id] = open_now + 1
        self.total -= 1
        return True

    def release(self, ip: str, *, exempt_broker: int | None = None) -> None:
        """An admitted connection from ``ip`` closed (``exempt_broker``: the broker id it
        was exempted as, if it was)."""
        if exempt_broker is None:
            self.total -= 1
        else:
            _decrement(self.exempted, exempt_broker)
        _decrement(self.per_ip, ip)

    def collect_metrics(self) -> Iterator[Metric]:
        refused = CounterMetricFamily(
            "purgatory_connections_refused",
            "Connections closed at once: their address had max.connections.per.ip (or its "
            "override) open (reason per_ip), or the broker max.connections (reason "
            "max_connections).",
            labels=["reason"],
        )
        for reason, count in self.refused.items():
            refused.add_metric([reason], count)
        yield refused


def _decrement(counts: dict[K, int], key: K) -> None:
    """One fewer for ``key``; a count that reaches 0 leaves ``counts``."""
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
