"""ReplicaManager: the partitions this broker holds, and produce/fetch/offsets against them."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import structlog

from broker.config.broker_config import BrokerConfig, validate_topic_configs
from broker.controller.metadata_cache import MetadataCache, PartitionChange
from broker.log.log import Log, LogConfig, OffsetOutOfRange
from broker.log.tiered.remote_log_manager import RemoteLogManager
from broker.log.tiered.remote_log_reader import ReaderQueueFull
from broker.log.tiered.remote_storage import RemoteFetchInfo
from broker.ops.metrics import BrokerMetrics
from broker.purgatory import DelayedOperationPurgatory, Periodic, Scheduler, SystemTimer
from broker.replication.delayed_fetch import DelayedFetch
from broker.replication.delayed_produce import DelayedProduce
from broker.replication.delayed_remote_fetch import DelayedRemoteFetch, replace_partitions
from broker.replication.partition import Partition
from broker.replication.replica_fetcher import ReplicaFetcherManager
from protocol import messages as m
from protocol.errors import ErrorCode, KafkaError, error_name
from protocol.records import CorruptRecordError, validate_batch

TopicPartition = tuple[str, int]
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes


AlterIsr = Callable[[m.AlterPartitionRequest], Awaitable[m.AlterPartitionResponse]]


class ReplicaManager:
    """Owns the partition replicas of this broker and the purgatories where requests wait:
    "Fetch" (long polls, consumers' and followers'), "Produce" (acks=-1 waiting for the
    ISR) and "RemoteFetch" (reads from the remote tier). Each purgatory has its own timer,
    as in Kafka, so its NumDelayedOperations is its timer's size. Leaders learn followers'
    progress from their fetches and move the high watermark; followers replicate through
    the ReplicaFetcherManager; the RemoteLogManager tiers the logs of tiered topics."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        metrics: BrokerMetrics,
        scheduler: Scheduler,
        alter_isr: AlterIsr,
        receive_delay: Callable[[int], float] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.metrics = metrics
        self.scheduler = scheduler
        self.alter_isr = alter_isr
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = self._purgatory(
            "Fetch", "fetch.purgatory.purge.interval.requests"
        )
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = self._purgatory(
            "Produce", "producer.purgatory.purge.interval.requests"
        )
        self.remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] = (
            self._purgatory("RemoteFetch", "fetch.purgatory.purge.interval.requests")
        )
        self.remote_log_manager = RemoteLogManager(config, self.partitions.values, scheduler)
        metrics.remote_log_manager = self.remote_log_manager
        self.fetchers = ReplicaFetcherManager(
            self.broker_id,
            metadata.members,
            config,
            metrics.fetcher_stats,
            scheduler,
            receive_delay,
        )
        self._tasks: set[asyncio.Future[None]] = set()
        # Kafka's "isr-expiration" and "kafka-log-retention" scheduled tasks.
        self.isr_expiration = Periodic(
            scheduler, lambda: config["replica.lag.time.max.ms"] // 2, self.maybe_shrink_isr
        )
        self.log_retention = Periodic(
            scheduler,
            lambda: config["log.retention.check.interval.ms"],
            lambda: self.delete_old_segments(scheduler.wall_ms()),
        )
        self.log = structlog.get_logger("replica_manager").bind(broker_id=self.broker_id)

    def waited_ms(self, since_s: float) -> int:
        """Whole milliseconds since ``since_s`` (the scheduler's precise clock), rounded
        down: a wait reported to a client is never more than the real one (a nanosecond
        of slack absorbs float rounding)."""
        return int((self.scheduler.precise_s() - since_s) * 1000 + 1e-6)

    def _purgatory(self, name: str, purge_interval: str) -> DelayedOperationPurgatory[Any]:
        """A purgatory with its own timer, in the metrics."""
        purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            name,
            SystemTimer(self.scheduler),
            purge_interval=self.config[purge_interval],
            watcher_removal=self.config["purgatory.watcher.removal"],
        )
        self.metrics.add_purgatory(purgatory)
        return purgatory

    def start(self) -> None:
        self.isr_expiration.start()
        self.log_retention.start()
        self.remote_log_manager.start()

    def lag_time_changed(self) -> None:
        """replica.lag.time.max.ms changed: check on the new schedule from now on."""
        self.isr_expiration.restart()

    async def shutdown(self) -> None:
        self.isr_expiration.cancel()
        self.log_retention.cancel()
        for task in list(self._tasks):
            task.cancel()
        await self.fetchers.shutdown()
        await self.remote_log_manager.shutdown()
        self.fetch_purgatory.cancel_all()
        self.produce_purgatory.cancel_all()
        self.remote_fetch_purgatory.cancel_all()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- metadata ------------------------------------------------------------------------

    def apply(self, changes: Iterable[PartitionChange]) -> None:
        """Apply metadata changes: take leadership or follow, start or stop replicating;
        requests waiting on a changed partition re-check at once (they complete if this
        broker no longer leads it or no longer has it)."""
        changes = list(changes)
        now = self.scheduler.now_ms()
        defaults = self.config.topic_defaults()
        for change in changes:
            key = (change.topic, change.partition)
            existing = self.partitions.get(key)
            state = change.state
            if state is None or self.broker_id not in state.replicas:
                if existing is not None:
                    del self.partitions[key]
                    self.fetchers.unfollow(key)
                    self.log.info(
                        "partition_removed", topic=change.topic, partition=change.partition
                    )
                continue
            partition = existing
            if partition is None or partition.topic_id != change.topic_id:
                configs = {**defaults, **validate_topic_configs(change.configs)}
                partition = Partition(
                    change.topic,
                    change.partition,
                    change.topic_id,
                    self.broker_id,
                    Log(LogConfig.from_topic_configs(configs)),
                    int(configs["max.message.bytes"]),
                    int(configs["min.insync.replicas"]),
                )
                self.partitions[key] = partition
            if state.leader_id == self.broker_id:
                self.fetchers.unfollow(key)
                partition.make_leader(
                    state.leader_epoch, state.partition_epoch, state.replicas, state.isr, now
                )
                partition.maybe_increment_high_watermark()
            else:
                partition.make_follower(
                    state.leader_id,
                    state.leader_epoch,
                    state.partition_epoch,
                    state.replicas,
                    state.isr,
                )
                self.fetchers.follow(partition)
        for change in changes:
            self._check_waiting((change.topic, change.partition))

    def _check_waiting(self, key: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.remote_fetch_purgatory.check_and_complete(key)

    def leader_partition(self, topic: str, index: int) -> Partition | ErrorCode:
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.is_leader:
            return partition
        if self.metadata.partition(topic, index) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    # -- produce -------------------------------------------------------------------------

    def append_records(
        self, request: m.ProduceRequest
    ) -> tuple[m.ProduceResponse | asyncio.Future[m.ProduceResponse], int, list[str]]:
        """Append every partition's batch; with acks=-1, wait in the Produce purgatory until
        the ISR has what was appended (unless it already does).

        Returns the response (or its future), the number of partitions that failed before
        waiting, and the topics that were unknown (candidates for auto-creation)."""
        responses = []
        failed = 0
        unknown: list[str] = []
        acks = request.acks
        waiting: dict[TopicPartition, tuple[m.PartitionProduceResponse, int]] = {}
        for topic in request.topics:
            parts = []
            for data in topic.partitions:
                if acks in (-1, 0, 1):
                    result = self._append(topic.name, data, acks, waiting)
                else:
                    result = m.PartitionProduceResponse(
                        data.index,
                        ErrorCode.INVALID_REQUIRED_ACKS,
                        error_message=f"acks must be -1, 0 or 1, got {acks}",
                    )
                if result.error_code:
                    failed += 1
                    self.metrics.record_error("Produce", result.error_code)
                    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        unknown.append(topic.name)
                parts.append(result)
            responses.append(m.TopicProduceResponse(topic.name, parts))
        response = m.ProduceResponse(responses)
        if waiting:
            operation = DelayedProduce(request.timeout_ms, response, waiting, self)
            if not self.produce_purgatory.try_complete_else_watch(operation, list(waiting)):
                return operation.response, failed, unknown
        return response, failed, unknown

    def _append(
        self,
        topic: str,
        data: m.PartitionProduceData,
        acks: int,
        waiting: dict[TopicPartition, tuple[m.PartitionProduceResponse, int]],
    ) -> m.PartitionProduceResponse:
        partition = self.leader_partition(topic, data.index)
        if isinstance(partition, ErrorCode):
            return m.PartitionProduceResponse(data.index, partition)
        size = len(data.records)
        if size > partition.max_message_bytes:
            return m.PartitionProduceResponse(
                data.index,
                ErrorCode.MESSAGE_TOO_LARGE,
                error_message=f"batch of {size} bytes exceeds max.message.bytes "
                f"{partition.max_message_bytes}",
            )
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            return m.PartitionProduceResponse(
                data.index,
                ErrorCode.NOT_ENOUGH_REPLICAS,
                error_message=f"{len(partition.isr)} in-sync replicas {partition.isr}, "
                f"min.insync.replicas is {partition.min_insync_replicas}",
            )
        try:
            info = validate_batch(data.records)
        except CorruptRecordError as exc:
            return m.PartitionProduceResponse(
                data.index, ErrorCode.CORRUPT_MESSAGE, error_message=str(exc)
            )
        log = partition.log
        base = log.append(data.records, info, partition.leader_epoch)
        metrics = self.metrics
        metrics.bytes_in += size
        metrics.messages_in += info.record_count
        key = (topic, data.index)
        if partition.maybe_increment_high_watermark():  # the leader alone in the ISR
            self.produce_purgatory.check_and_complete(key)
        # The log end moved: parked follower (and, if the HW moved, consumer) fetches wake.
        self.fetch_purgatory.check_and_complete(key)
        entry = m.PartitionProduceResponse(
            data.index, ErrorCode.NONE, base, -1, log.log_start_offset
        )
        if acks == -1 and partition.high_watermark < log.log_end_offset:
            waiting[key] = (entry, log.log_end_offset)
        return entry

    # -- replication ----------------------------------------------------------------------

    def _follower_fetched(self, replica_id: int, request: m.FetchRequest) -> None:
        """A follower's fetch offsets are its log end offsets: record them, move the HW,
        and let caught-up followers into the ISR."""
        now = self.scheduler.now_ms()
        for topic in request.topics:
            for fp in topic.partitions:
                partition = self.partitions.get((topic.topic, fp.partition))
                if (
                    partition is None
                    or not partition.is_leader
                    or replica_id not in partition.followers
                ):
                    continue
                partition.record_follower_fetch(replica_id, fp.fetch_offset, now)
                if partition.maybe_increment_high_watermark():
                    self._check_waiting(partition.key)
                joining = partition.caught_up_outside_isr()
                if joining and not partition.isr_change_pending:
                    self._change_isr(partition, partition.isr + joining)

    def delete_old_segments(self, now_ms: int) -> None:
        """Time-based retention of logs without tiered storage (the RemoteLogManager
        applies it to tiered ones); ``now_ms`` is wall-clock time."""
        for partition in list(self.partitions.values()):
            if not partition.log.tiered:
                partition.log.delete_old_segments(now_ms)

    def maybe_shrink_isr(self) -> None:
        """Drop followers that have not caught up within replica.lag.time.max.ms."""
        now = self.scheduler.now_ms()
        lag_ms = self.config["replica.lag.time.max.ms"]
        for partition in self.partitions.values():
            if not partition.is_leader or partition.isr_change_pending:
                continue
            lagging = partition.out_of_sync_followers(now, lag_ms)
            if lagging:
                self.log.info(
                    "isr_shrinking",
                    topic=partition.topic,
                    partition=partition.index,
                    lagging=lagging,
                )
                self._change_isr(partition, [r for r in partition.isr if r not in lagging])

    def _change_isr(self, partition: Partition, new_isr: list[int]) -> None:
        partition.isr_change_pending = True
        self._spawn(self._alter_isr(partition, new_isr))

    async def _alter_isr(self, partition: Partition, new_isr: list[int]) -> None:
        request = m.AlterPartitionRequest(
            self.broker_id,
            [
                m.AlterPartitionTopic(
                    partition.topic,
                    [
                        m.AlterPartitionPartition(
                            partition.index,
                            partition.leader_epoch,
                            new_isr,
                            partition.partition_epoch,
                        )
                    ],
                )
            ],
        )
        old = list(partition.isr)
        try:
            response = await self.alter_isr(request)
        except (ConnectionError, KafkaError) as exc:
            self.log.warning(
                "alter_partition_failed",
                topic=partition.topic,
                partition=partition.index,
                error=str(exc),
            )
            return
        finally:
            partition.isr_change_pending = False
        result = response.topics[0].partitions[0]
        if result.error_code:
            self.log.warning(
                "alter_partition_refused",
                topic=partition.topic,
                partition=partition.index,
                error=error_name(result.error_code),
            )
            return
        if self.partitions.get(partition.key) is not partition or not partition.is_leader:
            return
        if result.partition_epoch >= partition.partition_epoch:
            partition.isr = list(result.isr)
            partition.partition_epoch = result.partition_epoch
        self.metrics.isr_shrinks += len(set(old) - set(result.isr))
        self.metrics.isr_expands += len(set(result.isr) - set(old))
        partition.maybe_increment_high_watermark()
        self._check_waiting(partition.key)

    # -- fetch ---------------------------------------------------------------------------

    def fetch_messages(
        self, request: m.FetchRequest, version: int
    ) -> m.FetchResponseV0 | asyncio.Future[m.FetchResponseV0]:
        """Answer a fetch now, or park it in a purgatory.

        A consumer fetch with partitions below their local log start (in the remote tier)
        submits their reads and waits in the RemoteFetch purgatory. Otherwise it is
        answered at once when it may not wait (``max_wait_ms`` <= 0), asks for nothing,
        already has ``min_bytes``, or hit an error; else a DelayedFetch waits for data.
        A follower's fetch first tells the leader how far that follower got.
        """
        if request.replica_id >= 0:
            self._follower_fetched(request.replica_id, request)
        responses, readable, errored, remote = self._read(request)
        if remote:
            return self._fetch_remote(responses, remote, version)
        if (
            request.max_wait_ms <= 0
            or not request.topics
            or readable >= request.min_bytes
            or errored
        ):
            return self.build_fetch_response(responses, version, 0)
        operation = DelayedFetch(request, version, self, self.scheduler.precise_s())
        keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
        if self.fetch_purgatory.try_complete_else_watch(operation, keys):
            return operation.response.result()
        return operation.response

    def _fetch_remote(
        self,
        responses: list[m.FetchableTopicResponse],
        remote: list[RemoteFetchInfo],
        version: int,
    ) -> m.FetchResponseV0 | asyncio.Future[m.FetchResponseV0]:
        """Submit the remote reads; a partition whose read the pool refuses (queue full) is
        answered with an error at once, as in Kafka. The rest waits in RemoteFetch."""
        readers = self.remote_log_manager.readers
        reads: dict[TopicPartition, asyncio.Future[bytes]] = {}
        refused: dict[TopicPartition, m.PartitionData] = {}
        for info in remote:
            key = (info.topic, info.partition)
            try:
                read = readers.submit(info)
            except ReaderQueueFull as exc:
                self.log.warning(
                    "remote_fetch_refused",
                    topic=info.topic,
                    partition=info.partition,
                    reason=str(exc),
                )
                refused[key] = m.PartitionData(
                    info.partition, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, b""
                )
                continue
            reads[key] = read
        if refused:
            responses = replace_partitions(responses, refused)
        if not reads:
            return self.build_fetch_response(responses, version, 0)
        operation = DelayedRemoteFetch(
            self.config["remote.fetch.max.wait.ms"],
            responses,
            reads,
            version,
            self,
            self.scheduler.precise_s(),
        )
        if self.remote_fetch_purgatory.try_complete_else_watch(operation, list(reads)):
            return operation.response.result()
        for key, read in reads.items():
            read.add_done_callback(functools.partial(self._remote_read_done, key))
        return operation.response

    def _remote_read_done(self, key: TopicPartition, _: asyncio.Future[bytes]) -> None:
        self.remote_fetch_purgatory.check_and_complete(key)

    def fetch_response(
        self, request: m.FetchRequest, version: int, wait_ms: int
    ) -> m.FetchResponseV0:
        """Read again for a fetch that waited ``wait_ms`` in the Fetch purgatory (a
        partition whose offset moved to the remote tier meanwhile is answered empty; the
        client's next fetch reads it remotely)."""
        responses, _, _, _ = self._read(request)
        return self.build_fetch_response(responses, version, wait_ms)

    def fetch_expired(self, from_follower: bool) -> None:
        self.metrics.fetch_expirations["follower" if from_follower else "consumer"] += 1

    def build_fetch_response(
        self, responses: list[m.FetchableTopicResponse], version: int, wait_ms: int
    ) -> m.FetchResponseV0:
        for topic in responses:
            for part in topic.partitions:
                if part.error_code:
                    self.metrics.record_error("Fetch", part.error_code)
        if version == 0:
            return m.FetchResponseV0(responses)
        return m.FetchResponseV1(responses, wait_time_ms=wait_ms)

    def _read(
        self, request: m.FetchRequest
    ) -> tuple[list[m.FetchableTopicResponse], int, bool, list[RemoteFetchInfo]]:
        """Read every requested partition once: (responses, record bytes, any error, remote
        reads to make).

        ``max_bytes`` bounds the whole response, ``partition_max_bytes`` each partition;
        the first batch of the response is returned even when it alone exceeds them
        (KIP-74), so a consumer never gets stuck behind a large batch. Consumers read up to
        the high watermark, followers up to the log end. A consumer's offset in the remote
        tier yields a remote read (of up to ``partition_max_bytes``) and an empty entry for
        now; a follower's is out of range, with the *local* log start (it replicates only
        the local tier and starts over there).
        """
        follower = request.replica_id >= 0
        remaining = request.max_bytes
        out = []
        remote: list[RemoteFetchInfo] = []
        sent = 0
        errored = False
        for topic in request.topics:
            parts = []
            for fp in topic.partitions:
                partition = self.leader_partition(topic.topic, fp.partition)
                if isinstance(partition, ErrorCode):
                    errored = True
                    parts.append(m.PartitionData(fp.partition, partition, -1, -1, b""))
                    continue
                log = partition.log
                hw = partition.high_watermark
                if not follower and log.in_remote_tier(fp.fetch_offset):
                    info = self.remote_log_manager.remote_fetch_info(
                        partition, fp.fetch_offset, min(fp.partition_max_bytes, request.max_bytes)
                    )
                    if info is not None:
                        remote.append(info)
                        parts.append(
                            m.PartitionData(
                                fp.partition, ErrorCode.NONE, hw, log.log_start_offset, b""
                            )
                        )
                        continue
                limit = max(min(fp.partition_max_bytes, remaining), 0)
                try:
                    batches = log.read(
                        fp.fetch_offset,
                        limit if sent else max(limit, 1),
                        log.log_end_offset if follower else hw,
                    )
                except OffsetOutOfRange:
                    errored = True
                    parts.append(
                        m.PartitionData(
                            fp.partition,
                            ErrorCode.OFFSET_OUT_OF_RANGE,
                            hw,
                            log.local_log_start_offset if follower else log.log_start_offset,
                            b"",
                        )
                    )
                    continue
                if batches and sent and sum(len(b) for b in batches) > limit:
                    batches = []
                records = b"".join(batches) if batches else b""
                sent += len(records)
                remaining -= len(records)
                parts.append(
                    m.PartitionData(fp.partition, ErrorCode.NONE, hw, log.log_start_offset, records)
                )
            out.append(m.FetchableTopicResponse(topic.topic, parts))
        self.metrics.bytes_out += sent
        return out, sent, errored, remote

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                partition = self.leader_partition(topic.name, p.partition_index)
                if isinstance(partition, ErrorCode):
                    parts.append(m.ListOffsetsPartitionResponse(p.partition_index, partition))
                    continue
                log = partition.log
                if p.timestamp == m.LATEST_TIMESTAMP:
                    parts.append(
                        m.ListOffsetsPartitionResponse(
                            p.partition_index, 0, -1, partition.high_watermark
                        )
                    )
                elif p.timestamp == m.EARLIEST_TIMESTAMP:
                    parts.append(
                        m.ListOffsetsPartitionResponse(
                            p.partition_index, 0, -1, log.log_start_offset
                        )
                    )
                elif p.timestamp < 0:
                    parts.append(
                        m.ListOffsetsPartitionResponse(p.partition_index, ErrorCode.INVALID_REQUEST)
                    )
                else:
                    found = log.offset_for_timestamp(p.timestamp)
                    offset, ts = found if found is not None else (-1, -1)
                    parts.append(m.ListOffsetsPartitionResponse(p.partition_index, 0, ts, offset))
            topics.append(m.ListOffsetsTopicResponse(topic.name, parts))
        return m.ListOffsetsResponse(topics)

    def commit_offsets(self, request: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
        """Store committed offsets with the partition's leader (in memory)."""
        group_ok = bool(request.group_id) and len(request.group_id) <= 249
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                if not group_ok:
                    code: int = ErrorCode.INVALID_GROUP_ID
                elif (
                    p.committed_metadata is not None
                    and len(p.committed_metadata) > MAX_METADATA_BYTES
                ):
                    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    partition = self.leader_partition(topic.name, p.partition_index)
                    if isinstance(partition, ErrorCode):
                        code = partition
                    elif not 0 <= p.committed_offset <= partition.log.log_end_offset:
                        code = ErrorCode.OFFSET_OUT_OF_RANGE
                    else:
                        partition.committed[request.group_id] = (
                            p.committed_offset,
                            p.committed_metadata,
                        )
                        code = ErrorCode.NONE
                parts.append(m.OffsetCommitPartitionResponse(p.partition_index, code))
            topics.append(m.OffsetCommitTopicResponse(topic.name, parts))
        return m.OffsetCommitResponse(topics)

    def fetch_offsets(self, request: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        group_ok = bool(request.group_id) and len(request.group_id) <= 249
        topics = []
        for topic in request.topics:
            parts = []
            for index in topic.partition_indexes:
                offset, meta, code = -1, None, ErrorCode.NONE
                if not group_ok:
                    code = ErrorCode.INVALID_GROUP_ID
                else:
                    partition = self.leader_partition(topic.name, index)
                    if isinstance(partition, ErrorCode):
                        code = partition
                    elif request.group_id in partition.committed:
                        offset, meta = partition.committed[request.group_id]
                parts.append(m.OffsetFetchPartitionResponse(index, offset, meta, code))
            topics.append(m.OffsetFetchTopicResponse(topic.name, parts))
        return m.OffsetFetchResponse(topics)
