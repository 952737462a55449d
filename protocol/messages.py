"""Request and response bodies of every API, as msgspec Structs.

Every Struct is ``array_like``: on the wire it is a MessagePack array of its fields in
declaration order. A newer version of a message appends fields (subclassing the older
one), so an older peer decodes what it knows and ignores the rest.
"""

from __future__ import annotations

from msgspec import Struct

# -- ApiVersions (18) ---------------------------------------------------------------------


class ApiVersionsRequest(Struct, array_like=True):
    pass


class ApiVersionRange(Struct, array_like=True):
    api_key: int
    min_version: int
    max_version: int


class ApiVersionsResponse(Struct, array_like=True):
    error_code: int
    api_keys: list[ApiVersionRange]


# -- Metadata (3) -------------------------------------------------------------------------


class MetadataRequest(Struct, array_like=True):
    topics: list[str] | None = None  # None: every topic
    allow_auto_topic_creation: bool = False


class MetadataBroker(Struct, array_like=True):
    node_id: int
    host: str
    port: int


class MetadataPartition(Struct, array_like=True):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]


class MetadataTopic(Struct, array_like=True):
    error_code: int
    name: str
    topic_id: str
    partitions: list[MetadataPartition]


class MetadataResponse(Struct, array_like=True):
    cluster_id: str
    controller_id: int
    brokers: list[MetadataBroker]
    topics: list[MetadataTopic]


# -- CreateTopics (19) --------------------------------------------------------------------


class CreatableTopic(Struct, array_like=True):
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: dict[str, str] = {}


class CreateTopicsRequest(Struct, array_like=True):
    topics: list[CreatableTopic]
    timeout_ms: int = 30000
    validate_only: bool = False


class CreatableTopicResult(Struct, array_like=True):
    name: str
    error_code: int
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class CreateTopicsResponse(Struct, array_like=True):
    topics: list[CreatableTopicResult]


# -- DeleteTopics (20) --------------------------------------------------------------------


class DeleteTopicsRequest(Struct, array_like=True):
    topic_names: list[str]
    timeout_ms: int = 30000


class DeletableTopicResult(Struct, array_like=True):
    name: str
    error_code: int
    error_message: str | None = None


class DeleteTopicsResponse(Struct, array_like=True):
    responses: list[DeletableTopicResult]


# -- Produce (0) --------------------------------------------------------------------------


class PartitionProduceData(Struct, array_like=True):
    index: int
    records: bytes  # one record batch (protocol.records)


class TopicProduceData(Struct, array_like=True):
    name: str
    partitions: list[PartitionProduceData]


class ProduceRequest(Struct, array_like=True):
    acks: int
    timeout_ms: int
    topics: list[TopicProduceData]


class PartitionProduceResponse(Struct, array_like=True):
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class TopicProduceResponse(Struct, array_like=True):
    name: str
    partitions: list[PartitionProduceResponse]


class ProduceResponse(Struct, array_like=True):
    responses: list[TopicProduceResponse]


# -- Fetch (1) ----------------------------------------------------------------------------


class FetchPartition(Struct, array_like=True):
    partition: int
    fetch_offset: int
    partition_max_bytes: int


class FetchTopic(Struct, array_like=True):
    topic: str
    partitions: list[FetchPartition]


class FetchRequest(Struct, array_like=True):
    replica_id: int  # -1 for consumers, the follower's broker id for replication
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: list[FetchTopic]


class PartitionData(Struct, array_like=True):
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes  # concatenated record batches, possibly ending in a partial one


class FetchableTopicResponse(Struct, array_like=True):
    topic: str
    partitions: list[PartitionData]


class FetchResponseV0(Struct, array_like=True):
    responses: list[FetchableTopicResponse]


class FetchResponseV1(FetchResponseV0, array_like=True):
    wait_time_ms: int = 0  # KIP-736: time this request spent in purgatory


# -- ListOffsets (2) ----------------------------------------------------------------------

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class ListOffsetsPartition(Struct, array_like=True):
    partition_index: int
    timestamp: int  # -1 latest, -2 earliest, else the first offset with timestamp >= it


class ListOffsetsTopic(Struct, array_like=True):
    name: str
    partitions: list[ListOffsetsPartition]


class ListOffsetsRequest(Struct, array_like=True):
    replica_id: int
    topics: list[ListOffsetsTopic]


class ListOffsetsPartitionResponse(Struct, array_like=True):
    partition_index: int
    error_code: int
    timestamp: int = -1
    offset: int = -1


class ListOffsetsTopicResponse(Struct, array_like=True):
    name: str
    partitions: list[ListOffsetsPartitionResponse]


class ListOffsetsResponse(Struct, array_like=True):
    topics: list[ListOffsetsTopicResponse]


# -- OffsetCommit (8) / OffsetFetch (9) ---------------------------------------------------


class OffsetCommitPartition(Struct, array_like=True):
    partition_index: int
    committed_offset: int
    committed_metadata: str | None = None


class OffsetCommitTopic(Struct, array_like=True):
    name: str
    partitions: list[OffsetCommitPartition]


class OffsetCommitRequest(Struct, array_like=True):
    group_id: str
    topics: list[OffsetCommitTopic]


class OffsetCommitPartitionResponse(Struct, array_like=True):
    partition_index: int
    error_code: int


class OffsetCommitTopicResponse(Struct, array_like=True):
    name: str
    partitions: list[OffsetCommitPartitionResponse]


class OffsetCommitResponse(Struct, array_like=True):
    topics: list[OffsetCommitTopicResponse]


class OffsetFetchTopic(Struct, array_like=True):
    name: str
    partition_indexes: list[int]


class OffsetFetchRequest(Struct, array_like=True):
    group_id: str
    topics: list[OffsetFetchTopic]


class OffsetFetchPartitionResponse(Struct, array_like=True):
    partition_index: int
    committed_offset: int  # -1: nothing committed
    metadata: str | None
    error_code: int


class OffsetFetchTopicResponse(Struct, array_like=True):
    name: str
    partitions: list[OffsetFetchPartitionResponse]


class OffsetFetchResponse(Struct, array_like=True):
    topics: list[OffsetFetchTopicResponse]


# -- Inter-broker: UpdateMetadata (6), BrokerRegistration (62) ---------------------------


class TopicConfigEntry(Struct, array_like=True):
    name: str
    value: str


class PartitionState(Struct, array_like=True):
    partition_index: int
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0  # grows with every change of the ISR (fences stale updates)


class TopicState(Struct, array_like=True):
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: list[PartitionState]


class UpdateMetadataRequest(Struct, array_like=True):
    """The controller's full picture of the cluster, pushed to every broker."""

    controller_id: int
    controller_incarnation: str  # changes when the controller restarts
    metadata_epoch: int  # grows with every change an incarnation makes
    topics: list[TopicState]
    live_brokers: list[int] = []  # registered and heartbeating, the controller included


class UpdateMetadataResponse(Struct, array_like=True):
    error_code: int


class BrokerRegistrationRequest(Struct, array_like=True):
    broker_id: int
    incarnation: str  # changes when the broker restarts


class BrokerRegistrationResponse(Struct, array_like=True):
    error_code: int
    error_message: str | None = None


# -- Inter-broker: AlterPartition (56) ------------------------------------------------------


class AlterPartitionPartition(Struct, array_like=True):
    partition_index: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int  # the epoch the leader's current ISR has


class AlterPartitionTopic(Struct, array_like=True):
    name: str
    partitions: list[AlterPartitionPartition]


class AlterPartitionRequest(Struct, array_like=True):
    """A leader asks the controller to change the ISR of partitions it leads."""

    broker_id: int
    topics: list[AlterPartitionTopic]


class AlterPartitionPartitionResponse(Struct, array_like=True):
    partition_index: int
    error_code: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = []
    partition_epoch: int = -1


class AlterPartitionTopicResponse(Struct, array_like=True):
    name: str
    partitions: list[AlterPartitionPartitionResponse]


class AlterPartitionResponse(Struct, array_like=True):
    error_code: int
    topics: list[AlterPartitionTopicResponse]


# -- Inter-broker: FetchSnapshot (59) -------------------------------------------------------


class FetchSnapshotRequest(Struct, array_like=True):
    """A starting controller asks a broker for the cluster picture it holds."""

    replica_id: int


class FetchSnapshotResponse(Struct, array_like=True):
    error_code: int
    snapshot: UpdateMetadataRequest | None  # None: this broker has no picture yet
