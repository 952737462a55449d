"""Replica fetchers: a follower's long-poll fetch loop, one per leader broker it follows
(Kafka's ReplicaFetcherThread with num.replica.fetchers=1)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable

import structlog

from broker.config.broker_config import BrokerConfig
from broker.ops.metrics import FetcherStats
from broker.purgatory import Scheduler
from broker.replication.partition import Partition
from clients.connection import Connection, ConnectionClosed
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError, error_name
from protocol.records import CorruptRecordError, batch_base_offset, iter_batches, validate_batch

TopicPartition = tuple[str, int]


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker.

    Each round sends one Fetch v1 (``replica_id`` = this broker) asking for each partition
    from its log end offset; the leader holds it up to ``replica.fetch.wait.max.ms`` for
    ``replica.fetch.min.bytes``. The round's latency is recorded as total and *true*
    (total minus the leader's ``wait_time_ms``), with the wait itself.
    """

    def __init__(
        self,
        broker_id: int,
        source_broker: int,
        address: tuple[str, int],
        config: BrokerConfig,
        stats: FetcherStats,
        scheduler: Scheduler,
        receive_delay: Callable[[], float] | None = None,
    ) -> None:
        self.receive_delay = receive_delay
        self.scheduler = scheduler
        self.broker_id = broker_id
        self.source_broker = source_broker
        self.address = address
        self.config = config
        self.stats = stats
        self.partitions: dict[TopicPartition, Partition] = {}
        self.paused = False  # tests and fault injection hold a fetcher here
        self._wakeup = asyncio.Event()
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("replica_fetcher").bind(
            broker_id=broker_id, source_broker=source_broker
        )

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self._wakeup.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self.stats.lag.pop(key, None)

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            if not self.partitions or self.paused:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                ok = await self._fetch_once()
            except (ConnectionClosed, KafkaError) as exc:
                self.stats.errors += 1
                self.log.warning("replica_fetch_failed", error=str(exc))
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                ok = False
            if not ok:
                await asyncio.sleep(self.config["replica.fetch.backoff.ms"] / 1000)

    async def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            host, port = self.address
            self._conn = await Connection.open(
                host,
                port,
                client_id=f"replica-fetcher-{self.broker_id}",
                receive_delay=self.receive_delay,
                connect_timeout_s=self.config["metadata.push.timeout.ms"] / 1000,
            )
        return self._conn

    def _request(self) -> m.FetchRequest:
        partition_max = self.config["replica.fetch.max.bytes"]
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for (topic, index), partition in self.partitions.items():
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(index, partition.log.log_end_offset, partition_max)
            )
        return m.FetchRequest(
            self.broker_id,
            self.config["replica.fetch.wait.max.ms"],
            self.config["replica.fetch.min.bytes"],
            self.config["replica.fetch.response.max.bytes"],
            [m.FetchTopic(topic, parts) for topic, parts in by_topic.items()],
        )

    async def _fetch_once(self) -> bool:
        """One round; False if a partition had an error (the fetcher backs off)."""
        conn = await self._connection()
        request = self._request()
        started = self.scheduler.precise_s()
        response: m.FetchResponseV1 = await conn.send(
            ApiKey.FETCH,
            request,
            version=1,
            timeout_ms=request.max_wait_ms + conn.request_timeout_ms,
        )
        total = self.scheduler.precise_s() - started
        stats = self.stats
        stats.requests += 1
        stats.latency.observe(total, response.wait_time_ms / 1000)
        stats.samples.append((self.scheduler.wall_ms() / 1000, total, response.wait_time_ms / 1000))
        ok = True
        for topic in response.responses:
            for data in topic.partitions:
                partition = self.partitions.get((topic.topic, data.partition_index))
                if partition is not None:
                    ok &= self._process(partition, data)
        return ok

    def _process(self, partition: Partition, data: m.PartitionData) -> bool:
        log = partition.log
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Behind the leader's log start (restarted empty, or retention moved it), or
            # ahead of a leader that lost its log (in memory): start over from the leader's.
            self.log.warning(
                "replica_reset",
                topic=partition.topic,
                partition=partition.index,
                log_end_offset=log.log_end_offset,
                leader_log_start=data.log_start_offset,
            )
            log.reset_to(max(data.log_start_offset, 0))
            partition.high_watermark = log.log_end_offset
            return True
        if data.error_code:
            self.stats.errors += 1
            self.log.info(
                "replica_fetch_partition_error",
                topic=partition.topic,
                partition=partition.index,
                error=error_name(data.error_code),
            )
            return False
        if data.records:
            try:
                for batch in iter_batches(data.records):
                    stored = bytes(batch)
                    info = validate_batch(stored, verify_records=False)
                    base = batch_base_offset(stored)
                    if base + info.record_count <= log.log_end_offset:
                        continue  # already have it
                    log.append_as_follower(stored, info, base)
            except (CorruptRecordError, ValueError) as exc:
                self.stats.errors += 1
                self.log.error(
                    "replica_append_failed",
                    topic=partition.topic,
                    partition=partition.index,
                    error=str(exc),
                )
                return False
            self.stats.bytes += len(data.records)
        partition.follower_update_high_watermark(data.high_watermark)
        self.stats.lag[partition.key] = max(0, data.high_watermark - log.log_end_offset)
        return True


class ReplicaFetcherManager:
    """The fetchers of one broker, one per leader broker it follows partitions of."""

    def __init__(
        self,
        broker_id: int,
        members: dict[int, tuple[str, int]],
        config: BrokerConfig,
        stats_for: Callable[[int], FetcherStats],
        scheduler: Scheduler,
        receive_delay: Callable[[int], float] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.broker_id = broker_id
        self.members = members
        self.config = config
        self.stats_for = stats_for
        self.receive_delay = receive_delay  # seconds to hold bytes from a leader (faults)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[TopicPartition, int] = {}  # partition -> leader it is fetched from

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader (moving it from another fetcher if needed)."""
        leader = partition.leader_id
        current = self._following.get(partition.key)
        if current is not None and current != leader:
            self.unfollow(partition.key)
        if leader < 0 or leader not in self.members:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id,
                leader,
                self.members[leader],
                self.config,
                self.stats_for(leader),
                self.scheduler,
                None
                if self.receive_delay is None
                else functools.partial(self.receive_delay, leader),
            )
            self.fetchers[leader] = fetcher
            fetcher.start()
        fetcher.add(partition)
        self._following[partition.key] = leader

    def unfollow(self, key: TopicPartition) -> None:
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(key)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        self._following.clear()
