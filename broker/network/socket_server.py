"""SocketServer: the broker's TCP front end on asyncio Protocols.

Each named listener (broker/config/listeners.py) is an Acceptor on its own port, serving
both protocols; each accepted connection is a ``BrokerConnection`` that knows its listener
(broker_connection.py: protocol choice, what the listener serves, ordering,
back-pressure). The acceptors share one ConnectionQuotas; ``connections.max.idle.ms`` closes
connections without requests. The server holds what connections share: the protocols,
limits, faults, metrics and the log.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ssl
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from purgatory.broker.config.listeners import Listener, ListenerRole
from purgatory.broker.network.acceptor import Acceptor, ListenError
from purgatory.broker.network.broker_connection import BrokerConnection
from purgatory.broker.network.connection_quotas import ConnectionQuotas
from purgatory.broker.network.served_protocol import LazyProtocol, ServedProtocol
from purgatory.broker.ops.faults import FaultInjector
from purgatory.broker.security.kafka_principal import ANONYMOUS
from purgatory.broker.security.listener_security import ListenerSecurity
from purgatory.common.broker_state import ClientSoftware

if TYPE_CHECKING:
    from purgatory.broker.ops.metrics import BrokerMetrics


class SocketServer:
    def __init__(
        self,
        msgpack: ServedProtocol,
        kafka: LazyProtocol | None,
        metrics: BrokerMetrics,
        *,
        max_request_bytes: int,
        max_queued_requests: int,
        broker_id: int,
        faults: FaultInjector,
        max_connections: int = 2147483647,
        max_connections_per_ip: int = 2147483647,
        per_ip_overrides: Mapping[str, int] | None = None,
        brokers: Collection[int] = (),
        max_idle_ms: int = 600000,
        listen_backlog: int = 1024,
        cluster_secret: str = "",
        abandon: Callable[[asyncio.Future[Any]], None] = lambda _answer: None,
        security: Mapping[str, ListenerSecurity] | None = None,
    ) -> None:
        self.msgpack = msgpack
        # Each listener's TLS and SASL, by name (none: PLAINTEXT).
        self.security = dict(security or {})
        # Told of each answer a closing connection no longer awaits: the operation parked
        # for it completes (ReplicaManager.abandon).
        self.abandon = abandon
        # What a broker proves it holds before inter-broker APIs are served to it.
        self.cluster_secret = cluster_secret
        self.kafka = kafka
        # Open Kafka connections by client software (name, version), from ApiVersions.
        self.clients: dict[tuple[str, str], int] = {}
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.max_queued_requests = max_queued_requests
        self.connections: set[BrokerConnection] = set()
        self.log = structlog.get_logger("network").bind(broker_id=broker_id)
        self._logged: set[tuple[str, str]] = set()  # (address, what) warned of once
        self.quotas = ConnectionQuotas(
            self.log,
            self.log_once,
            max_connections=max_connections,
            max_connections_per_ip=max_connections_per_ip,
            per_ip_overrides=per_ip_overrides,
            brokers={broker_id, *brokers},
        )
        self.listen_backlog = listen_backlog
        self.acceptors: dict[str, Acceptor] = {}  # by listener name
        self.max_idle_s = max_idle_ms / 1000
        self.idle_closed = 0
        self._idle_check: asyncio.TimerHandle | None = None
        self.faults = faults
        faults.listeners.append(self._faults_changed)
        # Who sent the request being handled (a handler reads them before it returns:
        # group members are described by client id and host).
        self.current_client: str | None = None
        self.current_peer = "?"
        self.current_listener = ""  # the name of the listener the request came in on
        self.current_principal = ANONYMOUS  # whom the connection authenticated as
        self.current_broker: int | None = None  # its broker id, if it proved the secret
        self.current_connection: Any = None  # its BrokerConnection (a quota mutes it)
        self.current_request_bytes = 0  # the request's size (a produce quota counts it)
        # The broker's QuotaManagers while a request_percentage quota is set, else None.
        self.request_quotas: Any = None
        # Authentications by (listener, mechanism, result, re-authentication): SASL
        # exchanges, and TLS handshakes as mechanism "SSL".
        self.authentications: collections.Counter[tuple[str, str, str, bool]] = (
            collections.Counter()
        )

    def count_authentication(
        self, listener: str, mechanism: str, result: str, reauthentication: bool
    ) -> None:
        self.authentications[(listener, mechanism, result, reauthentication)] += 1

    def _count_tls(self, listener: str, result: str) -> None:
        self.count_authentication(listener, "SSL", result, False)

    def describe_clients(self) -> list[ClientSoftware]:
        """Open Kafka connections by client software, as ``/v1/state`` shows them."""
        return [
            ClientSoftware(
                client_software_name=name, client_software_version=version, connections=n
            )
            for (name, version), n in sorted(self.clients.items())
            if n
        ]

    # -- connection limits -------------------------------------------------------------------

    def _close_idle(self) -> None:
        """Close connections that received nothing and had nothing in flight for
        connections.max.idle.ms; runs every quarter of it (so one is closed at most 1.25 x
        the limit after)."""
        now = time.monotonic()
        for conn in list(self.connections):
            if conn.active or conn.pending or len(conn.in_flight):
                conn.active = False
                conn.idle_since = now
            elif now - conn.idle_since >= self.max_idle_s and not conn.closing:
                self.idle_closed += 1
                self.log.info("connection_idle_closed", peer=conn.peer, client_id=conn.client_id)
                conn._close()
        self._schedule_idle_check()

    def _schedule_idle_check(self) -> None:
        loop = asyncio.get_running_loop()
        self._idle_check = loop.call_later(self.max_idle_s / 4, self._close_idle)

    def collect_metrics(self) -> Iterator[Metric]:
        yield from self.quotas.collect_metrics()
        yield CounterMetricFamily(
            "purgatory_connections_idle_closed",
            "Connections closed after connections.max.idle.ms without a request.",
            value=self.idle_closed,
        )
        family = GaugeMetricFamily(
            "purgatory_client_connections",
            "Open Kafka-protocol connections by client software name and version (KIP-511, "
            "from ApiVersions v3+).",
            labels=["client_software_name", "client_software_version"],
        )
        for (name, version), n in sorted(self.clients.items()):
            if n:
                family.add_metric([name, version], n)
        yield family
        authentications = CounterMetricFamily(
            "purgatory_authentications",
            "Authentications on SSL and SASL listeners by listener, mechanism (the SASL "
            "mechanism, or SSL for a TLS handshake), result (success, failure) and whether "
            "they re-authenticated a session (KIP-368): Kafka's "
            "successful-authentication-total and its siblings.",
            labels=["listener", "mechanism", "result", "reauthentication"],
        )
        for (listener, mechanism, result, reauth), n in sorted(self.authentications.items()):
            authentications.add_metric([listener, mechanism, result, str(reauth).lower()], n)
        if self.authentications:  # none on PLAINTEXT listeners: no family either
            yield authentications

    def _faults_changed(self) -> None:
        for conn in list(self.connections):
            conn.fault_check()

    async def start(self, listeners: Iterable[Listener]) -> dict[str, int]:
        """Bind and accept on each listener; the port each is bound to, by name. A
        listener that cannot bind raises ListenError (and none stays bound)."""
        ports: dict[str, int] = {}
        listeners = list(listeners)
        # Beside client listeners the inter-broker listener is the brokers' (KIP-402).
        client_listeners = any(x.role is ListenerRole.CLIENT for x in listeners)
        try:
            for listener in listeners:
                acceptor = Acceptor(
                    self.quotas,
                    functools.partial(BrokerConnection, self, listener),
                    self.listen_backlog,
                    protected=not listener.serves_clients
                    or (listener.role is ListenerRole.INTER_BROKER and client_listeners),
                    ssl_context=self._ssl_context(listener.name),
                    tls_outcome=functools.partial(self._count_tls, listener.name),
                )
                self.acceptors[listener.name] = acceptor
                try:
                    ports[listener.name] = await acceptor.start(listener.host, listener.port)
                except OSError as exc:
                    what = f"{listener.name} listener"
                    raise ListenError(what, listener.host, listener.port, exc) from exc
        except BaseException:
            await self.stop()
            raise
        self._schedule_idle_check()
        return ports

    def _ssl_context(self, listener: str) -> ssl.SSLContext | None:
        security = self.security.get(listener)
        return None if security is None else security.ssl_context

    async def stop(self) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
        for acceptor in self.acceptors.values():
            await acceptor.stop()
        for conn in list(self.connections):
            conn._close()

    def log_bad_input(self, peer: str, reason: str, message: str, **extra: Any) -> None:
        """Log a bad-input case once per (peer host, reason); the metric counts every one."""
        self.log_once(
            (peer.rsplit(":", 1)[0], reason),
            "bad_request",
            peer=peer,
            reason=reason,
            detail=message,
            **extra,
        )

    def log_once(self, key: tuple[str, str], event: str, **fields: Any) -> None:
        """A warning, once per ``key`` (a flood from one address logs one line; the set
        is bounded: cleared past 10000 keys)."""
        if key in self._logged:
            return
        if len(self._logged) > 10000:
            self._logged.clear()
        self._logged.add(key)
        self.log.warning(event, **fields)
