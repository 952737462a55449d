"""Request and response bodies of the APIs brokers and the controller speak among
themselves (Kafka's inter-broker and controller APIs), as ``protocol.messages``
describes: UpdateMetadata, BrokerRegistration, AlterPartition, ControlledShutdown and
FetchSnapshot."""

from __future__ import annotations

from purgatory.protocol.messages import Message

# -- Inter-broker: UpdateMetadata (6), BrokerRegistration (62) ---------------------------


class TopicConfigEntry(Message):
    name: str
    value: str


class PartitionState(Message):
    partition_index: int
    leader_id: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0  # grows with every change of the ISR (fences stale updates)


class TopicState(Message):
    name: str
    topic_id: str
    configs: dict[str, str]
    partitions: list[PartitionState]


class UpdateMetadataRequest(Message):
    """The controller's full picture of the cluster, pushed to every broker."""

    controller_id: int
    controller_incarnation: str  # changes when the controller restarts
    metadata_epoch: int  # grows with every change an incarnation makes
    topics: list[TopicState]
    live_brokers: list[int] = []  # registered and heartbeating, the controller included
    # Each broker's incarnation as last registered: one registering with another restarted
    # without its log (kept with the picture, so a new controller knows it too).
    broker_incarnations: dict[int, str] = {}


class UpdateMetadataResponse(Message):
    error_code: int


class BrokerRegistrationRequest(Message):
    broker_id: int
    incarnation: str  # changes when the broker restarts


class BrokerRegistrationResponse(Message):
    error_code: int
    error_message: str | None = None


# -- Inter-broker: AlterPartition (56) ------------------------------------------------------


class AlterPartitionPartition(Message):
    partition_index: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int  # the epoch the leader's current ISR has


class AlterPartitionTopic(Message):
    name: str
    partitions: list[AlterPartitionPartition]


class AlterPartitionRequest(Message):
    """A leader asks the controller to change the ISR of partitions it leads."""

    broker_id: int
    topics: list[AlterPartitionTopic]


class AlterPartitionPartitionResponse(Message):
    partition_index: int
    error_code: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = []
    partition_epoch: int = -1


class AlterPartitionTopicResponse(Message):
    name: str
    partitions: list[AlterPartitionPartitionResponse]


class AlterPartitionResponse(Message):
    error_code: int
    topics: list[AlterPartitionTopicResponse]


# -- ControlledShutdown (7): a broker asks the controller to move its leaderships away -----


class ControlledShutdownRequest(Message):
    broker_id: int
    incarnation: str  # which run of that broker asks (Kafka's broker epoch)


class RemainingPartition(Message):
    topic_name: str
    partition_index: int


class ControlledShutdownResponse(Message):
    error_code: int
    # Partitions the broker still leads: no other in-sync replica is live to take them.
    remaining_partitions: list[RemainingPartition]


# -- Inter-broker: FetchSnapshot (59) -------------------------------------------------------


class FetchSnapshotRequest(Message):
    """A starting controller asks a broker for the cluster picture it holds."""

    replica_id: int


class FetchSnapshotResponse(Message):
    error_code: int
    snapshot: UpdateMetadataRequest | None  # None: this broker has no picture yet
