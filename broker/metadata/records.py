"""The records of the metadata log (Kafka's ``metadata/src/main/resources/common/metadata``
schemas, by the same names): the only way cluster metadata changes. The active controller
turns a request into records, the quorum commits them, and every member replays them
(``MetadataDelta.replay``) in log order.

Records are msgspec Structs tagged by name, encoded as MessagePack; the quorum carries
them as opaque bytes (``encode_record``/``decode_record``).
"""

from __future__ import annotations

import msgspec

from purgatory.broker.raft.raft_client import LEADER_CHANGE


class Record(msgspec.Struct, tag_field="type", array_like=False, gc=False, omit_defaults=True):
    """The base of every metadata record."""


class RegisterBrokerRecord(Record, tag="RegisterBroker"):
    """A broker registered: a new run of it (``incarnation_id``) whose epoch is the offset
    of this record. It starts fenced: it may lead nor join an ISR until it has caught up
    with the metadata (the controller unfences it then)."""

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    host: str
    port: int
    fenced: bool = True
    listeners: tuple[tuple[str, str, int], ...] = ()  # (name, host, port), advertised


class BrokerRegistrationChangeRecord(Record, tag="BrokerRegistrationChange"):
    """A registered broker fenced (its session expired), unfenced (caught up and
    heartbeating), or in controlled shutdown; None: unchanged."""

    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


class TopicRecord(Record, tag="Topic"):
    name: str
    topic_id: str


class PartitionRecord(Record, tag="Partition"):
    """A new partition of a topic."""

    topic_id: str
    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


class PartitionChangeRecord(Record, tag="PartitionChange"):
    """A partition's leader, ISR or replicas changed; its epochs as they become (the
    leader epoch grows with every new leader, the partition epoch with every change)."""

    topic_id: str
    partition_id: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: list[int]
    replicas: list[int] | None = None  # None: unchanged


class RemoveTopicRecord(Record, tag="RemoveTopic"):
    topic_id: str


class ConfigRecord(Record, tag="Config"):
    """A config of a resource set (``value``) or removed (None): a topic's
    (``resource_type`` 2, Kafka's TOPIC) or a broker's dynamic one (4, BROKER; the resource
    name is the broker id, or "" for the cluster-wide default) or a group's (32, GROUP; the
    resource name is the group id)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None = None


class UserScramCredentialRecord(Record, tag="UserScramCredential"):
    """A SCRAM user's credential for one mechanism (Kafka's ScramMechanism type: 1
    SCRAM-SHA-256, 2 SCRAM-SHA-512) set or replaced: the salt and the keys derived from
    the salted password (``broker.security.scram_credential``), never the password."""

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class RemoveUserScramCredentialRecord(Record, tag="RemoveUserScramCredential"):
    """A SCRAM user's credential for one mechanism removed."""

    name: str
    mechanism: int


class AccessControlEntryRecord(Record, tag="AccessControlEntry"):
    """An ACL (Kafka's record of that name), by its id: Kafka's codes for the resource
    type, pattern type, operation and permission (``broker.security.authorizer.acl``)."""

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class RemoveAccessControlEntryRecord(Record, tag="RemoveAccessControlEntry"):
    """An ACL removed."""

    id: str


class ClientQuotaRecord(Record, tag="ClientQuota"):
    """One quota of a client quota entity set (``value``) or removed (``remove``), as
    Kafka's record: ``entity`` is its (entity type, entity name) components, ``user``,
    ``client-id`` or ``ip``, a name of None being the type's default entity."""

    entity: list[tuple[str, str | None]]
    key: str
    value: float = 0.0
    remove: bool = False


TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # a group's configs (KIP-848, KIP-932: GroupConfig)

MetadataRecord = (
    RegisterBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(MetadataRecord)


def encode_record(record: MetadataRecord) -> bytes:
    return _encoder.encode(record)


def decode_record(data: bytes) -> MetadataRecord | None:
    """The record an entry holds; None for the quorum's own entries (a leader's first
    entry of its epoch), which change no metadata."""
    if data == LEADER_CHANGE:
        return None
    record: MetadataRecord = _decoder.decode(data)
    return record
