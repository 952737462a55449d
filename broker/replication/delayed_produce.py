"""DelayedProduce: an acks=-1 produce waiting in the "Produce" purgatory for the ISR."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from purgatory.broker.purgatory import DelayedOperation
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
ProduceResult = list[tuple[TopicPartition, "PartitionResponse"]]  # one per appended batch


class PartitionResponse(msgspec.Struct, gc=False):
    """The outcome of appending to one partition (Kafka's ProduceResponse.PartitionResponse);
    a waiting produce fills in its error when it completes. A Struct: built in C, one per
    produced batch."""

    error: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # (index in the batch, message) of each record the LogValidator refused
    record_errors: tuple[tuple[int, str], ...] = ()


class ProducePartitionStatus(NamedTuple):
    required_offset: int  # the high watermark that acknowledges the batch
    response: PartitionResponse


class DelayedProduce(DelayedOperation):
    """Appended locally; waits until each partition's high watermark reaches the offset
    after its batch. A partition is done when:

    A. this broker no longer leads it: NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION if
       the partition is gone, its topic deleted);
    B. its HW reached the required offset: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if
       the ISR is now smaller than ``min.insync.replicas``;
    C. the request's timeout passed first: REQUEST_TIMED_OUT.

    The produce completes when every partition is done (or on timeout); ``done`` then
    resolves to ``responses``, the whole request's outcome (``pending`` holds some of its
    PartitionResponse objects and fills them in).
    """

    __slots__ = ("done", "pending", "replica_manager", "responses")

    def __init__(
        self,
        timeout_ms: int,
        pending: dict[TopicPartition, ProducePartitionStatus],
        responses: ProduceResult,
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(timeout_ms)
        self.pending = pending
        self.responses = responses
        self.replica_manager = replica_manager
        self.done: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        rm = self.replica_manager
        for key, (required, response) in list(self.pending.items()):
            partition = rm.partitions.get(key)
            if partition is None:  # case A: the partition is gone (topic deleted)
                response.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not partition.is_leader:  # case A
                response.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif partition.high_watermark >= required:  # case B
                if len(partition.isr) < partition.effective_min_isr:
                    response.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                continue
            del self.pending[key]
        return not self.pending and self.force_complete()

    def on_complete(self) -> None:
        self.replica_manager.parked.pop(self.done, None)
        if self.done.done():  # abandoned: its connection closed (the records stay)
            return
        # try_complete completes only when nothing is pending: anything left timed out.
        for _, response in self.pending.values():  # case C
            response.error = ErrorCode.REQUEST_TIMED_OUT
            response.error_message = (
                "the in-sync replicas did not catch up within the request's timeout"
            )
        if self.pending:
            self.replica_manager.metrics.record_error(
                "Produce", ErrorCode.REQUEST_TIMED_OUT, len(self.pending)
            )
        self.done.set_result(self.responses)
