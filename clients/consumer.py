"""Consumer: background fetchers fill a bounded chunk queue; the application polls it.

As in Kafka's classic consumer: one fetcher per broker it fetches from long-polls that
broker for the assigned partitions it leads and puts each partition's fetched records in a
queue of at most ``queued.max.message.chunks`` chunks (each up to
``fetch.message.max.bytes``, Kafka's name for ``max.partition.fetch.bytes``). A full queue
blocks the fetcher's ``put``, which is what throttles fetching; memory never grows. A
fetcher's position (its next fetch offset) moves when a fetch is processed, before the
``put``; the application's position when ``poll`` hands records out. So the fetcher's lag
(``MaxLag``: high watermark - next fetch offset) only tells how far behind the application
is when queue and chunks are small, while ``high watermark - consumed offset`` (and the
offset checker's ``log end - committed``) always does.

Committed offsets per group (OffsetCommit/OffsetFetch, kept by each partition's leader),
manual ``commit()`` and auto-commit every ``auto.commit.interval.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable

import msgspec
import structlog

from clients.cluster import ClientCluster, by_topic
from clients.connection import Connection, ConnectionClosed
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import METADATA_STALE, ErrorCode, KafkaError, error_name
from protocol.records import CorruptRecordError, Header, decode_records
from purgatory.common.histogram import FetchLatency

TopicPartition = tuple[str, int]

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


class Consumer:
    def __init__(
        self,
        bootstrap: str,
        *,
        group_id: str | None = None,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        fetch_message_max_bytes: int | None = None,
        queued_max_message_chunks: int = 2,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        on_fetch: Callable[[int, float, float], None] | None = None,
        client_id: str = "purgatory-consumer",
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto.offset.reset must be earliest, latest or none, got {auto_offset_reset!r}"
            )
        if queued_max_message_chunks < 1:
            raise ValueError("queued.max.message.chunks must be at least 1")
        self.group_id = group_id
        self.client_id = client_id
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        # fetch.message.max.bytes is the classic consumer's name for the same bound.
        self.max_partition_fetch_bytes = fetch_message_max_bytes or max_partition_fetch_bytes
        self.queued_max_message_chunks = queued_max_message_chunks
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.fetch_errors: dict[int, int] = {}  # retried partition errors, by code
        # Called with (broker id, round trip s, wait_time_ms / 1000) after every fetch.
        self.on_fetch = on_fetch
        self.cluster = ClientCluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=max(request_timeout_ms, fetch_max_wait_ms + 5000),
        )
        self.queue: asyncio.Queue[Chunk] = asyncio.Queue(maxsize=queued_max_message_chunks)
        self.queue_high_water = 0  # the most chunks ever queued at once
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}  # the application's next offset
        self._fetch_positions: dict[TopicPartition, int] = {}  # the fetchers' next offset
        self._epochs: dict[TopicPartition, int] = {}
        self._highwater: dict[TopicPartition, int] = {}
        self._current: deque[ConsumerMessage] = deque()  # the chunk being handed out
        self._errors: list[KafkaError] = []  # raised by the next poll
        self._trouble: dict[TopicPartition, KafkaError] = {}  # why a partition is not fetched
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._fetch_conns: dict[int, Connection] = {}
        self._wakeup = asyncio.Event()
        self._auto_commit: asyncio.Task[None] | None = None
        self._committed_positions: dict[TopicPartition, int] = {}
        # Per broker: fetch round trips, total and true (total minus the broker's wait).
        self.fetch_latency: dict[int, FetchLatency] = {}
        self.owner = f"{client_id}@{socket.gethostname()}"  # shown by the offset checker
        self.log = structlog.get_logger("consumer").bind(client_id=client_id)

    async def start(self) -> None:
        await self.cluster.refresh([])

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._assignment = list(dict.fromkeys(partitions))
        for tp in list(self._positions):
            if tp not in self._assignment:
                self._forget(tp)
        self._wakeup.set()

    def _forget(self, tp: TopicPartition) -> None:
        tables = (self._positions, self._fetch_positions, self._epochs, self._highwater)
        for table in (*tables, self._trouble):
            table.pop(tp, None)
        if self._current and (self._current[0].topic, self._current[0].partition) == tp:
            self._current.clear()

    async def assign_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Assign every partition of ``topics`` (which must exist)."""
        await self.cluster.ensure_topics(topics, auto_create=False)
        tps = [(t, p.partition_index) for t in topics for p in self.cluster.partitions_for(t) or []]
        self.assign(tps)
        return tps

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._assignment:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned")
        if offset < 0:
            raise ValueError(f"cannot seek to negative offset {offset}")
        self._set_position(tp, offset)

    def _set_position(self, tp: TopicPartition, offset: int) -> None:
        """Move both the application and the fetcher to ``offset``; queued chunks of the
        partition go stale (a new epoch) and are dropped when they come out."""
        self._positions[tp] = offset
        self._fetch_positions[tp] = offset
        self._epochs[tp] = self._epochs.get(tp, 0) + 1
        if self._current and (self._current[0].topic, self._current[0].partition) == tp:
            self._current.clear()
        self._wakeup.set()

    async def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self._assignment), m.EARLIEST_TIMESTAMP)

    async def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self._assignment), m.LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition) -> int | None:
        """The offset of the next record the application will get."""
        return self._positions.get(tp)

    def fetch_position(self, tp: TopicPartition) -> int | None:
        """The offset the fetcher will fetch next."""
        return self._fetch_positions.get(tp)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch."""
        return self._highwater.get(tp)

    # -- lag -----------------------------------------------------------------------------

    def fetcher_lag(self, tp: TopicPartition) -> int | None:
        """High watermark - the fetcher's next offset (Kafka's FetcherLagMetrics)."""
        hw, position = self._highwater.get(tp), self._fetch_positions.get(tp)
        return None if hw is None or position is None else max(hw - position, 0)

    def max_lag(self) -> int:
        """The largest fetcher lag over the assigned partitions (Kafka's MaxLag)."""
        lags = [self.fetcher_lag(tp) for tp in self._assignment]
        return max((lag for lag in lags if lag is not None), default=0)

    def consumer_lag(self, tp: TopicPartition) -> int | None:
        """High watermark - the application's next offset: how far behind it really is."""
        hw, position = self._highwater.get(tp), self._positions.get(tp)
        return None if hw is None or position is None else max(hw - position, 0)

    def queued_chunks(self) -> int:
        return self.queue.qsize()

    async def _reset(self, tps: list[TopicPartition], timestamp: int) -> None:
        """Move ``tps`` to the offset of ``timestamp``; partitions whose leader cannot
        answer now keep no position and are tried again by the next poll."""
        errors: dict[TopicPartition, KafkaError] = {}
        for tp, offset in (await self.cluster.list_offsets(tps, timestamp, errors)).items():
            self._set_position(tp, offset)
        self._note_trouble(errors)

    async def list_offsets(
        self, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return await self.cluster.list_offsets(tps, timestamp)

    async def _initialize_positions(self) -> None:
        missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing:
            return
        if self.group_id is not None:
            errors: dict[TopicPartition, KafkaError] = {}
            committed = await self.cluster.committed(self.group_id, missing, errors)
            self._note_trouble(errors)
            for tp, (offset, _) in committed.items():
                self._set_position(tp, offset)
            # No committed offset: reset. Unreadable now: try again at the next poll.
            missing = [tp for tp in missing if tp not in self._positions and tp not in errors]
        if missing:
            if self.auto_offset_reset == "none":
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"no position for {missing[0][0]}-{missing[0][1]} and auto.offset.reset=none",
                )
            ts = (
                m.EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else m.LATEST_TIMESTAMP
            )
            await self._reset(missing, ts)

    # -- fetching ------------------------------------------------------------------------------

    async def _ensure_running(self) -> None:
        """Positions for every assigned partition, a fetcher for each broker leading one of
        them, and the auto-commit task."""
        await self._initialize_positions()
        leaders, leaderless = await self.cluster.by_leader(self._assignment)
        self._note_trouble(
            {tp: KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader now") for tp in leaderless}
        )
        for broker_id in leaders:
            task = self._fetchers.get(broker_id)
            if task is None or task.done():
                self._fetchers[broker_id] = asyncio.ensure_future(self._fetch_loop(broker_id))
        if self.enable_auto_commit and self._auto_commit is None:
            self._auto_commit = asyncio.ensure_future(self._auto_commit_loop())

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ConsumerMessage]:
        """Records from the chunk queue: waits up to ``timeout_ms`` for the first, then hands
        out what is already fetched (at most ``max_records``)."""
        if not self._assignment:
            raise RuntimeError("no partitions assigned")
        self._raise_errors()
        await self._ensure_running()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        limit = max_records if max_records is not None else 1 << 62
        out: list[ConsumerMessage] = []
        while len(out) < limit:
            if not self._current:
                chunk = self._next_chunk_nowait()
                if chunk is None:
                    if out:
                        break
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        async with asyncio.timeout(min(remaining, 0.5)):
                            chunk = await self.queue.get()
                    except TimeoutError:
                        self._raise_errors()
                        await self._ensure_running()  # leaders may have moved
                        continue
                if not self._usable(chunk):
                    continue
                position = self._positions[chunk.tp]
                self._current.extend(r for r in chunk.records if r.offset >= position)
                continue
            record = self._current.popleft()
            out.append(record)
            self._positions[(record.topic, record.partition)] = record.offset + 1
        return out

    def _next_chunk_nowait(self) -> Chunk | None:
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def _usable(self, chunk: Chunk) -> bool:
        return self._epochs.get(chunk.tp) == chunk.epoch and chunk.tp in self._positions

    def unavailable(self) -> dict[TopicPartition, str]:
        """Assigned partitions that cannot be fetched now, with the last reason; they are
        retried with backoff while the others are fetched."""
        return {tp: str(e) for tp, e in self._trouble.items() if tp in self._assignment}

    def _note_trouble(self, errors: dict[TopicPartition, KafkaError]) -> None:
        """Record why partitions cannot be fetched; log a partition once per change of its
        error, not at every retry."""
        for tp, error in errors.items():
            previous = self._trouble.get(tp)
            self._trouble[tp] = error
            if previous is None or previous.code != error.code:
                self.log.warning(
                    "partition_unavailable",
                    partition=f"{tp[0]}-{tp[1]}",
                    error=error_name(error.code),
                    detail=str(error),
                )

    def _raise_errors(self) -> None:
        if self._errors:
            error, self._errors = self._errors[0], []
            raise error

    async def _fetch_loop(self, broker_id: int) -> None:
        """Fetch the assigned partitions ``broker_id`` leads, forever (Kafka's
        ConsumerFetcherThread): advance the fetch position, then put the chunk (blocking
        while the queue is full)."""
        backoff = self.retry_backoff_ms / 1000
        while True:
            tps = [
                tp
                for tp in self._assignment
                if tp in self._fetch_positions and self.cluster.leader_for(*tp) == broker_id
            ]
            if not tps:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await self._wakeup.wait()
                continue
            epochs = {tp: self._epochs[tp] for tp in tps}
            offsets = {tp: self._fetch_positions[tp] for tp in tps}
            try:
                response = await self._fetch(broker_id, offsets)
            except (ConnectionClosed, KafkaError) as exc:
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else KafkaError(ErrorCode.NETWORK_EXCEPTION, f"broker {broker_id}: {exc}")
                )
                self._note_trouble(dict.fromkeys(tps, error))
                await asyncio.sleep(backoff)
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh(sorted({t for t, _ in tps}))
                continue
            stale = False
            for topic in response.responses:
                for part in topic.partitions:
                    tp = (topic.topic, part.partition_index)
                    if tp not in epochs or self._epochs.get(tp) != epochs[tp]:
                        continue  # reassigned or sought meanwhile
                    stale |= await self._process(tp, epochs[tp], offsets[tp], part)
            if stale:
                await asyncio.sleep(backoff)
                with contextlib.suppress(ConnectionClosed, KafkaError):
                    await self.cluster.refresh(sorted({t for t, _ in tps}))

    async def _fetch_connection(self, broker_id: int) -> Connection:
        """The fetcher's own connection: a long poll parked on a shared one would hold up
        commits and offset look-ups behind it (responses come in order)."""
        conn = self._fetch_conns.get(broker_id)
        if conn is None or conn.closed:
            if broker_id not in self.cluster.brokers:
                await self.cluster.refresh([])
            host, port = self.cluster.brokers[broker_id]
            conn = await Connection.open(
                host,
                port,
                client_id=self.client_id,
                request_timeout_ms=self.cluster.request_timeout_ms,
            )
            self._fetch_conns[broker_id] = conn
        return conn

    async def _fetch(self, broker_id: int, offsets: dict[TopicPartition, int]) -> m.FetchResponseV1:
        conn = await self._fetch_connection(broker_id)
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(partition, offset, self.max_partition_fetch_bytes)
            )
        request = m.FetchRequest(
            -1,
            self.fetch_max_wait_ms,
            self.fetch_min_bytes,
            self.fetch_max_bytes,
            [m.FetchTopic(t, parts) for t, parts in by_topic.items()],
        )
        started = time.perf_counter()
        response: m.FetchResponseV1 = await conn.send(
            ApiKey.FETCH,
            request,
            timeout_ms=self.fetch_max_wait_ms + self.cluster.request_timeout_ms,
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
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                self._errors.append(KafkaError(part.error_code, f"{tp[0]}-{tp[1]} offset {offset}"))
                self._fetch_positions.pop(tp, None)  # stop fetching it
                return False
            ts = (
                m.EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else m.LATEST_TIMESTAMP
            )
            with contextlib.suppress(ConnectionClosed, KafkaError):
                await self._reset([tp], ts)
            return False
        if part.error_code:
            if part.error_code in METADATA_STALE:
                self._note_trouble({tp: KafkaError(part.error_code, f"fetch at {offset}")})
                return True
            if part.error_code in RETRIED_FETCH_ERRORS:
                # A failed or refused remote read, a broker-side storage error: Kafka's
                # consumer logs these and fetches the partition again (after a backoff here).
                self.fetch_errors[part.error_code] = self.fetch_errors.get(part.error_code, 0) + 1
                self._note_trouble({tp: KafkaError(part.error_code, f"fetch at {offset}")})
                return True
            self._errors.append(KafkaError(part.error_code, f"fetch {tp[0]}-{tp[1]}"))
            return False
        if tp in self._trouble:
            del self._trouble[tp]
            self.log.warning("partition_available", partition=f"{tp[0]}-{tp[1]}")
        self._highwater[tp] = part.high_watermark
        if not part.records:
            return False
        try:
            records = [
                ConsumerMessage(tp[0], tp[1], r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in decode_records(part.records)
                if r.offset >= offset
            ]
        except CorruptRecordError as exc:
            self._errors.append(KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)))
            return False
        if records:
            # As Kafka's fetcher: the position moves on, then the put may block.
            self._fetch_positions[tp] = records[-1].offset + 1
            await self.queue.put(Chunk(tp, epoch, records))
            self.queue_high_water = max(self.queue_high_water, self.queue.qsize())
        return False

    # -- committed offsets ---------------------------------------------------------------------

    def _require_group(self) -> str:
        if self.group_id is None:
            raise RuntimeError("this consumer has no group_id")
        return self.group_id

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: what the application has consumed) for the group.
        The commit's metadata names this consumer (the offset checker's owner). Partitions
        whose leader is unavailable are not committed: KafkaError names the first of them
        (retriable), after the others were committed."""
        group = self._require_group()
        offsets = dict(self._positions) if offsets is None else offsets
        if not offsets:
            return
        errors: dict[TopicPartition, KafkaError] = {}

        async def ask(conn: Connection, tps: list[TopicPartition]) -> None:
            request = m.OffsetCommitRequest(
                group,
                [
                    m.OffsetCommitTopic(
                        t, [m.OffsetCommitPartition(p, offsets[(t, p)], self.owner) for p in ps]
                    )
                    for t, ps in by_topic(tps).items()
                ],
            )
            response: m.OffsetCommitResponse = await conn.send(ApiKey.OFFSET_COMMIT, request)
            for topic in response.topics:
                for part in topic.partitions:
                    tp = (topic.name, part.partition_index)
                    if part.error_code:
                        errors[tp] = KafkaError(
                            part.error_code,
                            f"commit {tp[0]}-{tp[1]} at {offsets[tp]} for group {group!r}",
                        )
                    else:
                        self._committed_positions[tp] = offsets[tp]

        await self.cluster.per_leader(list(offsets), errors, ask)
        if errors:
            tp, error = next(iter(errors.items()))
            raise KafkaError(
                error.code,
                f"{len(errors)} of {len(offsets)} partition(s) not committed; "
                f"{tp[0]}-{tp[1]}: {error}",
            )

    async def committed_offsets(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        committed = await self.cluster.committed(self._require_group(), tps)
        return {tp: committed[tp][0] if tp in committed else None for tp in tps}

    async def _auto_commit_loop(self) -> None:
        """enable.auto.commit: commit consumed positions every auto.commit.interval.ms."""
        while True:
            await asyncio.sleep(self.auto_commit_interval_ms / 1000)
            await self._commit_if_moved()

    async def _commit_if_moved(self) -> None:
        moved = {
            tp: o for tp, o in self._positions.items() if self._committed_positions.get(tp) != o
        }
        if not moved:
            return
        try:
            await self.commit(moved)
        except (ConnectionClosed, KafkaError) as exc:
            self.log.warning("auto_commit_failed", error=str(exc))

    async def close(self) -> None:
        """Stop fetching; with auto-commit, commit what was consumed; close connections."""
        tasks = list(self._fetchers.values()) + ([self._auto_commit] if self._auto_commit else [])
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._fetchers.clear()
        self._auto_commit = None
        if self.enable_auto_commit:
            await self._commit_if_moved()
        for conn in self._fetch_conns.values():
            await conn.close()
        self._fetch_conns.clear()
        await self.cluster.close()
