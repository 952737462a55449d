"""The consumer's fetchers: one long-polling task per broker it fetches from.

As Kafka's classic ConsumerFetcherThread: each fetcher asks its broker for the assigned
partitions that broker leads, advances the fetch position when it processes a response,
then puts each partition's records in the bounded chunk queue (blocking while it is full,
which is what throttles fetching). Each fetcher has its own connection, so a parked long
poll never holds up commits or offset look-ups behind it (answers come in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import msgspec

from purgatory.clients.cluster import ClientCluster
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.clients.subscription_state import SubscriptionState, TopicPartition
from purgatory.common.histogram import FetchLatency
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import METADATA_STALE, ErrorCode, KafkaError
from purgatory.protocol.records import (
    CorruptRecordError,
    Header,
    batch_end,
    decode_records,
    iter_batches,
)

# Partition errors a fetch retries rather than raising from poll().
RETRIED_FETCH_ERRORS = frozenset({ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.KAFKA_STORAGE_ERROR})


class ConsumerMessage(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class Chunk(msgspec.Struct):
    """One partition's records from one fetch (Kafka's FetchedDataChunk)."""

    tp: TopicPartition
    epoch: int  # the partition's position epoch when fetched; a seek makes it stale
    records: list[ConsumerMessage]


class FetchConfig(msgspec.Struct, frozen=True):
    min_bytes: int
    max_wait_ms: int
    max_bytes: int
    max_partition_bytes: int
    retry_backoff_ms: int
    read_committed: bool = False  # Fetch v2 with isolation_level 1


# (partition, the offset it was fetched at): what to do when that offset is out of range
OutOfRange = Callable[[TopicPartition, int], Awaitable[None]]
# (broker id, round trip s, the broker's wait s), after every fetch
OnFetch = Callable[[int, float, float], None]


class Fetcher:
    def __init__(
        self,
        cluster: ClientCluster,
        state: SubscriptionState,
        config: FetchConfig,
        queue: asyncio.Queue[Chunk],
        out_of_range: OutOfRange,
        on_fetch: OnFetch | None,
    ) -> None:
        self.cluster = cluster
        self.state = state
        self.config = config
        self.queue = queue
        self.out_of_range = out_of_range
        self.on_fetch = on_fetch
        self.queue_high_water = 0  # the most chunks ever queued at once
        self.fetch_errors: dict[int, int] = {}  # retried partition errors, by code
        # Per broker: fetch round trips, total and true (total minus the broker's wait).
        self.fetch_latency: dict[int, FetchLatency] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._connections: dict[int, Connection] = {}

    def ensure_fetching(self, brokers: list[int]) -> None:
        """A running fetcher for each of ``brokers``."""
        for broker_id in brokers:
            task = self._tasks.get(broker_id)
            if task is None or task.done():
                self._tasks[broker_id] = asyncio.ensure_future(self._fetch_loop(broker_id))

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()

    async def _fetch_loop(self, broker_id: int) -> None:
        """Fetch the assigned partitions ``broker_id`` leads, forever."""
        state = self.state
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            tps = [tp for tp in state.fetchable() if self.cluster.leader_for(*tp) == broker_id]
            if not tps:
                state.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await state.wakeup.wait()
                continue
            epochs = {tp: state.epochs[tp] for tp in tps}
            offsets = {tp: state.fetch_positions[tp] for tp in tps}
            try:
                response = await self._fetch(broker_id, offsets)
            except (ConnectionClosed, KafkaError) as exc:
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else KafkaError(ErrorCode.NETWORK_EXCEPTION, f"broker {broker_id}: {exc}")
                )
                state.note_trouble(dict.fromkeys(tps, error))
                await asyncio.sleep(backoff)
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh(sorted({t for t, _ in tps}))
                continue
            stale = False
            for topic in response.responses:
                for part in topic.partitions:
                    tp = (topic.topic, part.partition_index)
                    if tp not in epochs or state.epochs.get(tp) != epochs[tp]:
                        continue  # reassigned or sought meanwhile
                    stale |= await self._process(tp, epochs[tp], offsets[tp], part)
            if stale:
                await asyncio.sleep(backoff)
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh(sorted({t for t, _ in tps}))

    async def _connection(self, broker_id: int) -> Connection:
        conn = self._connections.get(broker_id)
        if conn is None or conn.closed:
            if broker_id not in self.cluster.brokers:
                await self.cluster.refresh([])
            host, port = self.cluster.brokers[broker_id]
            conn = await self.cluster.open_connection(host, port)
            self._connections[broker_id] = conn
        return conn

    async def _fetch(self, broker_id: int, offsets: dict[TopicPartition, int]) -> m.FetchResponseV1:
        config = self.config
        conn = await self._connection(broker_id)
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(
                    partition,
                    offset,
                    config.max_partition_bytes,
                    # A broker that leads in another epoch answers FENCED/UNKNOWN_LEADER_EPOCH
                    # (metadata is refreshed) instead of serving a stale view (KIP-320).
                    self.cluster.leader_epoch_for(topic, partition),
                )
            )
        topics = [m.FetchTopic(t, parts) for t, parts in by_topic.items()]
        request: m.FetchRequest
        if config.read_committed:  # v2 carries the isolation level
            request = m.FetchRequestV2(
                -1,
                config.max_wait_ms,
                config.min_bytes,
                config.max_bytes,
                topics,  # type: ignore[arg-type]  # v2's partitions add fields with defaults
                isolation_level=1,
            )
        else:
            request = m.FetchRequest(
                -1, config.max_wait_ms, config.min_bytes, config.max_bytes, topics
            )
        started = time.perf_counter()
        response: m.FetchResponseV1 = await conn.send(
            ApiKey.FETCH,
            request,
            version=2 if config.read_committed else 1,
            timeout_ms=config.max_wait_ms + self.cluster.request_timeout_ms,
        )
        latency = self.fetch_latency.get(broker_id)
        if latency is None:
            latency = self.fetch_latency[broker_id] = FetchLatency()
        total = time.perf_counter() - started
        latency.observe(total, response.wait_time_ms / 1000)
        if self.on_fetch is not None:
            self.on_fetch(broker_id, total, response.wait_time_ms / 1000)
        return response

    async def _process(
        self, tp: TopicPartition, epoch: int, offset: int, part: m.PartitionData
    ) -> bool:
        """Handle one partition of a fetch; True if metadata looks stale."""
        state = self.state
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self.out_of_range(tp, offset)
            return False
        if part.error_code:
            if part.error_code in METADATA_STALE:
                state.note_trouble({tp: KafkaError(part.error_code, f"fetch at {offset}")})
                return True
            if part.error_code in RETRIED_FETCH_ERRORS:
                # A failed or refused remote read, a broker-side storage error: Kafka's
                # consumer logs these and fetches the partition again (after a backoff here).
                self.fetch_errors[part.error_code] = self.fetch_errors.get(part.error_code, 0) + 1
                state.note_trouble({tp: KafkaError(part.error_code, f"fetch at {offset}")})
                return True
            state.errors.append(KafkaError(part.error_code, f"fetch {tp[0]}-{tp[1]}"))
            return False
        state.available(tp)
        state.highwater[tp] = part.high_watermark
        if not part.records:
            return False
        try:
            records = [
                ConsumerMessage(tp[0], tp[1], r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in decode_records(part.records)
                if r.offset >= offset
            ]
        except CorruptRecordError as exc:
            state.errors.append(KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)))
            return False
        if records:
            # As Kafka's fetcher: the position moves on, then the put may block.
            state.fetch_positions[tp] = records[-1].offset + 1
            await self.queue.put(Chunk(tp, epoch, records))
            self.queue_high_water = max(self.queue_high_water, self.queue.qsize())
        else:
            # Batches with no record for the application (a transaction marker, a batch
            # the log cleaner emptied): the position moves past them, as Kafka's does.
            end = max((batch_end(b) for b in iter_batches(part.records)), default=offset)
            if end > offset:
                state.fetch_positions[tp] = end
                if state.positions.get(tp) == offset:  # every record before is handed out
                    state.positions[tp] = end  # so commits and lag count the marker too
        return False
