"""What the share coordinator keeps per share-partition (Kafka's ShareGroupOffset,
PersisterStateBatch and SharePartitionKey): the start offset of a share group's partition
and the state of the records above it that are not simply available."""

from __future__ import annotations

import base64
from typing import NamedTuple

# Kafka's RecordState ids, as persisted (SharePartition's AVAILABLE, ACKNOWLEDGED, ARCHIVED;
# ACQUIRED records are persisted as AVAILABLE with their delivery count).
AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4

NO_START_OFFSET = -1  # on the wire: nothing was ever written for the key


class PersisterStateBatch(NamedTuple):
    """Offsets ``first_offset``..``last_offset`` (inclusive), all in one state with one
    delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ShareGroupOffset(NamedTuple):
    """The state of one share-partition as last written: ``state_epoch`` (the state's
    incarnation), ``leader_epoch`` of the data partition's leader that wrote it, the share
    group's start offset and the batches above it."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[PersisterStateBatch]


class SharePartitionKey(NamedTuple):
    """A share group's partition: the group, the topic's id (hex, as our metadata has it)
    and the partition index."""

    group_id: str
    topic_id: str
    partition: int


def kafka_uuid_string(topic_id: str) -> str:
    """A topic id as Kafka's ``Uuid.toString`` writes it (URL-safe base64, unpadded), the
    form Kafka hashes to place a share-partition."""
    return base64.urlsafe_b64encode(bytes.fromhex(topic_id)).rstrip(b"=").decode()


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``groupId:topicId:partition``."""
    return f"{key.group_id}:{kafka_uuid_string(key.topic_id)}:{key.partition}"
