"""Request and response bodies of the APIs brokers and the controller speak among
themselves (Kafka's inter-broker and controller APIs), as ``protocol.messages``
describes: BrokerRegistration, BrokerHeartbeat, AlterPartition and ControlledShutdown
(the metadata quorum's own are in ``raft_messages``); and the topic and partition state
the metadata image is made of."""

from __future__ import annotations

from purgatory.protocol.messages import Message

# -- Topic and partition state; BrokerRegistration (62), BrokerHeartbeat (63) -------------


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


class BrokerRegistrationRequest(Message):
    """A broker (re)starting asks the active controller to register it. A new
    ``incarnation_id`` is a new run of the broker, which lost what it held in memory."""

    broker_id: int
    incarnation_id: str
    host: str  # the inter-broker listener's advertised address
    port: int
    cluster_id: str = ""
    # Every advertised listener but the controller's: (name, host, port). Metadata gives a
    # client the addresses of the listener it came in on.
    listeners: tuple[tuple[str, str, int], ...] = ()


class BrokerRegistrationResponse(Message):
    error_code: int
    error_message: str | None = None
    broker_epoch: int = -1  # the offset of the registration in the metadata log


class BrokerHeartbeatRequest(Message):
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the last metadata offset this broker has applied


class BrokerHeartbeatResponse(Message):
    error_code: int
    is_caught_up: bool = False  # it has applied its own registration
    is_fenced: bool = True


# -- Inter-broker: AlterPartition (56) ------------------------------------------------------


class AlterPartitionPartition(Message):
    partition_index: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int  # the epoch the leader's current ISR has
    # The broker epoch of each member of new_isr, as its fetches told the leader (-1: not
    # known): the controller refuses a replica that has registered again since (KIP-903).
    broker_epochs: list[int] = []


class AlterPartitionTopic(Message):
    name: str
    partitions: list[AlterPartitionPartition]


class AlterPartitionRequest(Message):
    """A leader asks the controller to change the ISR of partitions it leads."""

    broker_id: int
    topics: list[AlterPartitionTopic]
    broker_epoch: int = -1  # the sender's; a stale one is refused (STALE_BROKER_EPOCH)


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


# -- WriteTxnMarkers (27): a transaction coordinator has partition leaders end a transaction --


class WritableTxnMarker(Message):
    """Kafka's WritableTxnMarker: end producer_id's transaction in these partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: list[tuple[str, int]]


class WriteTxnMarkersRequest(Message):
    markers: list[WritableTxnMarker]
    timeout_ms: int = 30000


class WriteTxnMarkersResponse(Message):
    # Per marker (in the request's order): its producer id and (topic, partition, error).
    markers: list[tuple[int, list[tuple[str, int, int]]]]


# -- ControlledShutdown (7): a broker asks the controller to move its leaderships away -----


class ControlledShutdownRequest(Message):
    broker_id: int
    broker_epoch: int  # which run of that broker asks


class RemainingPartition(Message):
    topic_name: str
    partition_index: int


class ControlledShutdownResponse(Message):
    error_code: int
    # Partitions the broker still leads: no other in-sync replica is live to take them.
    remaining_partitions: list[RemainingPartition]


# -- Envelope (58): a broker forwards a client's topic change to the active controller ----


class EnvelopeRequest(Message):
    """A request a broker forwards to the active controller (CreateTopics, DeleteTopics,
    CreatePartitions): its API key and version and its body as sent. Only the active
    controller serves it; anyone else answers NOT_CONTROLLER (it is never forwarded
    again)."""

    api_key: int
    api_version: int
    request_data: bytes


class EnvelopeResponse(Message):
    error_code: int
    response_data: bytes | None = None


# -- SaslAuthenticate (36): a broker proving it holds the cluster secret ------------------


class SaslAuthenticateRequest(Message):
    """One message of an authentication exchange (clients/cluster_auth.py);
    Kafka's SaslHandshake mechanism travels with it."""

    mechanism: str
    auth_bytes: bytes


class SaslAuthenticateResponse(Message):
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""


# -- ReadShareGroupState (84), WriteShareGroupState (85): a share-partition's leader and ----
# -- its share coordinator (KIP-932; one share-partition per request) ----------------------


class ReadShareGroupStateRequest(Message):
    """The leader of a share group's partition reads its state (when it starts leading)
    from the share coordinator. ``topic_id`` hex, as our metadata's; ``leader_epoch`` the
    sender's epoch of the data partition (-1: unfenced)."""

    group_id: str
    topic_id: str
    partition: int
    leader_epoch: int


class ReadShareGroupStateResponse(Message):
    """``start_offset`` -1 (and no batches): nothing was ever written for the
    share-partition. ``state_batches``: (first_offset, last_offset, delivery_state,
    delivery_count)."""

    error_code: int
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    state_batches: list[tuple[int, int, int, int]] = []


class WriteShareGroupStateRequest(Message):
    """The leader of a share group's partition stores its whole state (it replaces the
    one before): the start offset and the batches above it that are not available with
    delivery count 0."""

    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[tuple[int, int, int, int]]


class WriteShareGroupStateResponse(Message):
    error_code: int
