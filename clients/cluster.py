"""ClientCluster: a client's view of the cluster (brokers, partition leaders) and its
connections, refreshed from Metadata when a broker says the view is stale."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from purgatory.clients.connection import DEFAULT_REQUEST_TIMEOUT_MS, Connection, ConnectionClosed
from purgatory.clients.security import PLAINTEXT, REFUSED_CLIENT, ClientSecurity
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]


class UnknownTopicError(KafkaError):
    """The brokers say the topic does not exist (and will not create it on use)."""

    def __init__(self, topic: str, auto_create_asked: bool) -> None:
        self.topic = topic
        super().__init__(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} does not exist"
            + (
                " and the brokers do not create topics on use (auto.create.topics.enable=false)"
                if auto_create_asked
                else ""
            ),
        )


def by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, []).append(partition)
    return out


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


def _note(
    errors: dict[TopicPartition, KafkaError] | None, tp: TopicPartition, error: KafkaError
) -> None:
    """A partition's error: raised, unless the caller collects retriable ones in ``errors``."""
    if errors is None or not error.retriable:
        raise error
    errors[tp] = error


class ClientCluster:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        client_id: str = "purgatory-client",
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security  # TLS and SASL of every connection (clients/security.py)
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, m.MetadataTopic] = {}
        self.controller_id = -1
        self._connections: dict[int, Connection] = {}
        self._bootstrap_conn: Connection | None = None
        self._refresh_lock = asyncio.Lock()

    async def open_connection(self, host: str, port: int) -> Connection:
        """A new connection of this client (over TLS and authenticated as ``security``
        says); raises ConnectionClosed, or AuthenticationError when the broker refuses it."""
        return await self.security.connect(
            host, port, client_id=self.client_id, request_timeout_ms=self.request_timeout_ms
        )

    async def any_connection(self, exclude: frozenset[tuple[str, int]] = frozenset()) -> Connection:
        """A connection to some broker not in ``exclude``: a known one, else a bootstrap
        server."""
        for conn in self._connections.values():
            if not conn.closed and (conn.host, conn.port) not in exclude:
                return conn
        boot = self._bootstrap_conn
        if boot is not None and not boot.closed and (boot.host, boot.port) not in exclude:
            return boot
        errors = []
        candidates = [
            c for c in dict.fromkeys([*self.brokers.values(), *self.bootstrap]) if c not in exclude
        ]
        random.shuffle(candidates)
        for host, port in candidates:
            try:
                self._bootstrap_conn = await self.open_connection(host, port)
                return self._bootstrap_conn
            except ConnectionClosed as exc:
                errors.append(str(exc))
        raise ConnectionClosed("no broker reachable: " + "; ".join(errors))

    def _drop_closed(self) -> None:
        if self._bootstrap_conn is not None and self._bootstrap_conn.closed:
            self._bootstrap_conn = None
        for node, conn in list(self._connections.items()):
            if conn.closed:
                del self._connections[node]

    async def connection(self, node_id: int) -> Connection:
        conn = self._connections.get(node_id)
        if conn is None or conn.closed:
            if node_id not in self.brokers:
                await self.refresh()
            if node_id not in self.brokers:
                raise KafkaError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in metadata"
                )
            host, port = self.brokers[node_id]
            conn = await self.open_connection(host, port)
            self._connections[node_id] = conn
        return conn

    async def refresh(
        self, topics: list[str] | None = None, *, auto_create: bool = False
    ) -> m.MetadataResponse:
        """Fetch metadata for ``topics`` (None: all) and update the view."""
        async with self._refresh_lock:
            # A broker that fails the request (down, or hung: it may still accept
            # connections) is not asked again in this refresh; every other one may be.
            failed: set[tuple[str, int]] = set()
            last: Exception | None = None
            response: m.MetadataResponse | None = None
            for _ in range(len(set(self.brokers.values()) | set(self.bootstrap)) + 1):
                try:
                    conn = await self.any_connection(exclude=frozenset(failed))
                except ConnectionClosed as exc:
                    last = last or exc  # what the broker asked did, if one was asked
                    break
                try:
                    response = await conn.send(
                        ApiKey.METADATA, m.MetadataRequest(topics, auto_create)
                    )
                    break
                except (ConnectionClosed, KafkaError) as exc:
                    if isinstance(exc, KafkaError) and exc.code in REFUSED_CLIENT:
                        raise  # each broker's listener refuses it alike: said at once
                    last = exc
                    failed.add((conn.host, conn.port))
                    await conn.close()
                    self._drop_closed()
            if response is None:
                raise ConnectionClosed(f"metadata request failed: {last}")
            self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
            self.controller_id = response.controller_id
            for topic in response.topics:
                if topic.error_code == ErrorCode.NONE:
                    self.topics[topic.name] = topic
                else:
                    self.topics.pop(topic.name, None)
            return response

    def partitions_for(self, topic: str) -> list[m.MetadataPartition] | None:
        t = self.topics.get(topic)
        return t.partitions if t is not None else None

    def leader_epoch_for(self, topic: str, partition: int) -> int:
        """The leader epoch the metadata names, or -1 when unknown (then not checked)."""
        parts = self.partitions_for(topic)
        if parts is None or not 0 <= partition < len(parts):
            return -1
        return parts[partition].leader_epoch

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's id, or -1 when unknown."""
        parts = self.partitions_for(topic)
        if parts is None or not 0 <= partition < len(parts):
            return -1
        return parts[partition].leader_id

    async def ensure_topics(
        self,
        topics: list[str],
        *,
        auto_create: bool,
        timeout_ms: int = 30000,
        unknown_timeout_ms: int = 1000,
    ) -> None:
        """Refresh until every topic exists. Partitions without a leader are fine: callers
        use the partitions that have one and retry the others.

        A topic being created (LEADER_NOT_AVAILABLE at topic level) is waited for up to
        ``timeout_ms``; one the brokers say does not exist (UNKNOWN_TOPIC_OR_PARTITION:
        auto-creation is off or not asked for) only ``unknown_timeout_ms``, long enough
        for a topic just created elsewhere to reach this broker. Then KafkaError."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        delay = 0.01
        while True:
            response = await self.refresh(topics, auto_create=auto_create)
            bad = [t for t in response.topics if t.error_code != ErrorCode.NONE]
            if not bad:
                return
            elapsed_ms = (loop.time() + delay - start) * 1000
            for t in bad:
                if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    if elapsed_ms > unknown_timeout_ms:
                        raise UnknownTopicError(t.name, auto_create)
                elif t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                    raise KafkaError(t.error_code, f"topic {t.name!r}")
                elif elapsed_ms > timeout_ms:
                    raise KafkaError(
                        t.error_code,
                        f"topic {t.name!r} was still being created after {timeout_ms} ms",
                    )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def by_leader(
        self, tps: list[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition]]:
        """Group partitions by their leader (refreshing metadata once for unknown ones);
        also returns the partitions that have no leader now."""
        if any(self.leader_for(*tp) < 0 for tp in tps):
            missing = sorted({t for t, p in tps if self.leader_for(t, p) < 0})
            with contextlib.suppress(ConnectionClosed, KafkaError):
                await self.refresh(missing)
        groups: dict[int, list[TopicPartition]] = {}
        leaderless: list[TopicPartition] = []
        for tp in tps:
            leader = self.leader_for(*tp)
            if leader < 0:
                leaderless.append(tp)
            else:
                groups.setdefault(leader, []).append(tp)
        return groups, leaderless

    async def per_leader(
        self,
        tps: list[TopicPartition],
        errors: dict[TopicPartition, KafkaError] | None,
        ask: Callable[[Connection, list[TopicPartition]], Awaitable[None]],
    ) -> None:
        """Run ``ask`` at each partition's leader. Without ``errors`` the first problem
        raises; with it, each partition that is unavailable now (no leader, leader
        unreachable, a retriable error) is recorded there and the others are still asked.
        Errors that retrying cannot cure always raise."""
        groups, leaderless = await self.by_leader(tps)
        for tp in leaderless:
            error = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} has no leader now")
            if errors is None:
                raise error
            errors[tp] = error
        for leader, group in groups.items():
            try:
                await ask(await self.connection(leader), group)
            except (ConnectionClosed, KafkaError) as exc:
                if errors is None or (isinstance(exc, KafkaError) and not exc.retriable):
                    raise
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else KafkaError(ErrorCode.NETWORK_EXCEPTION, f"broker {leader}: {exc}")
                )
                for tp in group:
                    errors.setdefault(tp, error)

    async def list_offsets(
        self,
        tps: list[TopicPartition],
        timestamp: int,
        errors: dict[TopicPartition, KafkaError] | None = None,
        read_committed: bool = False,
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each leader: -1 latest (the high watermark; ``read_committed``: the
        last stable offset), -2 earliest, else the first offset at or after ``timestamp``.
        See ``per_leader`` for ``errors``."""
        out: dict[TopicPartition, int] = {}

        async def ask(conn: Connection, group: list[TopicPartition]) -> None:
            request = m.ListOffsetsRequest(
                -1,
                [
                    m.ListOffsetsTopic(t, [m.ListOffsetsPartition(p, timestamp) for p in ps])
                    for t, ps in by_topic(group).items()
                ],
                1 if read_committed else 0,
            )
            response: m.ListOffsetsResponse = await conn.send(ApiKey.LIST_OFFSETS, request)
            for topic in response.topics:
                for part in topic.partitions:
                    tp = (topic.name, part.partition_index)
                    if part.error_code:
                        _note(
                            errors,
                            tp,
                            KafkaError(part.error_code, f"ListOffsets for {tp[0]}-{tp[1]}"),
                        )
                    else:
                        out[tp] = part.offset

        await self.per_leader(tps, errors, ask)
        return out

    async def send_to_controller(
        self, key: ApiKey, body: Any, timeout_ms: int | None = None
    ) -> Any:
        if self.controller_id < 0:
            await self.refresh([])
        try:
            conn = await self.connection(self.controller_id)
        except (ConnectionClosed, KafkaError):
            conn = await self.any_connection()
        return await conn.send(key, body, timeout_ms=timeout_ms)

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            await self._bootstrap_conn.close()
            self._bootstrap_conn = None
