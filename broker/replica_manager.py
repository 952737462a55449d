"""ReplicaManager: the partitions this broker holds, and produce/fetch/offsets against them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from broker.config import BrokerConfig
from broker.log import Log, OffsetOutOfRange
from broker.metadata import MetadataCache, PartitionChange
from broker.metrics import BrokerMetrics
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
    def __init__(
        self, config: BrokerConfig, metadata: MetadataCache, metrics: BrokerMetrics
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.metrics = metrics
        self.partitions: dict[TopicPartition, Partition] = {}
        self.log = structlog.get_logger("replica_manager").bind(broker_id=self.broker_id)

    # -- metadata ------------------------------------------------------------------------

    def apply(self, changes: Iterable[PartitionChange]) -> None:
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

    def _leader_partition(self, topic: str, index: int) -> Partition | ErrorCode:
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
        partition = self._leader_partition(topic, data.index)
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
        return m.PartitionProduceResponse(
            data.index, ErrorCode.NONE, base, -1, log.log_start_offset
        )

    # -- fetch ---------------------------------------------------------------------------

    def fetch(self, request: m.FetchRequest) -> list[m.FetchableTopicResponse]:
        """Read every requested partition once (no waiting: that is the purgatory's job).

        ``max_bytes`` bounds the whole response, ``partition_max_bytes`` each partition;
        the first batch of the response is returned even when it alone exceeds them
        (KIP-74), so a consumer never gets stuck behind a large batch.
        """
        remaining = request.max_bytes
        out = []
        sent = 0
        for topic in request.topics:
            parts = []
            for fp in topic.partitions:
                partition = self._leader_partition(topic.topic, fp.partition)
                if isinstance(partition, ErrorCode):
                    parts.append(m.PartitionData(fp.partition, partition, -1, -1, b""))
                    continue
                log = partition.log
                hw = partition.high_watermark
                limit = max(min(fp.partition_max_bytes, remaining), 0)
                try:
                    batches = log.read(fp.fetch_offset, limit if sent else max(limit, 1), hw)
                except OffsetOutOfRange:
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
        return out

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                partition = self._leader_partition(topic.name, p.partition_index)
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
                    partition = self._leader_partition(topic.name, p.partition_index)
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
                    partition = self._leader_partition(topic.name, index)
                    if isinstance(partition, ErrorCode):
                        code = partition
                    elif request.group_id in partition.committed:
                        offset, meta = partition.committed[request.group_id]
                parts.append(m.OffsetFetchPartitionResponse(index, offset, meta, code))
            topics.append(m.OffsetFetchTopicResponse(topic.name, parts))
        return m.OffsetFetchResponse(topics)
