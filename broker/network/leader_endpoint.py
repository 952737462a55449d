"""RemoteLeaderEndPoint: a follower's connection to one leader, in domain terms.

The replica fetcher asks with ``FetchParams`` and gets a ``FetchResult``; this module
alone builds the Fetch request (v1, so the leader's ``wait_time_ms`` comes back) and the
OffsetForLeaderEpoch request of a follower that may have to truncate, sends them and reads
the answers (Kafka's RemoteLeaderEndPoint)."""

from __future__ import annotations

from collections.abc import Callable

from purgatory.broker.log.leader_epoch_cache import EpochEndOffset
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    TopicPartition,
)
from purgatory.broker.replication.replica_fetcher import EpochAsk
from purgatory.clients.connection import Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey

FETCH_VERSION = 1


class RemoteLeaderEndPoint:
    def __init__(
        self,
        replica_id: int,
        address: tuple[str, int],
        client_id: str,
        connect_timeout_s: float,
        receive_delay: Callable[[], float] | None = None,
    ) -> None:
        self.replica_id = replica_id
        self.address = address
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.receive_delay = receive_delay
        self._conn: Connection | None = None

    async def fetch(self, params: FetchParams) -> FetchResult:
        """One Fetch round trip; raises ConnectionClosed or KafkaError when it fails (the
        caller then closes this endpoint; the next fetch opens a new connection)."""
        conn = await self._connection()
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for (topic, index), info in params.partitions:
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(
                    index, info.fetch_offset, info.max_bytes, info.current_leader_epoch
                )
            )
        topics = []  # loops, not comprehensions: each of those is a call on every round
        for topic, parts in by_topic.items():
            topics.append(m.FetchTopic(topic, parts))
        request = m.FetchRequest(
            params.replica_id, params.max_wait_ms, params.min_bytes, params.max_bytes, topics
        )
        response: m.FetchResponseV1 = await conn.send(
            ApiKey.FETCH,
            request,
            version=FETCH_VERSION,
            timeout_ms=params.max_wait_ms + conn.request_timeout_ms,
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
        conn = await self._connection()
        by_topic: dict[str, list[m.OffsetForLeaderPartition]] = {}
        for (topic, index), current_epoch, epoch in asks:
            by_topic.setdefault(topic, []).append(
                m.OffsetForLeaderPartition(index, current_epoch, epoch)
            )
        request = m.OffsetForLeaderEpochRequest(
            self.replica_id, [m.OffsetForLeaderTopic(t, parts) for t, parts in by_topic.items()]
        )
        response: m.OffsetForLeaderEpochResponse = await conn.send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, request
        )
        return {
            (topic.topic, p.partition): (p.error_code, EpochEndOffset(p.leader_epoch, p.end_offset))
            for topic in response.topics
            for p in topic.partitions
        }

    async def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            host, port = self.address
            self._conn = await Connection.open(
                host,
                port,
                client_id=self.client_id,
                receive_delay=self.receive_delay,
                connect_timeout_s=self.connect_timeout_s,
            )
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
