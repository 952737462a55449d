"""Request and response bodies of our protocol's APIs, as msgspec Structs: the ones
clients speak here, the group coordinator's in ``group_messages``, the brokers' and the
controller's among themselves in ``inter_broker_messages``.

Every Struct is ``array_like``: on the wire it is a MessagePack array of its fields in
declaration order. A newer version of a message appends fields (subclassing the older
one), so an older peer decodes what it knows and ignores the rest.
"""

from __future__ import annotations

from msgspec import Struct


class Message(Struct, array_like=True, gc=False):
    """The base of every body and header. Untracked by the cycle collector (``gc=False``):
    a message is a tree of lists and scalars that never refers back to itself, and a
    broker allocates several per request, so tracking them only made collections run
    more often."""


# -- ApiVersions (18) ---------------------------------------------------------------------


class ApiVersionsRequest(Message):
    pass


class ApiVersionRange(Message):
    api_key: int
    min_version: int
    max_version: int


class ApiVersionsResponse(Message):
    error_code: int
    api_keys: list[ApiVersionRange]


# -- Metadata (3) -------------------------------------------------------------------------


class MetadataRequest(Message):
    topics: list[str] | None = None  # None: every topic
    allow_auto_topic_creation: bool = False


class MetadataBroker(Message):
    node_id: int
    host: str
    port: int


class MetadataPartition(Message):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]


class MetadataTopic(Message):
    error_code: int
    name: str
    topic_id: str
    partitions: list[MetadataPartition]
    # The topic's own configs (Kafka's DYNAMIC_TOPIC_CONFIG ones: those set when it was
    # created), by Kafka's name, as Kafka writes the values.
    configs: dict[str, str] = {}


class MetadataResponse(Message):
    cluster_id: str
    controller_id: int
    brokers: list[MetadataBroker]
    topics: list[MetadataTopic]


# -- CreateTopics (19) --------------------------------------------------------------------


class CreatableTopic(Message):
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: dict[str, str] = {}
    # Manual replica assignments, (partition index, brokers); with -1 for both counts.
    assignments: list[tuple[int, list[int]]] | None = None


class CreateTopicsRequest(Message):
    topics: list[CreatableTopic]
    timeout_ms: int = 30000
    validate_only: bool = False


class CreatableTopicResult(Message):
    name: str
    error_code: int
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class CreateTopicsResponse(Message):
    topics: list[CreatableTopicResult]


# -- DeleteTopics (20) --------------------------------------------------------------------


class DeleteTopicsRequest(Message):
    topic_names: list[str]
    timeout_ms: int = 30000


class DeletableTopicResult(Message):
    name: str
    error_code: int
    error_message: str | None = None


class DeleteTopicsResponse(Message):
    responses: list[DeletableTopicResult]


# -- CreatePartitions (37) ----------------------------------------------------------------


class CreatePartitionsTopic(Message):
    name: str
    count: int  # the new total number of partitions
    assignments: list[list[int]] | None = None  # replicas of each new partition; None: placed


class CreatePartitionsRequest(Message):
    topics: list[CreatePartitionsTopic]
    timeout_ms: int = 30000
    validate_only: bool = False


class CreatePartitionsTopicResult(Message):
    name: str
    error_code: int
    error_message: str | None = None


class CreatePartitionsResponse(Message):
    results: list[CreatePartitionsTopicResult]


# -- Produce (0) --------------------------------------------------------------------------


class PartitionProduceData(Message):
    index: int
    records: bytes  # one record batch (protocol.records)


class TopicProduceData(Message):
    name: str
    partitions: list[PartitionProduceData]


class ProduceRequest(Message):
    acks: int
    timeout_ms: int
    topics: list[TopicProduceData]


class PartitionProduceResponse(Message):
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class TopicProduceResponse(Message):
    name: str
    partitions: list[PartitionProduceResponse]


class ProduceResponse(Message):
    responses: list[TopicProduceResponse]


# -- Fetch (1) ----------------------------------------------------------------------------


class FetchPartition(Message):
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    # The leader epoch the fetcher knows the leader by (KIP-320); -1 (or absent, from an
    # older client): not checked.
    current_leader_epoch: int = -1


class FetchTopic(Message):
    topic: str
    partitions: list[FetchPartition]


class FetchRequest(Message):
    replica_id: int  # -1 for consumers, the follower's broker id for replication
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: list[FetchTopic]


class PartitionData(Message):
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes  # concatenated record batches, possibly ending in a partial one


class FetchableTopicResponse(Message):
    topic: str
    partitions: list[PartitionData]


class FetchResponseV0(Message):
    responses: list[FetchableTopicResponse]


class FetchResponseV1(FetchResponseV0, array_like=True):
    wait_time_ms: int = 0  # KIP-736: time this request spent in purgatory


# Fetch v2: v1 and the fields of a replica's fetch (KIP-595, KIP-903, KIP-1166). The
# metadata quorum's replicas fetch its log, ``__cluster_metadata``, with it, as Kafka's do;
# data followers send their broker epoch with it. Each version appends fields, so a v2
# body decodes as v1 and a v1 body as v2 (with the defaults).


class FetchPartitionV2(FetchPartition):
    # The epoch of the fetcher's last entry, so the leader can check that the two logs
    # agree (the metadata log only), and the high watermark the fetcher has applied.
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    # A data follower's log start offset (Kafka's Fetch v5 field): the leader answers
    # DeleteRecords once every live replica's log starts past the offset. -1: not given.
    log_start_offset: int = -1


class FetchTopicV2(FetchTopic):
    partitions: list[FetchPartitionV2]  # type: ignore[assignment]


class FetchRequestV2(FetchRequest):
    topics: list[FetchTopicV2]  # type: ignore[assignment]
    cluster_id: str | None = None  # checked by the metadata quorum's leader
    # A follower's broker epoch (its registration): a leader proposes a follower for the
    # ISR only with the epoch its fetches came with (KIP-903). -1: not given.
    replica_epoch: int = -1
    # A consumer's isolation: 1 (read_committed) reads up to the last stable offset, the
    # aborted transactions' batches left out by the broker. 0: everything to the HW.
    isolation_level: int = 0


class PartitionDataV2(PartitionData):
    # The leader and its epoch as the answering node knows them (the metadata log), where
    # the fetcher's log diverges from the leader's (truncate to the end of that epoch,
    # then fetch again), or the snapshot to fetch instead (the fetch offset is below the
    # leader's log start). -1: not set.
    leader_id: int = -1
    leader_epoch: int = -1
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1


class FetchableTopicResponseV2(FetchableTopicResponse):
    partitions: list[PartitionDataV2]  # type: ignore[assignment]


class FetchResponseV2(FetchResponseV1):
    responses: list[FetchableTopicResponseV2]  # type: ignore[assignment]


# -- ListOffsets (2) ----------------------------------------------------------------------

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class ListOffsetsPartition(Message):
    partition_index: int
    timestamp: int  # -1 latest, -2 earliest, else the first offset with timestamp >= it


class ListOffsetsTopic(Message):
    name: str
    partitions: list[ListOffsetsPartition]


class ListOffsetsRequest(Message):
    replica_id: int
    topics: list[ListOffsetsTopic]
    isolation_level: int = 0  # 1: latest is the last stable offset (read_committed)


class ListOffsetsPartitionResponse(Message):
    partition_index: int
    error_code: int
    timestamp: int = -1
    offset: int = -1


class ListOffsetsTopicResponse(Message):
    name: str
    partitions: list[ListOffsetsPartitionResponse]


class ListOffsetsResponse(Message):
    topics: list[ListOffsetsTopicResponse]


# -- DeleteRecords (21) -------------------------------------------------------------------


class DeleteRecordsPartition(Message):
    partition_index: int
    offset: int  # the new log start; -1: the high watermark


class DeleteRecordsTopic(Message):
    name: str
    partitions: list[DeleteRecordsPartition]


class DeleteRecordsRequest(Message):
    topics: list[DeleteRecordsTopic]
    timeout_ms: int = 30000  # how long to wait for every live replica's log start


class DeleteRecordsPartitionResult(Message):
    partition_index: int
    low_watermark: int  # the smallest log start of the live replicas; -1 on error
    error_code: int


class DeleteRecordsTopicResult(Message):
    name: str
    partitions: list[DeleteRecordsPartitionResult]


class DeleteRecordsResponse(Message):
    topics: list[DeleteRecordsTopicResult]


# -- OffsetCommit (8) / OffsetFetch (9) ---------------------------------------------------


class OffsetCommitPartition(Message):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None = None


class OffsetCommitTopic(Message):
    name: str
    partitions: list[OffsetCommitPartition]


class OffsetCommitRequest(Message):
    group_id: str
    topics: list[OffsetCommitTopic]


class OffsetCommitPartitionResponse(Message):
    partition_index: int
    error_code: int


class OffsetCommitTopicResponse(Message):
    name: str
    partitions: list[OffsetCommitPartitionResponse]


class OffsetCommitResponse(Message):
    topics: list[OffsetCommitTopicResponse]


class OffsetFetchTopic(Message):
    name: str
    partition_indexes: list[int]


class OffsetFetchRequest(Message):
    group_id: str
    topics: list[OffsetFetchTopic]


class OffsetFetchPartitionResponse(Message):
    partition_index: int
    committed_offset: int  # -1: nothing committed
    metadata: str | None
    error_code: int


class OffsetFetchTopicResponse(Message):
    name: str
    partitions: list[OffsetFetchPartitionResponse]


class OffsetFetchResponse(Message):
    topics: list[OffsetFetchTopicResponse]


# -- InitProducerId (22): an idempotent producer's id and epoch ------------------------------


class InitProducerIdRequest(Message):
    transactional_id: str | None = None  # transactions are not served: must be None
    transaction_timeout_ms: int = -1
    producer_id: int = -1  # the current id and epoch, to bump the epoch (KIP-360); or -1
    producer_epoch: int = -1


class InitProducerIdResponse(Message):
    error_code: int
    producer_id: int
    producer_epoch: int


# -- OffsetForLeaderEpoch (23): a follower asks where its latest epoch ends on the leader --


class OffsetForLeaderPartition(Message):
    partition: int
    current_leader_epoch: int  # the epoch the asker knows the leader by; -1: not checked
    leader_epoch: int  # the epoch whose end offset is asked for


class OffsetForLeaderTopic(Message):
    topic: str
    partitions: list[OffsetForLeaderPartition]


class OffsetForLeaderEpochRequest(Message):
    replica_id: int  # the follower's broker id; -1 for a consumer
    topics: list[OffsetForLeaderTopic]


class EpochEndOffset(Message):
    error_code: int
    partition: int
    leader_epoch: int  # the largest epoch at most the one asked about; -1 if none
    end_offset: int  # where that epoch ends on the leader; -1 if none


class OffsetForLeaderTopicResult(Message):
    topic: str
    partitions: list[EpochEndOffset]


class OffsetForLeaderEpochResponse(Message):
    topics: list[OffsetForLeaderTopicResult]


# -- ElectLeaders (43): preferred or unclean leader election on demand -------------------

PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


class TopicPartitions(Message):
    topic: str
    partitions: list[int]


class ElectLeadersRequest(Message):
    election_type: int  # 0 preferred, 1 unclean
    topic_partitions: list[TopicPartitions] | None  # None: every partition
    timeout_ms: int
    # Ours: with a preferred election, make this broker each partition's preferred (first)
    # replica before electing (a reorder of its replicas, as librdkafka's mock cluster's
    # "set the leader"); -1: the preferred replica stays.
    leader_id: int = -1


class PartitionResult(Message):
    partition_id: int
    error_code: int
    error_message: str | None


class ReplicaElectionResult(Message):
    topic: str
    partition_result: list[PartitionResult]


class ElectLeadersResponse(Message):
    error_code: int
    replica_election_results: list[ReplicaElectionResult]


# -- AlterConfigs (33) and IncrementalAlterConfigs (44): config changes -------------------
# One shape for both (Kafka's two request schemas differ only by the operation): AlterConfigs
# sends every config as SET and replaces the resource's whole set of configs.

CONFIG_SET = 0
CONFIG_DELETE = 1
CONFIG_APPEND = 2
CONFIG_SUBTRACT = 3
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32


class AlterableConfig(Message):
    name: str
    config_operation: int  # CONFIG_SET, _DELETE, _APPEND, _SUBTRACT
    value: str | None


class AlterConfigsResource(Message):
    resource_type: int  # TOPIC_RESOURCE, BROKER_RESOURCE (name "": the cluster's default)
    resource_name: str
    configs: list[AlterableConfig]


class IncrementalAlterConfigsRequest(Message):
    resources: list[AlterConfigsResource]
    validate_only: bool = False


class AlterConfigsResourceResponse(Message):
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str


class IncrementalAlterConfigsResponse(Message):
    responses: list[AlterConfigsResourceResponse]
