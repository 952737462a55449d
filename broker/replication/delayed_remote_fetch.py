"""DelayedRemoteFetch: a fetch waiting in the "RemoteFetch" purgatory for reads from the
remote tier (KIP-1018)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from purgatory.broker.log.tiered.remote_storage import RemoteStorageError
from purgatory.broker.purgatory import DelayedOperation
from purgatory.broker.replication.fetch_params import (
    NO_DATA,
    FetchPartitionData,
    FetchResult,
    TopicPartition,
    error_data,
)
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import batch_base_offset, batch_end, iter_batches

if TYPE_CHECKING:
    from purgatory.broker.log.log import Log
    from purgatory.broker.replication.replica_manager import ReplicaManager

log = structlog.get_logger("delayed_remote_fetch")


class DelayedRemoteFetch(DelayedOperation):
    """A fetch with partitions below their local log start, whose remote reads were
    submitted to the reader pool. Its timeout is ``remote.fetch.max.wait.ms``, not the
    fetch's ``max_wait_ms``. It completes when:

    A. every remote read has finished (with records or with its error);
    B. this broker no longer leads, or no longer knows, one of those partitions;
    C. ``remote.fetch.max.wait.ms`` passes (expiration).

    On completion a finished read's records (or its error) answer its partition; a read
    still queued or running is cancelled and its partition answered empty, with no error
    (the client fetches again). The other partitions are answered as they were read when
    the fetch arrived, as in Kafka. ``wait_time_ms`` is the time spent here. A
    read_committed fetch (its entry as read has aborted transactions, maybe none) gets
    those overlapping the batches read (the remote tier holds only stable offsets).
    """

    __slots__ = ("created_at", "partitions", "reads", "replica_manager", "response")

    def __init__(
        self,
        delay_ms: int,
        partitions: list[tuple[TopicPartition, FetchPartitionData]],
        reads: dict[TopicPartition, asyncio.Future[bytes]],
        replica_manager: ReplicaManager,
        created_at: float,
    ) -> None:
        super().__init__(delay_ms)
        self.partitions = partitions  # as read when the fetch arrived
        self.reads = reads
        self.replica_manager = replica_manager
        self.created_at = created_at  # the scheduler's precise clock, seconds
        self.response: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        rm = self.replica_manager
        for topic, index in self.reads:
            if isinstance(rm.leader_partition(topic, index), ErrorCode):  # case B
                return self.force_complete()
        if all(read.done() for read in self.reads.values()):  # case A
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        rm = self.replica_manager
        rm.parked.pop(self.response, None)
        filled: dict[TopicPartition, FetchPartitionData] = {}
        as_read = dict(self.partitions)
        sent = 0
        for (topic, index), read in self.reads.items():
            partition = rm.leader_partition(topic, index)
            if isinstance(partition, ErrorCode):
                if read.done() and not read.cancelled():
                    read.exception()  # retrieved: the partition's error answers instead
                read.cancel()
                filled[(topic, index)] = error_data(partition)
                continue
            hw, start = partition.high_watermark, partition.log.log_start_offset
            if not read.done():
                read.cancel()  # expired: the client fetches again
                filled[(topic, index)] = FetchPartitionData(ErrorCode.NONE, hw, start, NO_DATA)
            elif read.cancelled():
                filled[(topic, index)] = FetchPartitionData(ErrorCode.NONE, hw, start, NO_DATA)
            elif (error := read.exception()) is not None:
                # Kafka answers a failed remote read with the error its exception maps to:
                # UNKNOWN_SERVER_ERROR for a RemoteStorageException.
                if not isinstance(error, RemoteStorageError):
                    log.error("remote_read_failed", topic=topic, partition=index, error=repr(error))
                filled[(topic, index)] = FetchPartitionData(
                    ErrorCode.UNKNOWN_SERVER_ERROR, hw, start, NO_DATA
                )
            else:
                records = read.result()
                sent += len(records)
                first = as_read[(topic, index)]
                aborted = first.aborted_transactions
                if aborted is not None:
                    aborted = _aborted_transactions(partition.log, records)
                filled[(topic, index)] = FetchPartitionData(
                    ErrorCode.NONE, hw, start, records, first.last_stable_offset, aborted
                )
        rm.metrics.bytes_out += sent
        partitions = replace_partitions(self.partitions, filled)
        if self.response.done():  # the client went away meanwhile
            return
        wait_ms = self.replica_manager.waited_ms(self.created_at)
        self.response.set_result(rm.fetch_result(partitions, wait_ms))

    def on_expiration(self) -> None:
        self.replica_manager.replication_metrics.remote_fetch_expirations += 1


def _aborted_transactions(log: Log, records: bytes) -> tuple[tuple[int, int], ...]:
    """The aborted transactions overlapping the whole batches in ``records``."""
    batches = list(iter_batches(records))
    if not batches:
        return ()
    start = batch_base_offset(batches[0])
    return tuple(log.aborted_transactions(start, batch_end(batches[-1])))


def replace_partitions(
    partitions: list[tuple[TopicPartition, FetchPartitionData]],
    replacements: dict[TopicPartition, FetchPartitionData],
) -> list[tuple[TopicPartition, FetchPartitionData]]:
    """``partitions`` with the entries of the given partitions replaced, order kept."""
    return [(key, replacements.get(key, data)) for key, data in partitions]
