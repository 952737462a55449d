"""DelayedRemoteFetch: a fetch waiting in the "RemoteFetch" purgatory for reads from the
remote tier (KIP-1018)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from broker.log.tiered.remote_storage import RemoteStorageError
from broker.purgatory import DelayedOperation
from protocol import messages as m
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.replication.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]

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
    the fetch arrived, as in Kafka. ``wait_time_ms`` is the time spent here.
    """

    __slots__ = ("created_at", "reads", "replica_manager", "response", "responses", "version")

    def __init__(
        self,
        delay_ms: int,
        responses: list[m.FetchableTopicResponse],
        reads: dict[TopicPartition, asyncio.Future[bytes]],
        version: int,
        replica_manager: ReplicaManager,
        created_at: float,
    ) -> None:
        super().__init__(delay_ms)
        self.responses = responses
        self.reads = reads
        self.version = version
        self.replica_manager = replica_manager
        self.created_at = created_at  # the scheduler's precise clock, seconds
        self.response: asyncio.Future[m.FetchResponseV0] = (
            asyncio.get_running_loop().create_future()
        )

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
        filled: dict[TopicPartition, m.PartitionData] = {}
        sent = 0
        for (topic, index), read in self.reads.items():
            partition = rm.leader_partition(topic, index)
            if isinstance(partition, ErrorCode):
                if read.done() and not read.cancelled():
                    read.exception()  # retrieved: the partition's error answers instead
                read.cancel()
                filled[(topic, index)] = m.PartitionData(index, partition, -1, -1, b"")
                continue
            hw, start = partition.high_watermark, partition.log.log_start_offset
            if not read.done():
                read.cancel()  # expired: the client fetches again
                filled[(topic, index)] = m.PartitionData(index, ErrorCode.NONE, hw, start, b"")
            elif read.cancelled():
                filled[(topic, index)] = m.PartitionData(index, ErrorCode.NONE, hw, start, b"")
            elif (error := read.exception()) is not None:
                # Kafka answers a failed remote read with the error its exception maps to:
                # UNKNOWN_SERVER_ERROR for a RemoteStorageException.
                if not isinstance(error, RemoteStorageError):
                    log.error("remote_read_failed", topic=topic, partition=index, error=repr(error))
                filled[(topic, index)] = m.PartitionData(
                    index, ErrorCode.UNKNOWN_SERVER_ERROR, hw, start, b""
                )
            else:
                records = read.result()
                sent += len(records)
                filled[(topic, index)] = m.PartitionData(index, ErrorCode.NONE, hw, start, records)
        rm.metrics.bytes_out += sent
        responses = replace_partitions(self.responses, filled)
        if self.response.done():  # the client went away meanwhile
            return
        wait_ms = self.replica_manager.waited_ms(self.created_at)
        self.response.set_result(rm.build_fetch_response(responses, self.version, wait_ms))

    def on_expiration(self) -> None:
        self.replica_manager.metrics.remote_fetch_expirations += 1


def replace_partitions(
    responses: list[m.FetchableTopicResponse],
    replacements: dict[TopicPartition, m.PartitionData],
) -> list[m.FetchableTopicResponse]:
    """``responses`` with the entries of the given partitions replaced, order kept."""
    return [
        m.FetchableTopicResponse(
            t.topic, [replacements.get((t.topic, p.partition_index), p) for p in t.partitions]
        )
        for t in responses
    ]
