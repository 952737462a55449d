"""Producer: batches records per partition (``linger.ms``/``batch.size``), sends them to
partition leaders with ``acks``, retries retriable errors with backoff and refreshed
metadata until ``delivery.timeout.ms``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from clients.cluster import ClientCluster
from clients.connection import ConnectionClosed
from clients.partitioner import partition_for_key
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import METADATA_STALE, ErrorCode, KafkaError, error_name
from protocol.records import encode_batch


class RecordMetadata(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int


@dataclass
class _Batch:
    topic: str
    partition: int
    records: list[tuple[bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]]]] = (
        field(default_factory=list)
    )
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = 0
    created: float = 0.0
    attempts: int = 0
    encoded: bytes | None = None

    def encode(self) -> bytes:
        if self.encoded is None:
            self.encoded = encode_batch(self.records)
        return self.encoded


class Producer:
    """An async producer. ``await send(...)`` returns a future of the record's metadata;
    ``await send_and_wait(...)`` the metadata itself."""

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int | str = 1,
        linger_ms: int = 5,
        batch_size: int = 16384,
        max_request_size: int = 1048576,
        retry_backoff_ms: int = 100,
        delivery_timeout_ms: int = 120000,
        request_timeout_ms: int = 30000,
        max_in_flight: int = 5,
        client_id: str = "purgatory-producer",
        auto_create_topics: bool = True,
    ) -> None:
        self.acks = -1 if acks in ("all", -1, "-1") else int(acks)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all/-1, 0 or 1, got {acks!r}")
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.auto_create_topics = auto_create_topics
        self.cluster = ClientCluster(
            bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms
        )
        self._open: dict[tuple[str, int], _Batch] = {}
        self._round_robin: dict[str, int] = {}
        self._in_flight: dict[int, asyncio.Semaphore] = {}
        self._max_in_flight = max_in_flight
        self._tasks: set[asyncio.Task[Any]] = set()
        self._linger_handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self._closed = False

    async def start(self) -> None:
        await self.cluster.refresh([])

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
        if self._closed:
            raise RuntimeError("producer is closed")
        if self.cluster.partitions_for(topic) is None:
            await self.cluster.ensure_topics(
                [topic], auto_create=self.auto_create_topics, timeout_ms=self.delivery_timeout_ms
            )
        parts = self.cluster.partitions_for(topic) or []
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, len(parts))
            else:  # sticky: keep filling the open batch of the current partition
                partition = self._round_robin.get(topic, 0) % len(parts)
        elif not 0 <= partition < len(parts):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{topic} has {len(parts)} partitions; partition {partition} does not exist",
            )
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        size = (
            len(value or b"")
            + len(key or b"")
            + 8
            + sum(len(k) + len(v or b"") for k, v in headers)
        )
        if size > self.max_request_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record of {size} bytes exceeds max.request.size {self.max_request_size}",
            )
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.size + size > self.batch_size:
            self._close_batch(tp)
            batch = None
        if batch is None:
            batch = _Batch(topic, partition, created=time.monotonic())
            self._open[tp] = batch
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        batch.records.append((key, value, ts, headers))
        batch.futures.append(future)
        batch.size += size
        if batch.size >= self.batch_size:
            self._close_batch(tp)
        else:
            self._arm_linger()
        return future

    async def send_and_wait(
        self, topic: str, value: bytes | None, key: bytes | None = None, **kwargs: Any
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    def _arm_linger(self) -> None:
        if self._linger_handle is None:
            loop = asyncio.get_running_loop()
            if self.linger_ms <= 0:
                self._linger_handle = loop.call_soon(self._linger_expired)
            else:
                self._linger_handle = loop.call_later(self.linger_ms / 1000, self._linger_expired)

    def _linger_expired(self) -> None:
        self._linger_handle = None
        for tp in list(self._open):
            self._close_batch(tp)

    def _close_batch(self, tp: tuple[str, int]) -> None:
        batch = self._open.pop(tp, None)
        if batch is None or not batch.records:
            return
        parts = self.cluster.partitions_for(tp[0])
        if parts and batch.records[0][0] is None:
            self._round_robin[tp[0]] = (tp[1] + 1) % len(parts)
        self._spawn(self._deliver(batch))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, batch: _Batch) -> None:
        """Send one batch to its leader, retrying retriable errors until the delivery timeout."""
        deadline = batch.created + self.delivery_timeout_ms / 1000
        while True:
            batch.attempts += 1
            try:
                code, message, base = await self._send_batch(batch)
            except (ConnectionClosed, KafkaError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                message, base = str(exc), -1
            if code == ErrorCode.NONE:
                now = int(time.time() * 1000)
                for i, fut in enumerate(batch.futures):
                    if not fut.done():
                        offset = base + i if base >= 0 else -1
                        fut.set_result(
                            RecordMetadata(
                                batch.topic,
                                batch.partition,
                                offset,
                                batch.records[i][2] if batch.records[i][2] >= 0 else now,
                            )
                        )
                return
            retriable = ErrorCode(code).retriable if code in ErrorCode._value2member_map_ else False
            if (
                not retriable
                or time.monotonic() + self.retry_backoff_ms / 1000 > deadline
                or self._closed
            ):
                error = KafkaError(
                    code, message or f"{error_name(code)} after {batch.attempts} attempt(s)"
                )
                for fut in batch.futures:
                    if not fut.done():
                        fut.set_exception(error)
                return
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            if code in METADATA_STALE or code == ErrorCode.NETWORK_EXCEPTION:
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh([batch.topic], auto_create=self.auto_create_topics)

    async def _send_batch(self, batch: _Batch) -> tuple[int, str | None, int]:
        leader = self.cluster.leader_for(batch.topic, batch.partition)
        if leader < 0:
            return (
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"no leader known for {batch.topic}-{batch.partition}",
                -1,
            )
        conn = await self.cluster.connection(leader)
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
        sem = self._in_flight.setdefault(leader, asyncio.Semaphore(self._max_in_flight))
        async with sem:
            response: m.ProduceResponse = await conn.send(ApiKey.PRODUCE, request)
        part = response.responses[0].partitions[0]
        return part.error_code, part.error_message, part.base_offset

    async def flush(self) -> None:
        """Send every open batch now and wait until every sent record is answered."""
        if self._linger_handle is not None:
            self._linger_handle.cancel()
            self._linger_handle = None
        for tp in list(self._open):
            self._close_batch(tp)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        if not self._closed:
            await self.flush()
            self._closed = True
            await self.cluster.close()
