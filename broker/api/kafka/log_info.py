"""The Kafka listener's read-only APIs on logs and partitions: OffsetForLeaderEpoch (23),
DescribeLogDirs (35), DescribeProducers (61) and DescribeTopicPartitions (75).

They change nothing: each reads the replica manager's logs (their leader-epoch caches,
sizes and idempotent producers) or the metadata image and answers as Kafka's
``ReplicaManager``, ``Partition`` and ``DescribeTopicPartitionsRequestHandler`` do.

Every broker has one log directory, in memory, reported as ``memory:/broker-<id>`` (not a
path on disk); its volume is the ``log.memory.max.bytes`` budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.request_limits import check_partition_count, check_topic_count
from purgatory.broker.api.results import Result
from purgatory.broker.controller.internal_topics import INTERNAL_TOPICS
from purgatory.broker.controller.topics import topic_name_problem
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import TopicState
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.replication.partition import Partition
    from purgatory.broker.server import Broker

# Kafka's max.request.partition.size.limit: the most partitions one DescribeTopicPartitions
# answers, whatever the request's response_partition_limit.
MAX_DESCRIBED_PARTITIONS = 2000
# What Kafka answers without an authorizer: every operation on a topic (READ, WRITE,
# CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) as a bit field.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def log_dir(broker_id: int) -> str:
    """The one log directory a broker reports (its logs live in memory)."""
    return f"memory:/broker-{broker_id}"


class LogInfoApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.replica_manager = broker.replica_manager
        self.metadata = broker.metadata

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs,
            ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.handle_describe_topic_partitions,
        }

    # -- OffsetForLeaderEpoch ----------------------------------------------------------------

    def handle_offset_for_leader_epoch(self, request: Any, version: int) -> Result:
        """KIP-320: a consumer that saw the leader change asks where the epoch of its
        position ends, to find a truncated log. The same answer as followers get (the
        leader's epoch cache), fenced by the asker's current leader epoch."""
        check_partition_count(request.topics)
        end_offset_for = self.replica_manager.last_offset_for_leader_epoch
        denied = authz.unauthorized_topics(
            self.broker.auth,
            AclOperation.DESCRIBE,
            (t.topic for t in request.topics),
            unless_cluster=AclOperation.CLUSTER_ACTION,
        )

        def answer(topic: str, p: Any) -> tuple[int, int, int]:
            if topic in denied:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
            error, (epoch, end) = end_offset_for(
                (topic, p.partition), p.current_leader_epoch, p.leader_epoch
            )
            return error, epoch, end

        return _epoch_end_offsets(version, request, answer)

    # -- DescribeLogDirs ---------------------------------------------------------------------

    def handle_describe_log_dirs(self, request: Any, version: int) -> Result:
        """The replicas this broker holds (those asked, or all when topics is null) in its
        one log directory: size in bytes, and offset lag max(HW - LEO, 0), never a future
        log (no AlterReplicaLogDirs)."""
        schema = response_module(ApiKey.DESCRIBE_LOG_DIRS, version)
        if authz.cluster_refused(self.broker.auth, AclOperation.DESCRIBE):
            return build(
                schema.DescribeLogDirsResponse,
                throttle_time=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                results=[],
            )
        hosted = self.replica_manager.partitions
        if request.topics is None:
            keys = sorted(hosted)
        else:
            check_partition_count(request.topics)
            asked = {(t.topic, i) for t in request.topics for i in t.partitions}
            keys = sorted(k for k in asked if k in hosted)
        by_topic: dict[str, list[Any]] = {}
        for key in keys:
            partition = hosted[key]
            log = partition.log
            by_topic.setdefault(key[0], []).append(
                build(
                    schema.DescribeLogDirsPartition,
                    partition_index=key[1],
                    partition_size=log.size_bytes,
                    offset_lag=max(partition.high_watermark - log.log_end_offset, 0),
                    is_future_key=False,
                )
            )
        budget = self.replica_manager.memory_budget
        limit = self.broker.config["log.memory.max.bytes"]
        total, usable = (limit, max(limit - budget.memory.used, 0)) if limit >= 0 else (-1, -1)
        result = build(
            schema.DescribeLogDirsResult,
            error_code=ErrorCode.NONE,
            log_dir=log_dir(self.broker.broker_id),
            topics=[
                build(schema.DescribeLogDirsTopic, name=name, partitions=parts)
                for name, parts in by_topic.items()
            ],
            total_bytes=total,
            usable_bytes=usable,
        )
        return build(
            schema.DescribeLogDirsResponse, throttle_time=0, error_code=0, results=[result]
        )

    # -- DescribeProducers -------------------------------------------------------------------

    def handle_describe_producers(self, request: Any, version: int) -> Result:
        """The idempotent producers each partition's log knows (on its leader or a
        follower, as Kafka answers from any replica held): id, epoch, last sequence, the
        last batch's max timestamp, the coordinator epoch of its last transaction marker
        and the first offset of its open transaction (-1: none)."""
        check_partition_count(request.topics, lambda t: t.partition_indexes)
        schema = response_module(ApiKey.DESCRIBE_PRODUCERS, version)
        denied = authz.unauthorized_topics(
            self.broker.auth, AclOperation.READ, (t.name for t in request.topics)
        )

        def answer(topic: str, index: int) -> tuple[int, list[Any]]:
            if topic in denied:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED, []
            partition = self.replica_manager.partitions.get((topic, index))
            if partition is not None:
                return ErrorCode.NONE, _active_producers(schema, partition)
            if self.metadata.partition(topic, index) is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, []

        return _producers(version, request, answer)

    # -- DescribeTopicPartitions -------------------------------------------------------------

    def handle_describe_topic_partitions(self, request: Any, version: int) -> Result:
        """KIP-966's paginated Metadata for admin clients: topics in name order from the
        cursor on (every topic when none is named), at most ``response_partition_limit``
        partitions (and at most 2000), and a next cursor where the answer stopped. Names
        asked for that do not exist are answered with their error; in a listing of every
        topic there are none. Eligible leader replicas are Kafka's without ELR: empty."""
        names = [t.name for t in request.topics]
        check_topic_count(len(names))
        cursor = request.cursor
        start_name = cursor.topic_name if cursor is not None else ""
        every_topic = not names
        if every_topic:
            names = list(self.metadata.topics)
        wanted = sorted({n for n in names if n >= start_name})
        if cursor is not None:
            if not every_topic and cursor.topic_name not in wanted:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    "DescribeTopicPartitionsRequest topic list should contain the cursor "
                    f"topic: {cursor.topic_name}",
                )
            if cursor.partition_index < 0:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    "DescribeTopicPartitionsRequest cursor partition must be valid: "
                    f"{cursor.partition_index}",
                )
        limit = max(min(MAX_DESCRIBED_PARTITIONS, request.response_partition_limit), 1)
        schema = response_module(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
        # DESCRIBE on each topic: left out of a listing, TOPIC_AUTHORIZATION_FAILED (after
        # the rest) when named, as Kafka's DescribeTopicPartitionsRequestHandler.
        denied = authz.unauthorized_topics(self.broker.auth, AclOperation.DESCRIBE, wanted)
        if denied:
            wanted = [name for name in wanted if name not in denied]
        topics: list[Any] = []
        next_cursor = None
        remaining = limit
        for name in wanted:
            if remaining == 0:  # the previous topic filled the answer: this one comes next
                next_cursor = build(schema.Cursor, topic_name=name, partition_index=0)
                break
            state = self.metadata.topics.get(name)
            if state is None:
                if not every_topic:
                    problem = topic_name_problem(name)
                    code = (
                        ErrorCode.INVALID_TOPIC_EXCEPTION
                        if problem
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    topics.append(_error_topic(schema, name, code))
                continue
            first = cursor.partition_index if cursor is not None and name == start_name else 0
            upper = min(len(state.partitions), first + remaining)
            topics.append(self._topic(schema, state, range(first, upper)))
            if upper < len(state.partitions):
                next_cursor = build(schema.Cursor, topic_name=name, partition_index=upper)
                break
            remaining -= max(upper - first, 0)
        if denied and not every_topic:
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            topics += [_error_topic(schema, name, refused) for name in sorted(denied)]
        return build(
            schema.DescribeTopicPartitionsResponse,
            throttle_time=0,
            topics=topics,
            next_cursor=next_cursor,
        )

    def _topic(self, schema: Any, state: TopicState, indexes: range) -> Any:
        live = self.metadata.live_brokers
        partitions = []
        for index in indexes:
            p = state.partitions[index]
            partitions.append(
                build(
                    schema.DescribeTopicPartitionsResponsePartition,
                    error_code=ErrorCode.NONE,
                    partition_index=p.partition_index,
                    leader_id=p.leader_id if p.leader_id in live else -1,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=p.replicas,
                    isr_nodes=p.isr,
                    eligible_leader_replicas=[],
                    last_known_elr=[],
                    offline_replicas=[r for r in p.replicas if r not in live],
                )
            )
        return build(
            schema.DescribeTopicPartitionsResponseTopic,
            error_code=ErrorCode.NONE,
            name=state.name,
            topic_id=state.topic_id,
            is_internal=state.name in INTERNAL_TOPICS,
            partitions=partitions,
            topic_authorized_operations=TOPIC_OPERATIONS,
        )


def _active_producers(schema: Any, partition: Partition) -> list[Any]:
    return [
        build(
            schema.ProducerState,
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=(
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
            ),
        )
        for producer_id, entry in partition.log.producer_state.producers.items()
    ]


def _epoch_end_offsets(
    version: int, request: Any, answer: Callable[[str, Any], tuple[int, int, int]]
) -> Any:
    """An OffsetForLeaderEpoch response: (error, epoch, end offset) per partition asked."""
    schema = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            error, epoch, end = answer(topic.topic, p)
            parts.append(
                build(
                    schema.EpochEndOffset,
                    error_code=error,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        topics.append(build(schema.OffsetForLeaderTopicResult, topic=topic.topic, partitions=parts))
    return build(schema.OffsetForLeaderEpochResponse, throttle_time=0, topics=topics)


def _error_topic(schema: Any, name: str, code: int) -> Any:
    """DescribeTopicPartitions' answer for a topic named that is not described."""
    return build(
        schema.DescribeTopicPartitionsResponseTopic,
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
        topic_authorized_operations=TOPIC_OPERATIONS,
    )


def _producers(
    version: int, request: Any, answer: Callable[[str, int], tuple[int, list[Any]]]
) -> Any:
    """A DescribeProducers response: (error, active producers) per partition asked."""
    schema = response_module(ApiKey.DESCRIBE_PRODUCERS, version)
    topics = []
    for topic in request.topics:
        parts = []
        for index in topic.partition_indexes:
            code, producers = answer(topic.name, index)
            parts.append(
                build(
                    schema.PartitionResponse,
                    partition_index=index,
                    error_code=code,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(build(schema.TopicResponse, name=topic.name, partitions=parts))
    return build(schema.DescribeProducersResponse, throttle_time=0, topics=topics)


# -- error responses (Kafka's getErrorResponse of each request) ------------------------------


def error_response(key: int, version: int, body: Any, code: int) -> Any:
    """The response of one of these APIs answering ``code`` throughout."""
    schema = response_module(key, version)
    if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        return _epoch_end_offsets(version, body, lambda topic, p: (code, -1, -1))
    if key == ApiKey.DESCRIBE_LOG_DIRS:
        # Kafka: the error at the top (v3+), no log dirs.
        return build(schema.DescribeLogDirsResponse, throttle_time=0, error_code=code, results=[])
    if key == ApiKey.DESCRIBE_PRODUCERS:
        return _producers(version, body, lambda topic, index: (code, []))
    if key == ApiKey.DESCRIBE_TOPIC_PARTITIONS:
        return build(
            schema.DescribeTopicPartitionsResponse,
            throttle_time=0,
            topics=[
                build(
                    schema.DescribeTopicPartitionsResponseTopic,
                    error_code=code,
                    name=t.name,
                    topic_id=None,
                    is_internal=False,
                    partitions=[],
                )
                for t in body.topics
            ],
            next_cursor=None,
        )
    raise AssertionError(f"not an api of this module: {key}")  # pragma: no cover


LOG_INFO_APIS = frozenset(
    {
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        ApiKey.DESCRIBE_LOG_DIRS,
        ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    }
)
