"""RemoteLeaderEndPoint: a follower's connection to one leader, in domain terms.

The replica fetcher asks with ``FetchParams`` and gets a ``FetchResult``; this module
alone builds the Fetch request (v2: the leader's ``wait_time_ms`` comes back, and the
leader learns the follower's broker epoch) and the
OffsetForLeaderEpoch request of a follower that may have to truncate, sends them and reads
the answers (Kafka's RemoteLeaderEndPoint)."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any, Protocol

from purgatory.broker.log.leader_epoch_cache import EpochEndOffset
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    TopicPartition,
)
from purgatory.broker.replication.replica_fetcher import EpochAsk
from purgatory.clients.cluster_auth import authenticate
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.clients.security import ClientSecurity
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey

FETCH_VERSION = 2  # v1 with the follower's broker epoch (KIP-903)


class LeaderTransport(Protocol):
    """Where a follower's requests to one leader go: a connection (``LeaderConnection``),
    or the simulation's network."""

    async def send(self, key: ApiKey, request: Any, version: int, timeout_ms: int) -> Any: ...

    async def close(self) -> None: ...


class LeaderConnection:
    """One connection to the leader, opened when needed (again after a failure)."""

    def __init__(
        self,
        address: tuple[str, int],
        client_id: str,
        connect_timeout_s: float,
        receive_delay: Callable[[], float] | None = None,
        refused: Callable[[], bool] = lambda: False,
        cluster_secret: str = "",
        broker_id: int = -1,
        ssl_context: ssl.SSLContext | None = None,
        sasl: ClientSecurity | None = None,
    ) -> None:
        self.address = address
        self.sasl = sasl  # the brokers' SASL login on the leader's listener, if they log in
        self.ssl_context = ssl_context  # the inter-broker listener is SSL or SASL_SSL
        self.client_id = client_id
        self.cluster_secret = cluster_secret  # proven on each new connection
        self.broker_id = broker_id
        self.connect_timeout_s = connect_timeout_s
        self.receive_delay = receive_delay
        self.refused = refused  # a partition fault cuts this broker off from the leader
        self._conn: Connection | None = None

    async def send(self, key: ApiKey, request: Any, version: int, timeout_ms: int) -> Any:
        conn = await self._connection()
        return await conn.send(key, request, version=version, timeout_ms=timeout_ms)

    async def _connection(self) -> Connection:
        if self.refused():
            raise ConnectionClosed(f"leader at {self.address} is cut off by a partition fault")
        if self._conn is None or self._conn.closed:
            host, port = self.address
            conn = await Connection.open(
                host,
                port,
                client_id=self.client_id,
                receive_delay=self.receive_delay,
                connect_timeout_s=self.connect_timeout_s,
                ssl_context=self.ssl_context,
            )
            try:
                if self.sasl is not None:
                    await self.sasl.authenticate(conn)
                else:
                    await authenticate(
                        conn,
                        self.cluster_secret,
                        self.broker_id,
                        int(self.connect_timeout_s * 1000),
                    )
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()


class RemoteLeaderEndPoint:
    def __init__(
        self, replica_id: int, transport: LeaderTransport, request_timeout_ms: int = 30000
    ) -> None:
        self.replica_id = replica_id
        self.transport = transport
        self.request_timeout_ms = request_timeout_ms

    async def fetch(self, params: FetchParams) -> FetchResult:
        """One Fetch round trip; raises ConnectionClosed or KafkaError when it fails (the
        caller then closes this endpoint; the next fetch opens a new connection)."""
        by_topic: dict[str, list[m.FetchPartitionV2]] = {}
        for (topic, index), info in params.partitions:
            by_topic.setdefault(topic, []).append(
                m.FetchPartitionV2(
                    index,
                    info.fetch_offset,
                    info.max_bytes,
                    info.current_leader_epoch,
                    log_start_offset=info.log_start_offset,
                )
            )
        topics = []  # loops, not comprehensions: each of those is a call on every round
        for topic, parts in by_topic.items():
            topics.append(m.FetchTopicV2(topic, parts))
        request = m.FetchRequestV2(
            params.replica_id,
            params.max_wait_ms,
            params.min_bytes,
            params.max_bytes,
            topics,
            None,
            params.replica_epoch,
        )
        response: m.FetchResponseV2 = await self.transport.send(
            ApiKey.FETCH, request, FETCH_VERSION, params.max_wait_ms + self.request_timeout_ms
        )
        answered = []
        for answer in response.responses:
            for p in answer.partitions:
                data = FetchPartitionData(
                    p.error_code, p.high_watermark, p.log_start_offset, p.records
                )
                answered.append(((answer.topic, p.partition_index), data))
        return FetchResult(answered, response.wait_time_ms)

    async def offsets_for_leader_epoch(
        self, asks: list[EpochAsk]
    ) -> dict[TopicPartition, tuple[int, EpochEndOffset]]:
        """One OffsetForLeaderEpoch round trip: per partition, the error and where the
        asked epoch ends on the leader."""
        by_topic: dict[str, list[m.OffsetForLeaderPartition]] = {}
        for (topic, index), current_epoch, epoch in asks:
            by_topic.setdefault(topic, []).append(
                m.OffsetForLeaderPartition(index, current_epoch, epoch)
            )
        request = m.OffsetForLeaderEpochRequest(
            self.replica_id, [m.OffsetForLeaderTopic(t, parts) for t, parts in by_topic.items()]
        )
        response: m.OffsetForLeaderEpochResponse = await self.transport.send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, request, 0, self.request_timeout_ms
        )
        return {
            (topic.topic, p.partition): (p.error_code, EpochEndOffset(p.leader_epoch, p.end_offset))
            for topic in response.topics
            for p in topic.partitions
        }

    async def close(self) -> None:
        await self.transport.close()
