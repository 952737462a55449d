"""The records of ``__consumer_offsets``: a committed offset, or a group's metadata.

Each record's key says what it is about (Kafka's key versions: 1 an offset commit, 2 a
classic group; 5 to 8 a consumer group's member, target assignment and members'
assignments, as Kafka's KIP-848 records; 4 the consumer group's epoch and subscription
metadata, which Kafka writes as key 3; 10 to 14 a share group's, as Kafka's KIP-932
records), its value the latest state; a null value (a
tombstone) deletes it. Replaying a
partition from its start therefore rebuilds every group it holds: the last record per key
wins. Keys and values are MessagePack, like our record batches (Kafka writes its own
binary schemas; nothing outside the coordinator reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec


class OffsetCommitKey(msgspec.Struct, array_like=True, frozen=True, tag=1):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=2):
    group: str


class TxnOffsetCommitKey(msgspec.Struct, array_like=True, frozen=True, tag=3):
    """An offset a transaction commits (its value an OffsetCommitValue): it counts once
    the producer's commit marker follows it in the partition, and never after an abort.
    (Kafka writes an OffsetCommitKey in the producer's transactional batch instead.)"""

    group: str
    topic: str
    partition: int
    producer_id: int


class OffsetCommitValue(msgspec.Struct, array_like=True, frozen=True):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # The incarnation the offset is of (a topic deleted and made again has a new id);
    # "" in records from before it was kept.
    topic_id: str = ""


class MemberValue(msgspec.Struct, array_like=True, frozen=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # its metadata for the group's protocol
    assignment: bytes


class GroupMetadataValue(msgspec.Struct, array_like=True, frozen=True):
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: list[MemberValue]


class ConsumerGroupMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=4):
    group: str


class ConsumerGroupMemberMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=5):
    group: str
    member_id: str


class ConsumerGroupTargetAssignmentMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=6):
    group: str


class ConsumerGroupTargetAssignmentMemberKey(msgspec.Struct, array_like=True, frozen=True, tag=7):
    group: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentKey(msgspec.Struct, array_like=True, frozen=True, tag=8):
    group: str
    member_id: str


class ShareGroupMemberMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=10):
    group: str
    member_id: str


class ShareGroupMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=11):
    group: str


class ShareGroupTargetAssignmentMetadataKey(msgspec.Struct, array_like=True, frozen=True, tag=12):
    group: str


class ShareGroupTargetAssignmentMemberKey(msgspec.Struct, array_like=True, frozen=True, tag=13):
    group: str
    member_id: str


class ShareGroupCurrentMemberAssignmentKey(msgspec.Struct, array_like=True, frozen=True, tag=14):
    group: str
    member_id: str


TopicPartitions = list[tuple[str, list[int]]]  # (topic id, partitions)


class ConsumerGroupMetadataValue(msgspec.Struct, array_like=True, frozen=True):
    epoch: int
    # name -> (topic id, partitions) of the subscribed topics the assignment was made of
    subscription_metadata: dict[str, tuple[str, int]]


class ConsumerGroupMemberMetadataValue(msgspec.Struct, array_like=True, frozen=True):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # A member using the classic protocol: its session timeout and protocols (-1, None:
    # a KIP-848 member).
    classic_session_timeout_ms: int = -1
    classic_protocols: list[tuple[str, bytes]] | None = None


class ConsumerGroupTargetAssignmentMetadataValue(msgspec.Struct, array_like=True, frozen=True):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberValue(msgspec.Struct, array_like=True, frozen=True):
    topic_partitions: TopicPartitions


class ConsumerGroupCurrentMemberAssignmentValue(msgspec.Struct, array_like=True, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
Record = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


class ShareGroupMemberMetadataValue(msgspec.Struct, array_like=True, frozen=True):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


class ShareGroupCurrentMemberAssignmentValue(msgspec.Struct, array_like=True, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    assigned_partitions: TopicPartitions


ShareGroupKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
)
RecordKey = (
    OffsetCommitKey | GroupMetadataKey | TxnOffsetCommitKey | ConsumerGroupKey | ShareGroupKey
)

_encoder = msgspec.msgpack.Encoder()
_key_decoder = msgspec.msgpack.Decoder(RecordKey)
_offset_decoder = msgspec.msgpack.Decoder(OffsetCommitValue)
_group_decoder = msgspec.msgpack.Decoder(GroupMetadataValue)


_consumer_decoders: dict[type, msgspec.msgpack.Decoder[Any]] = {
    # A share group's epoch and target records have a consumer group's shapes.
    ShareGroupMetadataKey: msgspec.msgpack.Decoder(ConsumerGroupMetadataValue),
    ShareGroupMemberMetadataKey: msgspec.msgpack.Decoder(ShareGroupMemberMetadataValue),
    ShareGroupTargetAssignmentMetadataKey: msgspec.msgpack.Decoder(
        ConsumerGroupTargetAssignmentMetadataValue
    ),
    ShareGroupTargetAssignmentMemberKey: msgspec.msgpack.Decoder(
        ConsumerGroupTargetAssignmentMemberValue
    ),
    ShareGroupCurrentMemberAssignmentKey: msgspec.msgpack.Decoder(
        ShareGroupCurrentMemberAssignmentValue
    ),
    ConsumerGroupMetadataKey: msgspec.msgpack.Decoder(ConsumerGroupMetadataValue),
    ConsumerGroupMemberMetadataKey: msgspec.msgpack.Decoder(ConsumerGroupMemberMetadataValue),
    ConsumerGroupTargetAssignmentMetadataKey: msgspec.msgpack.Decoder(
        ConsumerGroupTargetAssignmentMetadataValue
    ),
    ConsumerGroupTargetAssignmentMemberKey: msgspec.msgpack.Decoder(
        ConsumerGroupTargetAssignmentMemberValue
    ),
    ConsumerGroupCurrentMemberAssignmentKey: msgspec.msgpack.Decoder(
        ConsumerGroupCurrentMemberAssignmentValue
    ),
}


def encode(value: msgspec.Struct | None) -> bytes | None:
    return None if value is None else _encoder.encode(value)


def decode_key(data: bytes) -> RecordKey:
    key: RecordKey = _key_decoder.decode(data)
    return key


def decode_offset(data: bytes) -> OffsetCommitValue:
    return _offset_decoder.decode(data)


def decode_group(data: bytes) -> GroupMetadataValue:
    return _group_decoder.decode(data)


def decode_consumer_group_value(key: ConsumerGroupKey | ShareGroupKey, data: bytes) -> Any:
    """The value of a consumer or share group record of ``key``'s kind."""
    return _consumer_decoders[type(key)].decode(data)


def topic_partitions(assignment: Mapping[str, frozenset[int]]) -> TopicPartitions:
    return [(topic_id, sorted(ps)) for topic_id, ps in sorted(assignment.items())]


def assignment_of(partitions: TopicPartitions) -> dict[str, frozenset[int]]:
    return {topic_id: frozenset(ps) for topic_id, ps in partitions if ps}


def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, as a signed 32-bit int), so a
    group maps to the same ``__consumer_offsets`` partition as on Kafka."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitions`` (abs of MIN_VALUE is 0)."""
    h = java_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
