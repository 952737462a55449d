"""The domain side of a fetch: what the replica manager is asked and what it answers.

Kafka's names: ``FetchParams`` (who fetches, how long it may wait, how much it wants),
one ``PartitionFetchInfo`` per partition asked for, and one ``FetchPartitionData`` per
partition answered. ``FetchResult`` adds what Kafka proposed in KIP-736 and we ship: the
time the fetch waited in a purgatory. The API layer turns these into whatever its wire
protocol wants; nothing here knows a wire format or an API version. The ones made per
fetch are Structs, built in C and (``gc=False``) out of the cycle collector's sight: a
fetch parked in the purgatory keeps them alive for up to its ``max_wait_ms``.
"""

from __future__ import annotations

import msgspec

TopicPartition = tuple[str, int]


class PartitionFetchInfo(msgspec.Struct, gc=False):
    fetch_offset: int
    max_bytes: int  # bound for this partition (the first batch may exceed it, KIP-74)
    current_leader_epoch: int = -1  # the epoch the fetcher knows the leader by; -1: any
    log_start_offset: int = -1  # a follower's own log start; -1: not given (consumers)


class FetchParams(msgspec.Struct, gc=False):
    replica_id: int  # -1 for consumers, the follower's broker id for replication
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    # Request order. A tuple: the cycle collector stops tracking its pairs at its first look
    # and it at its second (it checks the outer tuple before the inner ones), where a list
    # it would walk at every collection while the fetch waits.
    partitions: tuple[tuple[TopicPartition, PartitionFetchInfo], ...]
    replica_epoch: int = -1  # a follower's broker epoch (KIP-903); -1: not given
    # 0 read_uncommitted (up to the high watermark), 1 read_committed (up to the last
    # stable offset, with the aborted transactions of what is read)
    isolation_level: int = 0

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class FetchPartitionData(msgspec.Struct, gc=False):
    error: int
    high_watermark: int
    log_start_offset: int
    records: bytes  # concatenated record batches, possibly ending in a partial one
    last_stable_offset: int = -1
    # (producer id, first offset) of the aborted transactions overlapping ``records``, for
    # a read_committed fetch (empty when none); None for read_uncommitted
    aborted_transactions: tuple[tuple[int, int], ...] | None = None


NO_DATA = b""


def error_data(error: int) -> FetchPartitionData:
    """The answer for a partition this broker cannot serve (no offsets known)."""
    return FetchPartitionData(error, -1, -1, NO_DATA)


class FetchResult(msgspec.Struct, gc=False):
    partitions: list[tuple[TopicPartition, FetchPartitionData]]  # request order
    wait_ms: int  # time spent in a purgatory (0: answered at once)
