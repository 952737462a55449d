"""ReplicaManager: the partitions this broker holds, and produce/fetch/offsets against them."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import Any, cast

import structlog

from purgatory.broker.config.broker_config import BrokerConfig, IntConfig, validate_topic_configs
from purgatory.broker.controller.internal_topics import INTERNAL_TOPICS
from purgatory.broker.controller.metadata_cache import (
    MetadataCache,
    PartitionChange,
)
from purgatory.broker.log.cleaner.log_cleaner import LogCleaner
from purgatory.broker.log.leader_epoch_cache import UNDEFINED_EPOCH_END, EpochEndOffset
from purgatory.broker.log.log import Log, LogConfig
from purgatory.broker.log.log_validator import LogValidator
from purgatory.broker.log.tiered.remote_log_manager import RemoteLogManager
from purgatory.broker.log.tiered.remote_log_reader import ReaderQueueFull
from purgatory.broker.log.tiered.remote_storage import RemoteFetchInfo
from purgatory.broker.ops.metrics import BrokerMetrics, purgatory_families
from purgatory.broker.purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    Periodic,
    Scheduler,
    SystemTimer,
    WatcherRemoval,
)
from purgatory.broker.replication.delayed_delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsOutcome,
    DeleteRecordsResult,
)
from purgatory.broker.replication.delayed_fetch import DelayedFetch
from purgatory.broker.replication.delayed_produce import (
    DelayedProduce,
    PartitionResponse,
    ProducePartitionStatus,
    ProduceResult,
)
from purgatory.broker.replication.delayed_remote_fetch import DelayedRemoteFetch, replace_partitions
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    TopicPartition,
    error_data,
)
from purgatory.broker.replication.isr_changes import AlterIsr, IsrChanges
from purgatory.broker.replication.log_memory_budget import LogMemoryBudget
from purgatory.broker.replication.log_read import LogReadResult, read_from_local_log
from purgatory.broker.replication.partition import (
    AppendRefused,
    DeleteRecordsRefused,
    Partition,
)
from purgatory.broker.replication.replica_fetcher import LeaderEndPoint, ReplicaFetcherManager
from purgatory.broker.replication.replication_metrics import ReplicationMetrics
from purgatory.protocol.errors import ErrorCode

# Refusals Kafka answers without the partition's log start offset (UNKNOWN_LOG_APPEND_INFO).
_NO_LOG_INFO = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE}
)


class ReplicaManager:
    """Owns the partition replicas of this broker and the purgatories where requests wait:
    "Fetch" (long polls, consumers' and followers'), "Produce" (acks=-1 waiting for the
    ISR), "RemoteFetch" (reads from the remote tier) and "DeleteRecords" (deletions
    waiting for the replicas' log starts). Each purgatory has its own timer,
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
        leader_endpoint: Callable[[int], LeaderEndPoint],
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.metrics = metrics
        self.scheduler = scheduler
        self.partitions: dict[TopicPartition, Partition] = {}
        self._configs: dict[str, dict[str, Any]] = {}  # each topic's own configs, as set
        # Told (partition, leader epoch, leads it now) of every role a change gives a
        # replica here, or takes away (Kafka's onLeadershipChange: the group coordinator).
        self.leadership_listeners: list[Callable[[TopicPartition, int, bool], None]] = []
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = self._purgatory(
            "Fetch", "fetch.purgatory.purge.interval.requests"
        )
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = self._purgatory(
            "Produce", "producer.purgatory.purge.interval.requests"
        )
        self.remote_fetch_purgatory: DelayedOperationPurgatory[DelayedRemoteFetch] = (
            self._purgatory("RemoteFetch", "fetch.purgatory.purge.interval.requests")
        )
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            self._purgatory("DeleteRecords", "delete.records.purgatory.purge.interval.requests")
        )
        # KIP-932's share consumers' fetches waiting for records to acquire (Kafka's
        # delayedShareFetchPurgatory): woken with the Fetch purgatory, and by their groups'
        # records becoming available again (broker/share).
        self.share_fetch_purgatory: DelayedOperationPurgatory[Any] = self._purgatory(
            "ShareFetch", "fetch.purgatory.purge.interval.requests"
        )
        # The operations parked in those four, by the answer a connection awaits: one
        # whose connection closes completes at once (``abandon``). A dict entry, not a
        # callback on the future: no object more per operation for the cycle collector.
        self.parked: dict[asyncio.Future[Any], DelayedOperation] = {}
        self.remote_log_manager = RemoteLogManager(config, self.partitions.values, scheduler)
        # Every replica's log is cleaned here, led or followed (Kafka's LogCleaner); a log
        # is known by its partition and the Log object (a topic made again is a new log).
        self.log_cleaner = LogCleaner(
            config,
            scheduler,
            lambda: (
                ((p.key, id(p.log)), p.log, p.high_watermark) for p in self.partitions.values()
            ),
        )
        self.fetchers = ReplicaFetcherManager(
            self.broker_id, metadata.members, config, scheduler, leader_endpoint, broker_epoch
        )
        self.replication_metrics = ReplicationMetrics(self.partitions.values)
        self.memory_budget = LogMemoryBudget(
            config,
            self.partitions.values,
            structlog.get_logger("log_memory").bind(broker_id=self.broker_id),
        )
        purgatories = (
            self.fetch_purgatory,
            self.produce_purgatory,
            self.remote_fetch_purgatory,
            self.delete_records_purgatory,
            self.share_fetch_purgatory,
        )
        for source in (
            self.replication_metrics.collect,
            self.fetchers.collect_metrics,
            lambda: purgatory_families(purgatories),
            self.remote_log_manager.collect_metrics,
            self.log_cleaner.collect_metrics,
            self.memory_budget.collect,
        ):
            metrics.register(source)
        self.isr_changes = IsrChanges(
            self.broker_id,
            alter_isr,
            self._still_leads,
            self._isr_changed,
            self.replication_metrics,
        )
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

    def _purgatory(self, name: str, purge_interval: IntConfig) -> DelayedOperationPurgatory[Any]:
        """A purgatory with its own timer."""
        # One of the config's choices (checked at start; the purgatory checks it again).
        removal = cast(WatcherRemoval, self.config["purgatory.watcher.removal"])
        purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            name,
            SystemTimer(self.scheduler),
            purge_interval=self.config[purge_interval],
            watcher_removal=removal,
        )
        return purgatory

    def start(self) -> None:
        self.isr_expiration.start()
        self.log_retention.start()
        self.remote_log_manager.start()
        self.log_cleaner.start()

    def lag_time_changed(self) -> None:
        """replica.lag.time.max.ms changed: check on the new schedule from now on."""
        self.isr_expiration.restart()

    async def shutdown(self) -> None:
        self.isr_expiration.cancel()
        self.log_retention.cancel()
        self.log_cleaner.stop()
        self.isr_changes.shutdown()
        await self.fetchers.shutdown()
        await self.remote_log_manager.shutdown()
        self.fetch_purgatory.cancel_all()
        self.produce_purgatory.cancel_all()
        self.remote_fetch_purgatory.cancel_all()
        self.delete_records_purgatory.cancel_all()
        self.share_fetch_purgatory.cancel_all()

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
                    existing.log.release()
                    self.fetchers.unfollow(key)
                    self._leadership(key, existing.leader_epoch, False)
                    self.log.info(
                        "partition_removed", topic=change.topic, partition=change.partition
                    )
                continue
            partition = existing
            if partition is None or partition.topic_id != change.topic_id:
                if partition is not None:  # a topic deleted and made again: a new log
                    partition.log.release()
                configs = {**defaults, **validate_topic_configs(change.configs)}
                partition = Partition(
                    change.topic,
                    change.partition,
                    change.topic_id,
                    self.broker_id,
                    Log(LogConfig.from_topic_configs(configs), self.memory_budget.memory),
                    int(configs["max.message.bytes"]),
                    int(configs["min.insync.replicas"]),
                    LogValidator.for_topic(configs, self.config["socket.request.max.bytes"]),
                    bool(configs["unclean.leader.election.enable"]),
                )
                self._configs[change.topic] = dict(change.configs)
                self.partitions[key] = partition
            if state.leader_id == self.broker_id:
                self.fetchers.unfollow(key)
                partition.make_leader(
                    state.leader_epoch, state.partition_epoch, state.replicas, state.isr, now
                )
                partition.maybe_increment_high_watermark()
                self._leadership(key, state.leader_epoch, True)
            else:
                partition.make_follower(
                    state.leader_id,
                    state.leader_epoch,
                    state.partition_epoch,
                    state.replicas,
                    state.isr,
                )
                self.fetchers.follow(partition)
                self._leadership(key, state.leader_epoch, False)
        for change in changes:
            self._check_waiting((change.topic, change.partition))

    def reconfigure(self, topic_configs: dict[str, dict[str, Any]] | None = None) -> None:
        """A topic's configs changed (``topic_configs``: its own, by topic), or the broker's
        defaults did (None: every partition): each replica of it obeys them from now
        (Kafka's LogManager.updateTopicConfig), its waiting requests re-checked."""
        defaults = self.config.topic_defaults()
        if topic_configs is not None:
            self._configs.update(topic_configs)
        for key, partition in self.partitions.items():
            if topic_configs is not None and key[0] not in topic_configs:
                continue
            configs = {**defaults, **validate_topic_configs(self._configs.get(key[0], {}))}
            partition.log.config = LogConfig.from_topic_configs(configs)
            partition.max_message_bytes = int(configs["max.message.bytes"])
            partition.min_insync_replicas = int(configs["min.insync.replicas"])
            partition.validator = LogValidator.for_topic(
                configs, self.config["socket.request.max.bytes"]
            )
            partition.unclean_allowed = bool(configs["unclean.leader.election.enable"])
            self._check_waiting(key)

    def _leadership(self, key: TopicPartition, leader_epoch: int, leads: bool) -> None:
        for listener in self.leadership_listeners:
            listener(key, leader_epoch, leads)

    def _check_waiting(self, key: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.check_and_complete(key)
        self.remote_fetch_purgatory.check_and_complete(key)
        self.delete_records_purgatory.check_and_complete(key)
        self.share_fetch_purgatory.check_and_complete(key)

    def leader_partition(
        self, topic: str, index: int, current_leader_epoch: int = -1
    ) -> Partition | ErrorCode:
        """The partition if this broker leads it (in the asker's ``current_leader_epoch``,
        when one is given), else why not: FENCED_LEADER_EPOCH when the asker knows an
        older epoch, UNKNOWN_LEADER_EPOCH when it knows a newer one than this broker (its
        metadata is ahead of ours), NOT_LEADER_OR_FOLLOWER when the epochs agree but this
        replica follows. As Kafka's ``Partition.getLocalLog``: the epoch is checked first,
        on a follower's replica too; only -1 means none given (another negative epoch is
        an old one)."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            if current_leader_epoch != -1 and current_leader_epoch != partition.leader_epoch:
                if current_leader_epoch < partition.leader_epoch:
                    return ErrorCode.FENCED_LEADER_EPOCH
                return ErrorCode.UNKNOWN_LEADER_EPOCH
            if partition.is_leader:
                return partition
        if self.metadata.partition(topic, index) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    # -- produce -------------------------------------------------------------------------

    def append_records(
        self,
        timeout_ms: int,
        acks: int,
        entries: list[tuple[TopicPartition, bytes]],
        kafka_batches_only: bool = False,
        internal_topics_allowed: bool = False,
    ) -> tuple[ProduceResult, asyncio.Future[ProduceResult] | None]:
        """Append every partition's batch, in order; with acks=-1, wait in the Produce
        purgatory until the ISR has what was appended (unless it already does).
        ``kafka_batches_only``: refuse batches other than Kafka's v2 (the Kafka listener's
        Produce v3+, as in Kafka) with INVALID_RECORD. Internal topics
        (``__consumer_offsets``) take only the coordinator's appends
        (``internal_topics_allowed``); clients get INVALID_TOPIC_EXCEPTION.

        Returns one response per entry, and, while a produce waits, a future that resolves
        to the same responses once each holds its final outcome."""
        responses: ProduceResult = []
        waiting: dict[TopicPartition, ProducePartitionStatus] = {}
        for key, records in entries:
            if key[0] in INTERNAL_TOPICS and not internal_topics_allowed:
                response = PartitionResponse(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    error_message=f"cannot append to internal topic {key[0]}",
                )
            elif acks in (-1, 0, 1):
                response = self._append(key, records, acks, waiting, kafka_batches_only)
            else:
                response = PartitionResponse(
                    ErrorCode.INVALID_REQUIRED_ACKS,
                    error_message=f"acks must be -1, 0 or 1, got {acks}",
                )
            if response.error:
                self.metrics.record_error("Produce", response.error)
            responses.append((key, response))
        return responses, self._wait_for_isr(timeout_ms, waiting, responses)

    def _wait_for_isr(
        self,
        timeout_ms: int,
        waiting: dict[TopicPartition, ProducePartitionStatus],
        responses: ProduceResult,
    ) -> asyncio.Future[ProduceResult] | None:
        """A DelayedProduce for the partitions ``waiting`` for their ISR (none: None),
        parked unless it completes at once."""
        if not waiting:
            return None
        operation = DelayedProduce(timeout_ms, waiting, responses, self)
        if self.produce_purgatory.try_complete_else_watch(operation, tuple(waiting)):
            return None
        self.parked[operation.done] = operation
        return operation.done

    def _append(
        self,
        key: TopicPartition,
        records: bytes,
        acks: int,
        waiting: dict[TopicPartition, ProducePartitionStatus],
        kafka_batches_only: bool = False,
    ) -> PartitionResponse:
        partition = self.leader_partition(*key)
        if isinstance(partition, ErrorCode):
            return PartitionResponse(partition)
        try:
            appended = partition.append_records_to_leader(
                records, acks, self.scheduler.wall_ms(), kafka_batches_only
            )
        except AppendRefused as exc:
            # As Kafka's ReplicaManager: a refusal carries the log start offset, except
            # the batch-size and CRC ones it answers with no log information at all.
            log_start = -1 if exc.code in _NO_LOG_INFO else partition.log.log_start_offset
            return PartitionResponse(
                exc.code,
                log_start_offset=log_start,
                error_message=exc.message,
                record_errors=exc.record_errors,
            )
        response = PartitionResponse(
            ErrorCode.NONE,
            appended.base_offset,
            appended.log_append_time_ms,
            partition.log.log_start_offset,
        )
        if appended.records:  # appended now, not a retry
            metrics = self.metrics
            metrics.bytes_in += len(records)
            metrics.messages_in += appended.records
            if partition.maybe_increment_high_watermark():  # the leader alone in the ISR
                self.produce_purgatory.check_and_complete(key)
            # The log end moved: parked follower (and, if the HW moved, consumer) fetches
            # wake.
            self.fetch_purgatory.check_and_complete(key)
            self.share_fetch_purgatory.check_and_complete(key)
        if acks == -1 and partition.high_watermark < appended.required_offset:
            waiting[key] = ProducePartitionStatus(appended.required_offset, response)
        return response

    # -- transaction markers --------------------------------------------------------------

    def append_txn_markers(
        self, timeout_ms: int, markers: list[tuple[TopicPartition, int, int, bool, int]]
    ) -> tuple[ProduceResult, asyncio.Future[ProduceResult] | None]:
        """Write each (partition, producer id, producer epoch, commit, coordinator epoch)
        transaction marker on the partition's leader here (Kafka's WriteTxnMarkers:
        appendRecords with AppendOrigin.COORDINATOR and acks=-1), internal topics
        included; shaped like ``append_records``: one response per marker, and a future
        while some wait in the Produce purgatory for the ISR. Errors per partition:
        NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, then those of a waiting
        produce (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND). Markers of several
        producers for one partition are appended in order; each is answered as the last
        of them is (the high watermark passing it passes the others)."""
        responses: ProduceResult = []
        waiting: dict[TopicPartition, ProducePartitionStatus] = {}
        # (an earlier marker's response, the later one of its partition that waits for both)
        follows: list[tuple[PartitionResponse, PartitionResponse]] = []
        now = self.scheduler.wall_ms()
        for key, producer_id, producer_epoch, commit, coordinator_epoch in markers:
            partition = self.leader_partition(*key)
            if isinstance(partition, ErrorCode):
                response = PartitionResponse(partition)
            else:
                response = self._append_marker(
                    partition, (producer_id, producer_epoch, commit, coordinator_epoch), now
                )
                if not response.error and partition.high_watermark < partition.log.log_end_offset:
                    earlier = waiting.get(key)
                    if earlier is not None:
                        follows.append((earlier.response, response))
                    waiting[key] = ProducePartitionStatus(partition.log.log_end_offset, response)
            if response.error:
                self.metrics.record_error("WriteTxnMarkers", response.error)
            responses.append((key, response))
        done = self._wait_for_isr(timeout_ms, waiting, responses)
        if done is None or not follows:
            return responses, done
        answered: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        self.parked[answered] = self.parked[done]
        done.add_done_callback(functools.partial(self._markers_answered, answered, follows))
        return responses, answered

    def _markers_answered(
        self,
        answered: asyncio.Future[ProduceResult],
        follows: list[tuple[PartitionResponse, PartitionResponse]],
        done: asyncio.Future[ProduceResult],
    ) -> None:
        """The later marker of a partition is answered: so are the earlier ones."""
        self.parked.pop(answered, None)
        if answered.done() or done.cancelled():
            return
        for earlier, later in reversed(follows):
            earlier.error, earlier.error_message = later.error, later.error_message
        answered.set_result(done.result())

    def _append_marker(
        self, partition: Partition, marker: tuple[int, int, bool, int], now_ms: int
    ) -> PartitionResponse:
        try:
            appended = partition.append_txn_marker_to_leader(*marker, now_ms)
        except AppendRefused as exc:
            return PartitionResponse(
                exc.code, log_start_offset=partition.log.log_start_offset, error_message=exc.message
            )
        key = partition.key
        if partition.maybe_increment_high_watermark():  # the leader alone in the ISR
            self.produce_purgatory.check_and_complete(key)
        # Followers' fetches wake for the marker; read_committed ones once the last stable
        # offset moves (here, with the high watermark, or when it passes the marker).
        self.fetch_purgatory.check_and_complete(key)
        self.share_fetch_purgatory.check_and_complete(key)
        return PartitionResponse(
            ErrorCode.NONE, appended.base_offset, -1, partition.log.log_start_offset
        )

    # -- DeleteRecords --------------------------------------------------------------------

    def delete_records(
        self, timeout_ms: int, offsets: dict[TopicPartition, int]
    ) -> DeleteRecordsOutcome | asyncio.Future[DeleteRecordsOutcome]:
        """Move each led partition's log start to its offset (-1: the high watermark), as
        Kafka's ``ReplicaManager.deleteRecords``; the outcome now when every partition
        failed or every live replica already starts there, else a future of it once they
        do (or the timeout passes) in the DeleteRecords purgatory. Errors per partition:
        INVALID_TOPIC_EXCEPTION for an internal topic, UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, POLICY_VIOLATION for a compact-only topic,
        OFFSET_OUT_OF_RANGE past the high watermark, REQUEST_TIMED_OUT."""
        results: DeleteRecordsOutcome = {}
        pending: dict[TopicPartition, int] = {}
        live = self.metadata.live_brokers
        for key, offset in offsets.items():
            code = self._delete_records_error(key)
            partition = code if code else self.leader_partition(*key)
            if isinstance(partition, ErrorCode):
                results[key] = DeleteRecordsResult(partition)
                self.metrics.record_error("DeleteRecords", partition)
                continue
            try:
                required = partition.delete_records_on_leader(offset)
            except DeleteRecordsRefused as exc:
                results[key] = DeleteRecordsResult(exc.code)
                self.metrics.record_error("DeleteRecords", exc.code)
                continue
            self.log.info(
                "records_deleted", topic=key[0], partition=key[1], log_start_offset=required
            )
            results[key] = DeleteRecordsResult(
                ErrorCode.REQUEST_TIMED_OUT, partition.low_watermark(live)
            )
            pending[key] = required
        if not pending:
            return results
        operation = DelayedDeleteRecords(timeout_ms, pending, results, self)
        if self.delete_records_purgatory.try_complete_else_watch(operation, tuple(pending)):
            return operation.done.result()
        self.parked[operation.done] = operation
        return operation.done

    def _delete_records_error(self, key: TopicPartition) -> ErrorCode:
        """Why records of this topic may not be deleted at all, else NONE."""
        if key[0] in INTERNAL_TOPICS:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        topic = self.metadata.topics.get(key[0])
        if topic is None:
            return ErrorCode.NONE  # (leader_partition tells)
        policy = topic.configs.get("cleanup.policy")
        if policy is None:
            policy = self.config.topic_defaults().get("cleanup.policy", "delete")
        if "delete" not in str(policy):  # Kafka: only a log with the delete policy
            return ErrorCode.POLICY_VIOLATION
        return ErrorCode.NONE

    # -- replication ----------------------------------------------------------------------

    def _follower_fetched(self, params: FetchParams) -> None:
        """A follower's fetch offsets are its log end offsets: record them, move the HW,
        and let caught-up followers into the ISR."""
        now = self.scheduler.now_ms()
        replica_id = params.replica_id
        for key, info in params.partitions:
            partition = self.partitions.get(key)
            if (
                partition is None
                or not partition.is_leader
                or replica_id not in partition.followers
                or 0 <= info.current_leader_epoch != partition.leader_epoch
            ):
                continue  # not ours, or a fetch of another leadership: it proves nothing
            partition.record_follower_fetch(
                replica_id, info.fetch_offset, now, params.replica_epoch, info.log_start_offset
            )
            if partition.maybe_increment_high_watermark():
                self._check_waiting(partition.key)
            elif self.delete_records_purgatory.watched:
                # (The low watermark may have moved: Kafka checks on every follower fetch.)
                self.delete_records_purgatory.check_and_complete(partition.key)
            if partition.may_join_isr(replica_id) and not partition.isr_change_pending:
                self.isr_changes.propose(partition, [*partition.isr, replica_id])

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
                self.isr_changes.propose(partition, [r for r in partition.isr if r not in lagging])

    def _isr_changed(self, partition: Partition) -> None:
        partition.maybe_increment_high_watermark()
        self._check_waiting(partition.key)

    def _still_leads(self, partition: Partition) -> bool:
        return self.partitions.get(partition.key) is partition and partition.is_leader

    # -- fetch ---------------------------------------------------------------------------

    def fetch_messages(self, params: FetchParams) -> FetchResult | asyncio.Future[FetchResult]:
        """Answer a fetch now, or park it in a purgatory.

        A consumer fetch with partitions below their local log start (in the remote tier)
        submits their reads and waits in the RemoteFetch purgatory. Otherwise it is
        answered at once when it may not wait (``max_wait_ms`` <= 0), asks for nothing,
        already has ``min_bytes``, or hit an error; else a DelayedFetch waits for data.
        A follower's fetch first tells the leader how far that follower got.
        """
        if params.replica_id >= 0:
            self._follower_fetched(params)
        partitions, readable, errored, remote = self._read(params)
        if remote:
            return self._fetch_remote(partitions, remote)
        if (
            params.max_wait_ms <= 0
            or not params.partitions
            or readable >= params.min_bytes
            or errored
        ):
            return self.fetch_result(partitions, 0)
        operation = DelayedFetch(params, self, self.scheduler.precise_s())
        keys = tuple([key for key, _ in params.partitions])
        if self.fetch_purgatory.try_complete_else_watch(operation, keys):
            return operation.response.result()
        self.parked[operation.response] = operation
        return operation.response

    def _fetch_remote(
        self,
        partitions: list[tuple[TopicPartition, FetchPartitionData]],
        remote: list[RemoteFetchInfo],
    ) -> FetchResult | asyncio.Future[FetchResult]:
        """Submit the remote reads; a partition whose read the pool refuses (queue full) is
        answered with an error at once, as in Kafka. The rest waits in RemoteFetch."""
        readers = self.remote_log_manager.readers
        reads: dict[TopicPartition, asyncio.Future[bytes]] = {}
        refused: dict[TopicPartition, FetchPartitionData] = {}
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
                refused[key] = error_data(ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            reads[key] = read
        if refused:
            partitions = replace_partitions(partitions, refused)
        if not reads:
            return self.fetch_result(partitions, 0)
        operation = DelayedRemoteFetch(
            self.config["remote.fetch.max.wait.ms"],
            partitions,
            reads,
            self,
            self.scheduler.precise_s(),
        )
        if self.remote_fetch_purgatory.try_complete_else_watch(operation, tuple(reads)):
            return operation.response.result()
        self.parked[operation.response] = operation
        for key, read in reads.items():
            read.add_done_callback(functools.partial(self._remote_read_done, key))
        return operation.response

    def _remote_read_done(self, key: TopicPartition, _: asyncio.Future[bytes]) -> None:
        self.remote_fetch_purgatory.check_and_complete(key)

    def abandon(self, answer: asyncio.Future[Any]) -> None:
        """The connection awaiting ``answer`` closed: the operation that would resolve it
        (a produce, fetch or remote fetch parked here) completes now, leaving its timer
        and watchers, instead of waiting out its delay. Its answer was cancelled first, so
        it resolves nothing (and a remote fetch cancels its reads)."""
        operation = self.parked.pop(answer, None)
        if operation is not None:
            operation.force_complete()

    def fetch_response(self, params: FetchParams, wait_ms: int) -> FetchResult:
        """Read again for a fetch that waited ``wait_ms`` in the Fetch purgatory (a
        partition whose offset moved to the remote tier meanwhile is answered empty; the
        client's next fetch reads it remotely)."""
        partitions, _, _, _ = self._read(params)
        return self.fetch_result(partitions, wait_ms)

    def _read(self, params: FetchParams) -> LogReadResult:
        result = read_from_local_log(params, self.leader_partition, self.remote_log_manager)
        self.metrics.bytes_out += result.bytes_read
        return result

    def fetch_expired(self, from_follower: bool) -> None:
        self.replication_metrics.fetch_expirations["follower" if from_follower else "consumer"] += 1

    def fetch_result(
        self, partitions: list[tuple[TopicPartition, FetchPartitionData]], wait_ms: int
    ) -> FetchResult:
        for _, data in partitions:
            if data.error:
                self.metrics.record_error("Fetch", data.error)
        return FetchResult(partitions, wait_ms)

    # -- offsets -------------------------------------------------------------------------

    def last_offset_for_leader_epoch(
        self, key: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetForLeaderEpoch for one partition this broker leads: where ``leader_epoch``
        (or the largest epoch before it) ends in its log. The asker's view of the current
        leader epoch is checked first (-1: not checked), as in Kafka."""
        partition = self.leader_partition(*key, current_leader_epoch)
        if isinstance(partition, ErrorCode):
            return partition, UNDEFINED_EPOCH_END
        log = partition.log
        return ErrorCode.NONE, log.leader_epochs.end_offset_for(leader_epoch, log.log_end_offset)

    def fetch_offset_for_timestamp(
        self, key: TopicPartition, timestamp: int, isolation_level: int = 0
    ) -> tuple[int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset); ``timestamp`` as
        ``Log.fetch_offset_by_timestamp`` takes it, answered up to the high watermark, or
        with ``isolation_level`` 1 (read_committed) the last stable offset, as Kafka's
        fetchOffsetForTimestamp: the latest offset is then the LSO, and a record found
        by its timestamp at or past it is none yet."""
        partition = self.leader_partition(*key)
        if isinstance(partition, ErrorCode):
            return partition, -1, -1
        upper = partition.last_stable_offset if isolation_level else partition.high_watermark
        try:
            ts, offset = partition.log.fetch_offset_by_timestamp(timestamp, upper)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if isolation_level and timestamp >= 0 and offset >= upper:  # not stable yet
            return ErrorCode.NONE, -1, -1
        return ErrorCode.NONE, ts, offset
