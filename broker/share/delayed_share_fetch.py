"""A share consumer's fetch (KIP-932): read the leader's log from each SharePartition's next
fetch offset, acquire what was read for the member, and DelayedShareFetch, the fetch that
waits in the "ShareFetch" purgatory when there is nothing to acquire (Kafka's
DelayedShareFetch and ShareFetchUtils)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from purgatory.broker.log.log import OffsetOutOfRange
from purgatory.broker.purgatory import DelayedOperation
from purgatory.broker.share.share_partition import AcquiredRecords
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_records import as_kafka_batches
from purgatory.protocol.records import batch_base_offset, batch_end

if TYPE_CHECKING:
    from purgatory.broker.replication.fetch_params import TopicPartition
    from purgatory.broker.replication.replica_manager import ReplicaManager
    from purgatory.broker.share.share_partition_manager import SharePartitionManager


class ShareFetchParams(msgspec.Struct, gc=False):
    group_id: str
    member_id: str
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # bound for the whole response (the first batch may exceed it, KIP-74)
    max_records: int  # the most records acquired for this request, across its partitions
    partitions: tuple[TopicPartition, ...]  # request order


class SharePartitionData(NamedTuple):
    """One partition's answer: its error, the log batches covering what was acquired (v2
    batches, as Fetch serves Kafka clients) and the acquired runs of offsets."""

    error: int
    records: bytes
    acquired: list[AcquiredRecords]


NOTHING = SharePartitionData(ErrorCode.NONE, b"", [])


class ShareFetchResult(NamedTuple):
    partitions: list[tuple[TopicPartition, SharePartitionData]]  # request order
    acquired: int  # records acquired, across the partitions
    errored: bool  # some partition was answered with an error


def share_fetch(
    params: ShareFetchParams, manager: SharePartitionManager, replica_manager: ReplicaManager
) -> ShareFetchResult:
    """Read and acquire once in every partition of ``params``, within its byte and record
    limits; it does not wait. A partition this broker does not lead (or know) is answered
    with the reason."""
    out: list[tuple[TopicPartition, SharePartitionData]] = []
    remaining_bytes = params.max_bytes
    remaining_records = params.max_records
    acquired_total = 0
    errored = False
    for key in params.partitions:
        share_partition = manager.share_partition(params.group_id, *key)
        if isinstance(share_partition, ErrorCode):
            errored = True
            out.append((key, SharePartitionData(share_partition, b"", [])))
            continue
        if remaining_records <= 0 or not share_partition.can_acquire():
            out.append((key, NOTHING))
            continue
        partition = replica_manager.partitions[key]
        log = partition.log
        high_watermark = partition.high_watermark
        offset = max(share_partition.next_fetch_offset(), log.local_log_start_offset)
        if offset >= high_watermark:
            out.append((key, NOTHING))
            continue
        limit = max(remaining_bytes, 0)
        try:
            # The first batch of the response always (KIP-74), later ones within the limit.
            batches = log.read(offset, limit if acquired_total else max(limit, 1), high_watermark)
        except OffsetOutOfRange:
            out.append((key, NOTHING))
            continue
        # Nothing past the in-flight window's limit can be acquired: not listed.
        ceiling = max(share_partition.start_offset, offset) + share_partition.max_record_locks
        offsets = [
            o
            for batch in batches
            for o in range(max(batch_base_offset(batch), offset), min(batch_end(batch), ceiling))
        ]
        acquired = share_partition.acquire(params.member_id, offsets, remaining_records)
        if not acquired:
            out.append((key, NOTHING))
            continue
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        covering = [b for b in batches if batch_end(b) > first and batch_base_offset(b) <= last]
        records = as_kafka_batches(b"".join(covering))
        count = sum(a.last_offset - a.first_offset + 1 for a in acquired)
        remaining_records -= count
        remaining_bytes -= len(records)
        acquired_total += count
        replica_manager.metrics.bytes_out += len(records)
        out.append((key, SharePartitionData(ErrorCode.NONE, records, acquired)))
    return ShareFetchResult(out, acquired_total, errored)


def watch_keys(params: ShareFetchParams) -> tuple[object, ...]:
    """A waiting share fetch's keys in the ShareFetch purgatory: each partition (woken by
    appends, high watermark moves and leadership changes) and each (group, partition)
    (woken when the group's records there become available again)."""
    return (*params.partitions, *((params.group_id, *key) for key in params.partitions))


class DelayedShareFetch(DelayedOperation):
    """A share fetch that found nothing to acquire and may wait ``max_wait_ms``.

    It completes (then reads, acquires and answers) when:

    A. this broker no longer leads one of the partitions, or no longer knows it;
    B. the bytes below the high watermarks from the SharePartitions' next fetch offsets, in
       partitions that may acquire, reach ``min_bytes`` (at least one record);
    C. ``max_wait_ms`` passes (expiration): it answers what it can acquire then.

    Records are acquired only when it completes, so a fetch that waits holds no lock.
    """

    __slots__ = ("manager", "params", "replica_manager", "response")

    def __init__(
        self,
        params: ShareFetchParams,
        manager: SharePartitionManager,
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.manager = manager
        self.replica_manager = replica_manager
        loop = asyncio.get_running_loop()
        self.response: asyncio.Future[ShareFetchResult] = loop.create_future()

    def try_complete(self) -> bool:
        params = self.params
        accumulated = 0
        for key in params.partitions:
            share_partition = self.manager.share_partition(params.group_id, *key)
            if isinstance(share_partition, ErrorCode):  # case A
                return self.force_complete()
            if not share_partition.can_acquire():
                continue
            partition = self.replica_manager.partitions[key]
            offset = share_partition.next_fetch_offset()
            high_watermark = partition.high_watermark
            if offset < high_watermark:
                accumulated += max(partition.log.available_bytes(offset, high_watermark), 1)
        if accumulated >= max(params.min_bytes, 1):
            return self.force_complete()  # case B
        return False

    def on_complete(self) -> None:
        self.replica_manager.parked.pop(self.response, None)
        if self.response.done():  # the client went away meanwhile: acquire nothing
            return
        self.response.set_result(share_fetch(self.params, self.manager, self.replica_manager))
