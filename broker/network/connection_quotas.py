"""ConnectionQuotas: how many connections the broker, and each address, may have open
(Kafka's class of that name).

``max.connections`` bounds the broker: at the limit the acceptor stops accepting until a
connection closes, so new ones wait in the kernel's accept queue (Kafka's acceptor
blocks the same way); brokers' own connections leave the count once their first request
names them (a cluster member's id, at most ``MAX_EXEMPT_PER_BROKER`` connections each, so
a client cannot escape the limit by calling itself a broker). ``max.connections.per.ip``
(with per-address overrides) bounds one
address: one connection too many is closed at once. Both are counted and logged, once
per episode or address, not once per connection: a flood writes a few lines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, Metric

K = TypeVar("K")

_BLOCKED_LOG_EVERY_S = 60.0  # a broker held at max.connections says so at most once a minute
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
        self.refused = 0  # closed at once: their address was at its limit
        self.blocked = 0  # times the acceptor stopped at max.connections
        self.blocked_s = 0.0  # time it spent stopped
        self._freed: asyncio.Future[None] | None = None
        self._blocked_start = 0.0  # when the acceptor stopped; 0 while it runs
        self._blocked_logged_at = -_BLOCKED_LOG_EVERY_S
        self._blocked_since_log = 0

    async def wait_for_slot(self) -> None:
        """Return when the broker is under max.connections (at once, usually)."""
        if self.total < self.max_connections:
            return
        start = self._blocked_start = time.monotonic()
        self.blocked += 1
        self._blocked_since_log += 1
        if start - self._blocked_logged_at >= _BLOCKED_LOG_EVERY_S:
            self._blocked_logged_at = start
            self.log.warning(
                "max_connections_reached",
                open_connections=self.total,
                limit=self.max_connections,
                times_blocked=self._blocked_since_log,
                hint="new connections wait in the accept queue until one closes "
                "(max.connections; purgatory_acceptor_blocked_seconds_total); logged at "
                "most once a minute",
            )
            self._blocked_since_log = 0
        loop = asyncio.get_running_loop()
        while self.total >= self.max_connections:
            self._freed = loop.create_future()
            await self._freed
        self.blocked_s += time.monotonic() - start
        self._blocked_start = 0.0

    def admit(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (and it is to be closed, uncounted)
        when the address has max.connections.per.ip (or its override) open already."""
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        open_now = self.per_ip.get(ip, 0)
        if open_now >= limit:
            self.refused += 1
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
        self.per_ip[ip] = open_now + 1
        self.total += 1
        return True

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
        self._wake()
        return True

    def release(self, ip: str, *, exempt_broker: int | None = None) -> None:
        """An admitted connection from ``ip`` closed (``exempt_broker``: the broker id it
        was exempted as, if it was)."""
        if exempt_broker is None:
            self.total -= 1
        else:
            _decrement(self.exempted, exempt_broker)
        _decrement(self.per_ip, ip)
        self._wake()

    def _wake(self) -> None:
        freed = self._freed
        if freed is not None and not freed.done():
            freed.set_result(None)

    def collect_metrics(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "purgatory_connections_refused",
            "Connections closed at once because their address had max.connections.per.ip "
            "(or its override) open.",
            value=self.refused,
        )
        # The episode in progress counts too (a broker held at the limit shows it now).
        waiting = time.monotonic() - self._blocked_start if self._blocked_start else 0.0
        yield CounterMetricFamily(
            "purgatory_acceptor_blocked_seconds",
            "Time the acceptor spent stopped at max.connections (Kafka's "
            "AcceptorBlockedPercent, as a counter: rate() gives the fraction).",
            value=self.blocked_s + waiting,
        )


def _decrement(counts: dict[K, int], key: K) -> None:
    """One fewer for ``key``; a count that reaches 0 leaves ``counts``."""
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
