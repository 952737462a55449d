"""ClientCluster: a client's view of the cluster (brokers, partition leaders) and its
connections, refreshed from Metadata when a broker says the view is stale."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from typing import Any

from clients.connection import DEFAULT_REQUEST_TIMEOUT_MS, Connection, ConnectionClosed
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]


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


class ClientCluster:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        client_id: str = "purgatory-client",
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, m.MetadataTopic] = {}
        self.controller_id = -1
        self._connections: dict[int, Connection] = {}
        self._bootstrap_conn: Connection | None = None
        self._refresh_lock = asyncio.Lock()

    async def _open(self, host: str, port: int) -> Connection:
        return await Connection.open(
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
                self._bootstrap_conn = await self._open(host, port)
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
            conn = await self._open(host, port)
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
                    last = exc
                    break
                try:
                    response = await conn.send(
                        ApiKey.METADATA, m.MetadataRequest(topics, auto_create)
                    )
                    break
                except (ConnectionClosed, KafkaError) as exc:
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

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's id, or -1 when unknown."""
        parts = self.partitions_for(topic)
        if parts is None or not 0 <= partition < len(parts):
            return -1
        return parts[partition].leader_id

    async def ensure_topics(
        self, topics: list[str], *, auto_create: bool, timeout_ms: int = 30000
    ) -> None:
        """Refresh until every topic has leaders, or raise UNKNOWN_TOPIC_OR_PARTITION."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        delay = 0.01
        while True:
            response = await self.refresh(topics, auto_create=auto_create)
            bad = [
                t
                for t in response.topics
                if t.error_code != 0 or any(p.leader_id < 0 for p in t.partitions)
            ]
            if not bad:
                return
            fatal = [
                t
                for t in bad
                if t.error_code
                not in (0, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            ]
            if fatal or loop.time() + delay > deadline:
                t = (fatal or bad)[0]
                raise KafkaError(
                    t.error_code or ErrorCode.LEADER_NOT_AVAILABLE,
                    f"topic {t.name!r} is not available",
                )
            if not auto_create and all(
                t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for t in bad
            ):
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {bad[0].name!r} does not exist"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def by_leader(self, tps: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Group partitions by their leader (refreshing metadata for unknown ones)."""
        missing = [tp for tp in tps if self.leader_for(*tp) < 0]
        if missing:
            await self.refresh(sorted({t for t, _ in missing}))
        groups: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            leader = self.leader_for(*tp)
            if leader < 0:
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} has no leader now"
                )
            groups.setdefault(leader, []).append(tp)
        return groups

    async def list_offsets(
        self, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each leader: -1 latest (the high watermark), -2 earliest, else the
        first offset at or after ``timestamp``."""
        out: dict[TopicPartition, int] = {}
        for leader, group in (await self.by_leader(tps)).items():
            conn = await self.connection(leader)
            request = m.ListOffsetsRequest(
                -1,
                [
                    m.ListOffsetsTopic(t, [m.ListOffsetsPartition(p, timestamp) for p in ps])
                    for t, ps in by_topic(group).items()
                ],
            )
            response: m.ListOffsetsResponse = await conn.send(ApiKey.LIST_OFFSETS, request)
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError(
                            part.error_code, f"ListOffsets for {topic.name}-{part.partition_index}"
                        )
                    out[(topic.name, part.partition_index)] = part.offset
        return out

    async def committed(
        self, group: str, tps: list[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """OffsetFetch at each leader: (offset, metadata) of ``group`` where it committed."""
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        for leader, group_tps in (await self.by_leader(tps)).items():
            conn = await self.connection(leader)
            request = m.OffsetFetchRequest(
                group, [m.OffsetFetchTopic(t, ps) for t, ps in by_topic(group_tps).items()]
            )
            response: m.OffsetFetchResponse = await conn.send(ApiKey.OFFSET_FETCH, request)
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError(
                            part.error_code, f"group {group!r}, {topic.name}-{part.partition_index}"
                        )
                    if part.committed_offset >= 0:
                        out[(topic.name, part.partition_index)] = (
                            part.committed_offset,
                            part.metadata,
                        )
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
