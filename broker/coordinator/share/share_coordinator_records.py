"""The records of ``__share_group_state`` (Kafka's ShareSnapshotKey/ShareSnapshotValue):
one full snapshot of a share-partition's state per write, keyed by the share-partition; a
null value (a tombstone) deletes it. Replaying a partition from its start rebuilds every
share-partition it holds: the last record per key wins. MessagePack, like the group
records (Kafka writes its own binary schemas; nothing outside the coordinator reads them).
Kafka also writes ShareUpdate records between snapshots; a snapshot per write is enough
here, as a share-partition's batches are at most its in-flight records' worth."""

from __future__ import annotations

import msgspec

from purgatory.broker.coordinator.share.share_group_offset import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)


class ShareSnapshotKey(msgspec.Struct, array_like=True, frozen=True, tag=0):
    group_id: str
    topic_id: str
    partition: int


class ShareSnapshotValue(msgspec.Struct, array_like=True, frozen=True):
    state_epoch: int
    leader_epoch: int
    start_offset: int
    # (first_offset, last_offset, delivery_state, delivery_count)
    state_batches: list[tuple[int, int, int, int]]


_KEY_DECODER = msgspec.msgpack.Decoder(ShareSnapshotKey)
_VALUE_DECODER = msgspec.msgpack.Decoder(ShareSnapshotValue)


def snapshot_key(key: SharePartitionKey) -> bytes:
    return msgspec.msgpack.encode(ShareSnapshotKey(key.group_id, key.topic_id, key.partition))


def snapshot_value(offset: ShareGroupOffset) -> bytes:
    return msgspec.msgpack.encode(
        ShareSnapshotValue(
            offset.state_epoch,
            offset.leader_epoch,
            offset.start_offset,
            [tuple(b) for b in offset.state_batches],  # type: ignore[misc]
        )
    )


def decode_key(data: bytes) -> SharePartitionKey:
    key = _KEY_DECODER.decode(data)
    return SharePartitionKey(key.group_id, key.topic_id, key.partition)


def decode_value(data: bytes) -> ShareGroupOffset:
    value = _VALUE_DECODER.decode(data)
    return ShareGroupOffset(
        value.state_epoch,
        value.leader_epoch,
        value.start_offset,
        [PersisterStateBatch(*b) for b in value.state_batches],
    )
