"""TransactionManager: an idempotent producer's id, epoch and per-partition sequence numbers
(Kafka's client class of that name, without transactions).

The producer id and epoch come from InitProducerId. Each batch gets, when it is first sent,
the next sequence number of its partition, and keeps it (and the epoch) through every
retry, so the leader recognises a retry of a batch it already has (answering its original
offset) and refuses a gap (OUT_OF_ORDER_SEQUENCE_NUMBER). When a batch that had a sequence
fails, the broker may or may not have it, so the sequences that follow are unknown: the
producer then bumps its epoch (InitProducerId with its id and epoch, KIP-360) and every
partition starts again at sequence 0, as Kafka's producer does for unresolved sequences.
"""

from __future__ import annotations

import asyncio

from purgatory.clients.cluster import ClientCluster
from purgatory.clients.connection import ConnectionClosed
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError, is_retriable

TopicPartition = tuple[str, int]
_MAX_SEQUENCE = 2**31  # sequences wrap at Int.MaxValue, as in Kafka


class TransactionManager:
    def __init__(self, cluster: ClientCluster, retry_backoff_ms: int) -> None:
        self.cluster = cluster
        self.retry_backoff_ms = retry_backoff_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}  # the next sequence of a partition
        self._needs_bump = False
        self._lock = asyncio.Lock()

    async def ensure_producer_id(self, deadline: float) -> None:
        """Have a producer id, and a bumped epoch if a failed batch left sequences
        unresolved. Raises KafkaError if the broker refuses or ``deadline`` (loop time)
        passes."""
        if self.producer_id >= 0 and not self._needs_bump:
            return
        async with self._lock:
            loop = asyncio.get_running_loop()
            while self.producer_id < 0 or self._needs_bump:
                code = await self._init_producer_id()
                if code == ErrorCode.NONE:
                    break
                if not is_retriable(code) or loop.time() >= deadline:
                    raise KafkaError(code, "InitProducerId failed: no producer id to produce with")
                await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def _init_producer_id(self) -> int:
        request = m.InitProducerIdRequest(
            producer_id=self.producer_id if self._needs_bump else -1,
            producer_epoch=self.producer_epoch if self._needs_bump else -1,
        )
        try:
            conn = await self.cluster.any_connection()
            response: m.InitProducerIdResponse = await conn.send(ApiKey.INIT_PRODUCER_ID, request)
        except ConnectionClosed:
            return ErrorCode.NETWORK_EXCEPTION
        except KafkaError as exc:
            return exc.code
        if response.error_code == ErrorCode.NONE:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._sequences.clear()
            self._needs_bump = False
        return response.error_code

    def next_sequence(self, tp: TopicPartition, records: int) -> int:
        """The base sequence of ``tp``'s next batch of ``records`` records (taken now)."""
        sequence = self._sequences.get(tp, 0)
        self._sequences[tp] = (sequence + records) % _MAX_SEQUENCE
        return sequence

    def batch_failed(self, epoch: int) -> None:
        """A batch sent with ``epoch`` failed for good: its partition's sequences are no
        longer known, so the next batch waits for a bumped epoch (unless one came since)."""
        if epoch == self.producer_epoch:
            self._needs_bump = True
