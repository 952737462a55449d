"""Producer: batches records per partition (``linger.ms``/``batch.size``), sends them to
partition leaders with ``acks``, and retries retriable errors with backoff and refreshed
metadata until ``delivery.timeout.ms``. Every record's future ends, acknowledged or failed.

Ordering: a partition has at most one batch in flight, so a retried batch is never
overtaken by a later one of the same partition and per-partition order holds across
retries without idempotence (Kafka's ``max.in.flight.requests.per.connection=1``
guarantee, applied per partition).

Idempotence (``enable.idempotence``, as in Kafka on by default with ``acks=all``): batches
are numbered (clients/transaction_manager.py) and sent as Kafka v2 batches, so a retry
the leader already has is acknowledged with its first offset, never written twice. Batches of different partitions are pipelined on one
connection, up to ``max.in.flight.requests.per.connection`` per broker. While a batch is in
flight, later records of its partition keep filling the next batch.

Timeouts, with Kafka's meanings:

- ``delivery.timeout.ms``: the bound on the time from ``send()`` to the record's outcome
  (lingering, waiting behind an earlier batch, requests and retries); must be at least
  ``linger.ms + request.timeout.ms``;
- ``request.timeout.ms``: how long one produce request may wait for its response
  (default 30 s, or less to fit the delivery timeout); on expiry the connection is
  closed (as Kafka's client does) and the batch retried;
- ``retries``: how many times a batch is sent again after a retriable error;
- ``retry.backoff.ms``: the pause before each retry;
- ``max.block.ms``: how long ``send()`` may wait for metadata or buffer space.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Unpack

from purgatory.clients.cluster import ClientCluster
from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.partitioner import partition_for_key
from purgatory.clients.producer_batch import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    ProducerBatch,
    RecordMetadata,
)
from purgatory.clients.security import ClientSecurity, SecurityKeywords
from purgatory.clients.transaction_manager import TransactionManager
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import (
    METADATA_STALE,
    ErrorCode,
    KafkaError,
    error_name,
    is_retriable,
)

TopicPartition = tuple[str, int]

DEFAULT_RETRIES = 2147483647  # Kafka's default: retry until delivery.timeout.ms


class DeliveryAborted(Exception):
    """The producer was closed (or aborted) before the record's batch was acknowledged."""


def _observed(future: asyncio.Future[Any]) -> None:
    """Mark a finished future's exception as retrieved: the caller owns the future and may
    read it later, but asyncio must not log it as 'never retrieved' when it is dropped."""
    if not future.cancelled():
        future.exception()


class Producer:
    """An async producer. ``await send(...)`` returns a future of the record's metadata;
    ``await send_and_wait(...)`` the metadata itself. Failed futures hold a ``KafkaError``
    (or ``DeliveryAborted`` when the producer was closed first)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int | str = 1,
        linger_ms: int = 5,
        batch_size: int = 16384,
        max_request_size: int = 1048576,
        buffer_memory: int = 33554432,
        retries: int = DEFAULT_RETRIES,
        retry_backoff_ms: int = 100,
        delivery_timeout_ms: int = 120000,
        request_timeout_ms: int | None = None,
        max_block_ms: int = 60000,
        max_in_flight: int = 5,
        client_id: str = "purgatory-producer",
        auto_create_topics: bool = True,
        enable_idempotence: bool | None = None,
        **security: Unpack[SecurityKeywords],
    ) -> None:
        """``security``: Kafka's client security configs (``security_protocol``,
        ``sasl_mechanism``, ...; clients/security.py)."""
        self.acks = -1 if acks in ("all", -1, "-1") else int(acks)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all/-1, 0 or 1, got {acks!r}")
        if enable_idempotence is None:  # Kafka's default: on, unless acks says otherwise
            enable_idempotence = self.acks == -1
        if enable_idempotence and (self.acks != -1 or max_in_flight > 5 or retries == 0):
            raise ValueError(
                "enable.idempotence needs acks=all, max.in.flight.requests.per.connection "
                f"<= 5 and retries > 0 (got acks={acks}, {max_in_flight}, {retries})"
            )
        if request_timeout_ms is None:  # Kafka's 30 s, within the delivery timeout
            request_timeout_ms = max(1, min(30000, delivery_timeout_ms - linger_ms))
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError(
                f"delivery.timeout.ms ({delivery_timeout_ms}) must be at least linger.ms "
                f"({linger_ms}) + request.timeout.ms ({request_timeout_ms})"
            )
        if retries < 0 or max_in_flight < 1 or buffer_memory < 1:
            raise ValueError("retries must be >= 0, max_in_flight and buffer_memory >= 1")
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.max_block_ms = max_block_ms
        self.auto_create_topics = auto_create_topics
        self.cluster = ClientCluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            security=ClientSecurity.from_keywords(security),
        )
        self.transactions = (
            TransactionManager(self.cluster, retry_backoff_ms) if enable_idempotence else None
        )
        self._loop = asyncio.get_running_loop()
        self._open: dict[TopicPartition, ProducerBatch] = {}  # filling, not yet closed
        self._ready: dict[TopicPartition, deque[ProducerBatch]] = {}  # closed, in send order
        self._drains: dict[TopicPartition, asyncio.Task[None]] = {}  # one sender a partition
        self._sticky: dict[str, tuple[int, bool]] = {}  # keyless: (partition, still sticking)
        self._in_flight: dict[int, asyncio.Semaphore] = {}
        self._max_in_flight = max_in_flight
        self._linger_handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self._buffered = 0  # bytes of records not yet answered (bounded by buffer.memory)
        self._space = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._pending = 0  # records whose future has not ended
        self._closed = False
        self._aborted: DeliveryAborted | None = None

    async def start(self) -> None:
        await self.cluster.refresh([])

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pending(self) -> int:
        """Records sent to the producer whose outcome is not known yet."""
        return self._pending

    # -- send --------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the future ends with its metadata or its error. Raises at once
        (KafkaError) for a record that can never be delivered: an unknown topic or
        partition, a record over ``max.request.size``, or no buffer space within
        ``max.block.ms``."""
        if self._closed:
            raise RuntimeError("producer is closed")
        size = (
            len(value or b"")
            + len(key or b"")
            + RECORD_OVERHEAD
            + sum(len(k.encode()) + len(v or b"") + 8 for k, v in headers)
        )
        if size + BATCH_OVERHEAD > self.max_request_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record of {size + BATCH_OVERHEAD} bytes when serialized exceeds "
                f"max.request.size {self.max_request_size}",
            )
        if self.cluster.partitions_for(topic) is None:
            await self.cluster.ensure_topics(
                [topic], auto_create=self.auto_create_topics, timeout_ms=self.max_block_ms
            )
        parts = self.cluster.partitions_for(topic) or []
        if partition is None:
            partition = self._choose_partition(topic, key, parts)
        elif not 0 <= partition < len(parts):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{topic} has {len(parts)} partitions; partition {partition} does not exist",
            )
        if self._buffered + size > self.buffer_memory and self._buffered:
            await self._wait_for_space(size)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.size + size > self.batch_size:
            self._close_batch(tp)
            batch = None
        if batch is None:
            batch = self._open[tp] = ProducerBatch(topic, partition, self._loop.time())
        future: asyncio.Future[RecordMetadata] = self._loop.create_future()
        batch.records.append((key, value, ts, headers))
        batch.futures.append(future)
        batch.size += size
        self._buffered += size
        self._pending += 1
        self._idle.clear()
        if batch.size >= self.batch_size:
            self._close_batch(tp)
        else:
            self._arm_linger()
        return future

    async def send_and_wait(
        self, topic: str, value: bytes | None, key: bytes | None = None, **kwargs: Any
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    def _choose_partition(
        self, topic: str, key: bytes | None, parts: list[m.MetadataPartition]
    ) -> int:
        """Keyed: murmur2 over every partition (a key keeps its partition while a leader is
        away). Keyless: sticky, on a partition that has a leader when one does."""
        if key is not None:
            return partition_for_key(key, len(parts))
        current, sticking = self._sticky.get(topic, (-1, False))
        if sticking and current < len(parts):
            return current
        available = [p.partition_index for p in parts if p.leader_id >= 0]
        pool = available or [p.partition_index for p in parts]
        chosen = min(pool, key=lambda p: (p - current - 1) % len(parts))
        self._sticky[topic] = (chosen, True)
        return chosen

    async def _wait_for_space(self, size: int) -> None:
        deadline = self._loop.time() + self.max_block_ms / 1000
        while self._buffered and self._buffered + size > self.buffer_memory:
            self._space.clear()
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"buffer.memory ({self.buffer_memory} bytes) stayed full for "
                    f"max.block.ms ({self.max_block_ms})",
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._space.wait()

    # -- batches -----------------------------------------------------------------------

    def _arm_linger(self) -> None:
        if self._linger_handle is None:
            if self.linger_ms <= 0:
                self._linger_handle = self._loop.call_soon(self._linger_expired)
            else:
                self._linger_handle = self._loop.call_later(
                    self.linger_ms / 1000, self._linger_expired
                )

    def _linger_expired(self) -> None:
        self._linger_handle = None
        for tp in list(self._open):
            self._close_batch(tp)

    def _close_batch(self, tp: TopicPartition) -> None:
        """Queue the open batch of ``tp`` behind its earlier ones, and start the partition's
        sender if it is not running."""
        batch = self._open.pop(tp, None)
        if batch is None:
            return
        if self._sticky.get(tp[0]) == (tp[1], True):
            self._sticky[tp[0]] = (tp[1], False)  # a batch closed: the next one sticks elsewhere
        self._ready.setdefault(tp, deque()).append(batch)
        if tp not in self._drains:
            self._drains[tp] = self._loop.create_task(self._drain(tp))

    async def _drain(self, tp: TopicPartition) -> None:
        """Deliver the partition's batches one at a time, in order."""
        queue = self._ready[tp]
        batch: ProducerBatch | None = None
        try:
            while queue:
                batch = queue[0]
                await self._deliver(batch)
                queue.popleft()
                batch = None
        finally:
            if batch is not None:  # cancelled mid-delivery (abort)
                self._finish(batch, self._aborted or DeliveryAborted("delivery cancelled"))
            del self._drains[tp]
            if not queue:
                self._ready.pop(tp, None)

    async def _deliver(self, batch: ProducerBatch) -> None:
        """Send one batch to its leader, retrying retriable errors until it is acknowledged,
        its retries are used up, or its delivery timeout passes. A failure carries the last
        error the batch met."""
        deadline = batch.created + self.delivery_timeout_ms / 1000
        code: int = ErrorCode.REQUEST_TIMED_OUT
        detail = "not sent yet"
        while True:
            remaining = deadline - self._loop.time()
            if remaining > 0:
                batch.attempts += 1
                try:
                    code, message, base = await self._send_batch(batch, remaining)
                except (ConnectionClosed, KafkaError) as exc:
                    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                    message, base = str(exc), -1
                if code == ErrorCode.NONE:
                    self._acknowledge(batch, base)
                    return
                detail = message or error_name(code)
            retriable = is_retriable(code)
            out_of_time = self._loop.time() + self.retry_backoff_ms / 1000 >= deadline
            if not retriable or out_of_time or batch.attempts > self.retries:
                why = (
                    "not retriable"
                    if not retriable
                    else f"delivery.timeout.ms {self.delivery_timeout_ms} passed"
                    if out_of_time
                    else f"retries ({self.retries}) used up"
                )
                # The same words for every batch that fails the same way (no attempt
                # count), so reports of many batches can be grouped.
                self._finish(
                    batch, KafkaError(code, f"{batch.topic}-{batch.partition}: {detail} ({why})")
                )
                return
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            if code in METADATA_STALE or code == ErrorCode.NETWORK_EXCEPTION:
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh([batch.topic], auto_create=False)

    async def _send_batch(
        self, batch: ProducerBatch, remaining_s: float
    ) -> tuple[int, str | None, int]:
        leader = self.cluster.leader_for(batch.topic, batch.partition)
        if leader < 0:
            return (
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"no leader for {batch.topic}-{batch.partition}",
                -1,
            )
        conn = await self.cluster.connection(leader)
        if self.transactions is not None and batch.base_sequence < 0:
            await self.transactions.ensure_producer_id(self._loop.time() + remaining_s)
            batch.producer_id = self.transactions.producer_id
            batch.producer_epoch = self.transactions.producer_epoch
            tp = (batch.topic, batch.partition)
            batch.base_sequence = self.transactions.next_sequence(tp, len(batch.records))
        request = m.ProduceRequest(
            self.acks,
            self.request_timeout_ms,
            [
                m.TopicProduceData(
                    batch.topic, [m.PartitionProduceData(batch.partition, batch.encode())]
                )
            ],
        )
        if self.acks == 0:
            conn.send_nowait(ApiKey.PRODUCE, request)
            return ErrorCode.NONE, None, -1
        timeout_ms = max(1, min(self.request_timeout_ms, int(remaining_s * 1000)))
        sem = self._in_flight.setdefault(leader, asyncio.Semaphore(self._max_in_flight))
        async with sem:
            try:
                response: m.ProduceResponse = await conn.send(
                    ApiKey.PRODUCE, request, timeout_ms=timeout_ms
                )
            except KafkaError as exc:
                if exc.code == ErrorCode.REQUEST_TIMED_OUT:
                    # No answer in time: as Kafka's client, drop the connection (a late
                    # answer must not be matched to anything) and retry on a new one.
                    await conn.close()
                raise
        part = response.responses[0].partitions[0]
        return part.error_code, part.error_message, part.base_offset

    def _acknowledge(self, batch: ProducerBatch, base: int) -> None:
        now = int(time.time() * 1000)
        for i, future in enumerate(batch.futures):
            if not future.done():
                ts = batch.records[i][2]
                offset = base + i if base >= 0 else -1
                future.set_result(
                    RecordMetadata(batch.topic, batch.partition, offset, ts if ts >= 0 else now)
                )
        self._release(batch)

    def _finish(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail every record of ``batch`` that has no outcome yet."""
        if self.transactions is not None and batch.base_sequence >= 0:
            self.transactions.batch_failed(batch.producer_epoch)
        for future in batch.futures:
            if not future.done():
                future.set_exception(error)
                _observed(future)
        self._release(batch)

    def _release(self, batch: ProducerBatch) -> None:
        """Give back the batch's buffer space and pending count, once (size 0: released)."""
        if batch.size:
            self._buffered -= batch.size
            self._pending -= len(batch.futures)
            batch.size = 0
            self._space.set()
            if self._pending == 0:
                self._idle.set()

    # -- flush and close ---------------------------------------------------------------

    async def flush(self, timeout_s: float | None = None) -> bool:
        """Send every open batch now and wait until every record has its outcome (or
        ``timeout_s`` passes). True when nothing is pending."""
        if self._linger_handle is not None:
            self._linger_handle.cancel()
            self._linger_handle = None
        for tp in list(self._open):
            self._close_batch(tp)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        return self._pending == 0

    async def abort(self, reason: str = "the producer was closed before delivery") -> int:
        """Fail every record without an outcome at once (DeliveryAborted); returns how many."""
        pending = self._pending
        if self._linger_handle is not None:
            self._linger_handle.cancel()
            self._linger_handle = None
        error = self._aborted = DeliveryAborted(reason)
        for batch in list(self._open.values()):
            self._finish(batch, error)
        self._open.clear()
        drains = list(self._drains.values())
        for task in drains:
            task.cancel()
        for task in drains:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for queue in list(self._ready.values()):
            for batch in queue:
                self._finish(batch, error)
        self._ready.clear()
        return pending

    async def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is pending (waiting at most ``timeout_s``; None: each record's own
        delivery timeout), fail the rest with DeliveryAborted, and close connections."""
        if self._closed:
            return
        self._closed = True
        if not await self.flush(timeout_s):
            await self.abort()
        await self.cluster.close()
