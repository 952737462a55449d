"""ReplicaManager: the partitions this broker holds, and produce/fetch/offsets against them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from broker.config import BrokerConfig
from broker.delayed_fetch import DelayedFetch
from broker.log import Log, OffsetOutOfRange
from broker.metadata import MetadataCache, PartitionChange
from broker.metrics import BrokerMetrics
from broker.purgatory import DelayedOperation, DelayedOperationPurgatory, Scheduler, SystemTimer
from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, validate_batch

TopicPartition = tuple[str, int]
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes


@dataclass
class Partition:
    """One partition replica on this broker. With one replica per partition the high
    watermark is the log end offset."""

    topic: str
    index: int
    topic_id: str
    leader_id: int
    leader_epoch: int
    log: Log
    max_message_bytes: int
    committed: dict[str, tuple[int, str | None]] = field(default_factory=dict)

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset


class ReplicaManager:
    """Owns the partitions and the purgatories where requests wait: "Fetch" (long polls) and
    "Produce" (acks=-1 waiting for in-sync replicas: with one replica per partition the
    leader alone is the ISR, so produces never wait there yet). Each purgatory has its own
    timer, as in Kafka, so its NumDelayedOperations is its timer's size."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        metrics: BrokerMetrics,
        scheduler: Scheduler,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.metrics = metrics
        self.scheduler = scheduler
        self.partitions: dict[TopicPartition, Partition] = {}
        removal = config["purgatory.watcher.removal"]
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch",
            SystemTimer(scheduler),
            purge_interval=config["fetch.purgatory.purge.interval.requests"],
            watcher_removal=removal,
        )
        self.produce_purgatory: DelayedOperationPurgatory[DelayedOperation] = (
            DelayedOperationPurgatory(
                "Produce",
                SystemTimer(scheduler),
                purge_interval=config["producer.purgatory.purge.interval.requests"],
                watcher_removal=removal,
            )
        )
        metrics.add_purgatory(self.fetch_purgatory)
        metrics.add_purgatory(self.produce_purgatory)
        self.log = structlog.get_logger("replica_manager").bind(broker_id=self.broker_id)

    def shutdown(self) -> None:
        self.fetch_purgatory.cancel_all()
        self.produce_purgatory.cancel_all()

    # -- metadata ------------------------------------------------------------------------

    def apply(self, changes: Iterable[PartitionChange]) -> None:
        """Apply metadata changes; fetches waiting on a changed partition re-check at once
        (they complete if this broker no longer leads it or no longer has it)."""
        changes = list(changes)
        self._apply(changes)
        for change in changes:
            self.fetch_purgatory.check_and_complete((change.topic, change.partition))

    def _apply(self, changes: list[PartitionChange]) -> None:
        defaults = self.config.topic_defaults()
        for change in changes:
            key = (change.topic, change.partition)
            existing = self.partitions.get(key)
            state = change.state
            if state is None or self.broker_id not in state.replicas:
                if existing is not None:
                    del self.partitions[key]
                    self.log.info(
                        "partition_removed", topic=change.topic, partition=change.partition
                    )
                continue
            configs = {**defaults, **change.configs}
            if existing is not None and existing.topic_id == change.topic_id:
                existing.leader_id = state.leader_id
                existing.leader_epoch = state.leader_epoch
                continue
            self.partitions[key] = Partition(
                change.topic,
                change.partition,
                change.topic_id,
                state.leader_id,
                state.leader_epoch,
                Log(int(configs["retention.bytes"])),
                int(configs["max.message.bytes"]),
            )

    def leader_partition(self, topic: str, index: int) -> Partition | ErrorCode:
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.leader_id == self.broker_id:
            return partition
        if self.metadata.partition(topic, index) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    # -- produce -------------------------------------------------------------------------

    def append_records(self, request: m.ProduceRequest) -> tuple[m.ProduceResponse, int, list[str]]:
        """Append every partition's batch (acks 0/1/-1 behave alike with one replica).

        Returns the response, the number of failed partitions and the topics that were
        unknown (candidates for auto-creation)."""
        responses = []
        failed = 0
        unknown: list[str] = []
        valid_acks = request.acks in (-1, 0, 1)
        for topic in request.topics:
            parts = []
            for data in topic.partitions:
                if valid_acks:
                    result = self._append(topic.name, data)
                else:
                    result = m.PartitionProduceResponse(
                        data.index,
                        ErrorCode.INVALID_REQUIRED_ACKS,
                        error_message=f"acks must be -1, 0 or 1, got {request.acks}",
                    )
                if result.error_code:
                    failed += 1
                    self.metrics.record_error("Produce", result.error_code)
                    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        unknown.append(topic.name)
                parts.append(result)
            responses.append(m.TopicProduceResponse(topic.name, parts))
        return m.ProduceResponse(responses), failed, unknown

    def _append(self, topic: str, data: m.PartitionProduceData) -> m.PartitionProduceResponse:
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
        # The append moved the log end and, with one replica, the high watermark.
        self.fetch_purgatory.check_and_complete((topic, data.index))
        return m.PartitionProduceResponse(
            data.index, ErrorCode.NONE, base, -1, log.log_start_offset
        )

    # -- fetch ---------------------------------------------------------------------------

    def fetch_messages(
        self, request: m.FetchRequest, version: int
    ) -> m.FetchResponseV0 | asyncio.Future[m.FetchResponseV0]:
        """Answer a fetch now, or park it in the Fetch purgatory.

        It is answered at once when it may not wait (``max_wait_ms`` <= 0), asks for nothing,
        already has ``min_bytes``, or hit an error; otherwise a DelayedFetch waits for data.
        """
        responses, readable, errored = self._read(request)
        if (
            request.max_wait_ms <= 0
            or not request.topics
            or readable >= request.min_bytes
            or errored
        ):
            return self._response(responses, version, 0)
        operation = DelayedFetch(request, version, self, self.scheduler.now_ms())
        keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
        if self.fetch_purgatory.try_complete_else_watch(operation, keys):
            return operation.response.result()
        return operation.response

    def fetch_response(
        self, request: m.FetchRequest, version: int, wait_ms: int
    ) -> m.FetchResponseV0:
        """Read again for a fetch that waited ``wait_ms`` in purgatory."""
        responses, _, _ = self._read(request)
        return self._response(responses, version, wait_ms)

    def fetch_expired(self, from_follower: bool) -> None:
        self.metrics.fetch_expirations["follower" if from_follower else "consumer"] += 1

    def _response(
        self, responses: list[m.FetchableTopicResponse], version: int, wait_ms: int
    ) -> m.FetchResponseV0:
        for topic in responses:
            for part in topic.partitions:
                if part.error_code:
                    self.metrics.record_error("Fetch", part.error_code)
        if version == 0:
            return m.FetchResponseV0(responses)
        return m.FetchResponseV1(responses, wait_time_ms=wait_ms)

    def _read(self, request: m.FetchRequest) -> tuple[list[m.FetchableTopicResponse], int, bool]:
        """Read every requested partition once: (responses, record bytes, any error).

        ``max_bytes`` bounds the whole response, ``partition_max_bytes`` each partition;
        the first batch of the response is returned even when it alone exceeds them
        (KIP-74), so a consumer never gets stuck behind a large batch. Consumers read up to
        the high watermark, followers up to the log end.
        """
        follower = request.replica_id >= 0
        remaining = request.max_bytes
        out = []
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
                            log.log_start_offset,
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
        return out, sent, errored

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
