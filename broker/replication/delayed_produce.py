"""DelayedProduce: an acks=-1 produce waiting in the "Produce" purgatory for the ISR."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.purgatory import DelayedOperation
from protocol import messages as m
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.replication.replica_manager import ReplicaManager


class DelayedProduce(DelayedOperation):
    """Appended locally; waits until each partition's high watermark reaches the offset
    after its batch. A partition is done when:

    A. this broker no longer leads it: NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION if
       the partition is gone, its topic deleted);
    B. its HW reached the required offset: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if
       the ISR is now smaller than ``min.insync.replicas``;
    C. the request's timeout passed first: REQUEST_TIMED_OUT.

    The produce completes when every partition is done (or on timeout).
    """

    __slots__ = ("pending", "replica_manager", "response", "result")

    def __init__(
        self,
        timeout_ms: int,
        result: m.ProduceResponse,
        pending: dict[tuple[str, int], tuple[m.PartitionProduceResponse, int]],
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(timeout_ms)
        self.result = result
        self.pending = pending  # (topic, partition) -> (its response entry, required offset)
        self.replica_manager = replica_manager
        self.response: asyncio.Future[m.ProduceResponse] = (
            asyncio.get_running_loop().create_future()
        )

    def try_complete(self) -> bool:
        rm = self.replica_manager
        for key, (entry, required) in list(self.pending.items()):
            partition = rm.partitions.get(key)
            if partition is None:  # case A: the partition is gone (topic deleted)
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not partition.is_leader:  # case A
                entry.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif partition.high_watermark >= required:  # case B
                if len(partition.isr) < partition.min_insync_replicas:
                    entry.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                continue
            del self.pending[key]
        return not self.pending and self.force_complete()

    def on_complete(self) -> None:
        # try_complete completes only when nothing is pending: anything left timed out.
        for entry, _ in self.pending.values():  # case C
            entry.error_code = ErrorCode.REQUEST_TIMED_OUT
            entry.error_message = (
                "the in-sync replicas did not catch up within the request's timeout"
            )
        if self.pending:
            self.replica_manager.metrics.record_error(
                "Produce", ErrorCode.REQUEST_TIMED_OUT, len(self.pending)
            )
        if not self.response.done():
            self.response.set_result(self.result)
