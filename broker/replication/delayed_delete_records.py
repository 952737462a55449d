"""DelayedDeleteRecords: a DeleteRecords waiting in the "DeleteRecords" purgatory until
every live replica's log starts at the offset asked for (Kafka's DelayedDeleteRecords)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import msgspec

from purgatory.broker.purgatory import DelayedOperation
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
INVALID_LOW_WATERMARK = -1


class DeleteRecordsResult(msgspec.Struct, gc=False):
    """One partition's outcome (Kafka's DeleteRecordsPartitionResult): its low watermark
    (the smallest log start offset of its live replicas) when done, else an error and -1."""

    error: int
    low_watermark: int = INVALID_LOW_WATERMARK


DeleteRecordsOutcome = dict[TopicPartition, DeleteRecordsResult]


class DelayedDeleteRecords(DelayedOperation):
    """The leaders moved their log starts; waits for the followers to move theirs (they
    learn it from their fetch answers and tell it in their next fetch). A partition is
    done when:

    A. this broker no longer leads it: NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION if
       it is gone, its topic deleted);
    B. its low watermark reached the offset asked for: NONE, with the low watermark;
    C. the request's timeout passed first: REQUEST_TIMED_OUT.

    It completes when every partition is done (or on timeout); ``done`` then resolves to
    ``results``, the whole request's outcome (``pending`` maps the partitions still
    waiting to the offset each needs; their results hold case C, REQUEST_TIMED_OUT with
    the low watermark they had, until they are done).
    """

    __slots__ = ("done", "pending", "replica_manager", "results")

    def __init__(
        self,
        timeout_ms: int,
        pending: dict[TopicPartition, int],
        results: DeleteRecordsOutcome,
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(timeout_ms)
        self.pending = pending
        self.results = results
        self.replica_manager = replica_manager
        self.done: asyncio.Future[DeleteRecordsOutcome] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        rm = self.replica_manager
        live = rm.metadata.live_brokers
        for key, required in list(self.pending.items()):
            partition = rm.partitions.get(key)
            if partition is None:  # case A: gone (topic deleted)
                self.results[key] = DeleteRecordsResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not partition.is_leader:  # case A
                self.results[key] = DeleteRecordsResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                low = partition.low_watermark(live)
                if low < required:
                    continue
                self.results[key] = DeleteRecordsResult(ErrorCode.NONE, low)  # case B
            del self.pending[key]
        return not self.pending and self.force_complete()

    def on_complete(self) -> None:
        self.replica_manager.parked.pop(self.done, None)
        if self.done.done():  # abandoned: its connection closed (the log starts moved)
            return
        if self.pending:  # case C: try_complete completes only when none is left
            self.replica_manager.metrics.record_error(
                "DeleteRecords", ErrorCode.REQUEST_TIMED_OUT, len(self.pending)
            )
        self.done.set_result(self.results)
