"""GroupCoordinator: commits and reads consumer groups' offsets.

Committed offsets are kept in memory with the partition's leader replica, so a group's
offsets for a partition live and die with that replica (a deleted topic takes them along).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.replication.fetch_params import TopicPartition
from broker.replication.partition import Partition
from protocol.errors import ErrorCode

MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes
MAX_GROUP_ID_LENGTH = 249

OffsetAndMetadata = tuple[int, str | None]  # -1: nothing committed


class GroupCoordinator:
    def __init__(self, leader_partition: Callable[[str, int], Partition | ErrorCode]) -> None:
        self.leader_partition = leader_partition

    @staticmethod
    def valid_group(group_id: str) -> bool:
        return bool(group_id) and len(group_id) <= MAX_GROUP_ID_LENGTH

    def commit_offsets(
        self, group_id: str, offsets: list[tuple[TopicPartition, OffsetAndMetadata]]
    ) -> list[int]:
        """Store each offset; one error code per entry, in order."""
        group_ok = self.valid_group(group_id)
        return [self._commit(group_id, group_ok, key, offset) for key, offset in offsets]

    def _commit(
        self, group_id: str, group_ok: bool, key: TopicPartition, committed: OffsetAndMetadata
    ) -> int:
        offset, metadata = committed
        if not group_ok:
            return ErrorCode.INVALID_GROUP_ID
        if metadata is not None and len(metadata) > MAX_METADATA_BYTES:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        partition = self.leader_partition(*key)
        if isinstance(partition, ErrorCode):
            return partition
        if not 0 <= offset <= partition.log.log_end_offset:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        partition.committed[group_id] = committed
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> list[tuple[int, OffsetAndMetadata]]:
        """(error, (offset, metadata)) per partition, in order."""
        if not self.valid_group(group_id):
            return [(ErrorCode.INVALID_GROUP_ID, (-1, None)) for _ in partitions]
        out: list[tuple[int, OffsetAndMetadata]] = []
        for key in partitions:
            partition = self.leader_partition(*key)
            if isinstance(partition, ErrorCode):
                out.append((partition, (-1, None)))
            else:
                out.append((ErrorCode.NONE, partition.committed.get(group_id, (-1, None))))
        return out
