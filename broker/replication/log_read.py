"""Reading a fetch's partitions from the local logs (Kafka's ``readFromLocalLog``).

One pass over the partitions a fetch asks for, under the fetch's byte limits; it does not
wait and knows no purgatory. The replica manager decides from the result whether the
fetch is answered now, parked in the Fetch purgatory or sent to the remote tier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from purgatory.broker.log.log import OffsetOutOfRange
from purgatory.broker.log.tiered.remote_log_manager import RemoteLogManager
from purgatory.broker.log.tiered.remote_storage import RemoteFetchInfo
from purgatory.broker.replication.fetch_params import (
    NO_DATA,
    FetchParams,
    FetchPartitionData,
    TopicPartition,
    error_data,
)
from purgatory.broker.replication.partition import Partition
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import batch_end

# (topic, partition, the asker's current leader epoch or -1) -> the partition if this
# broker leads it in that epoch, else why not
LeaderLookup = Callable[[str, int, int], Partition | ErrorCode]


class LogReadResult(NamedTuple):
    partitions: list[tuple[TopicPartition, FetchPartitionData]]  # request order
    bytes_read: int  # record bytes in the answers
    errored: bool  # some partition was answered with an error
    remote: list[RemoteFetchInfo]  # reads the remote tier has to make


def read_from_local_log(
    params: FetchParams, leader_partition: LeaderLookup, remote_log_manager: RemoteLogManager
) -> LogReadResult:
    """Read every requested partition once.

    ``max_bytes`` bounds the whole response, each partition's own ``max_bytes`` that
    partition; the first batch of the response is returned even when it alone exceeds
    them (KIP-74), so a consumer never gets stuck behind a large batch. Consumers read up
    to the high watermark (read_committed ones to the last stable offset, and are told
    the aborted transactions of what they read), followers up to the log end. A
    consumer's offset in the remote
    tier yields a remote read (of up to the partition's ``max_bytes``) and an empty entry
    for now; a follower's is out of range, with the *local* log start (it replicates only
    the local tier and starts over there).
    """
    follower = params.replica_id >= 0
    committed = not follower and params.isolation_level == 1
    remaining = params.max_bytes
    out: list[tuple[TopicPartition, FetchPartitionData]] = []
    remote: list[RemoteFetchInfo] = []
    sent = 0
    errored = False
    for key, asked in params.partitions:
        offset, max_bytes = asked.fetch_offset, asked.max_bytes
        partition = leader_partition(*key, asked.current_leader_epoch)
        if isinstance(partition, ErrorCode):
            errored = True
            out.append((key, error_data(partition)))
            continue
        log = partition.log
        hw = partition.high_watermark
        lso = partition.last_stable_offset
        if not follower and log.in_remote_tier(offset):
            info = remote_log_manager.remote_fetch_info(
                partition, offset, min(max_bytes, params.max_bytes)
            )
            if info is not None:
                remote.append(info)
                # (read_committed: the remote read's aborted transactions come with it)
                none = () if committed else None
                data = FetchPartitionData(0, hw, log.log_start_offset, NO_DATA, lso, none)
                out.append((key, data))
                continue
        limit = max(min(max_bytes, remaining), 0)
        upper = log.log_end_offset if follower else lso if committed else hw
        try:
            batches = log.read(offset, limit if sent else max(limit, 1), upper)
        except OffsetOutOfRange:
            errored = True
            start = log.local_log_start_offset if follower else log.log_start_offset
            out.append(
                (key, FetchPartitionData(ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, NO_DATA, lso))
            )
            continue
        if batches and sent and sum(len(b) for b in batches) > limit:
            batches = []
        records = b"".join(batches) if batches else NO_DATA
        sent += len(records)
        remaining -= len(records)
        aborted = None
        if committed:  # Kafka's collectAbortedTransactions over what is returned
            aborted = (
                tuple(log.aborted_transactions(offset, batch_end(batches[-1]))) if batches else ()
            )
        out.append((key, FetchPartitionData(0, hw, log.log_start_offset, records, lso, aborted)))
    return LogReadResult(out, sent, errored, remote)
