"""A Fetch request of either protocol as the replica manager is asked it: bounds checked
(INVALID_REQUEST where one is negative, as Kafka's FetchRequest validation), then
``FetchParams``. The handlers differ only in how they find the fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.replication.fetch_params import FetchParams, PartitionFetchInfo
from purgatory.protocol.api import RequestError
from purgatory.protocol.errors import ErrorCode


def fetch_params(
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: list[Any],
    name_of: Callable[[Any], str],
    replica_epoch: int = -1,
    negative_offset_refused: bool = True,
    isolation_level: int = 0,
) -> FetchParams:
    """``topics`` is the request's topic list, each topic named by ``name_of`` and with
    ``partitions`` that have ``partition``, ``fetch_offset``, ``partition_max_bytes`` and,
    from Kafka's Fetch v9 (KIP-320), ``current_leader_epoch`` (-1, not checked, before;
    any negative one is none).
    Without ``negative_offset_refused`` a negative ``fetch_offset`` is fetched, and answered
    OFFSET_OUT_OF_RANGE for its partition alone, as Kafka's listener does.
    ``isolation_level``: 1 reads committed records only (Kafka's READ_COMMITTED)."""
    if max_bytes < 0 or min_bytes < 0 or max_wait_ms < 0:
        raise RequestError(
            ErrorCode.INVALID_REQUEST, "max_wait_ms, min_bytes and max_bytes must not be negative"
        )
    check_partition_count(topics)
    partitions = []
    for topic in topics:
        name = name_of(topic)
        for p in topic.partitions:
            if p.partition_max_bytes < 0 or (negative_offset_refused and p.fetch_offset < 0):
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    "fetch_offset and partition_max_bytes must not be negative",
                )
            # Any negative epoch is none in a Fetch (Kafka's FetchRequest.optionalEpoch),
            # where OffsetForLeaderEpoch and ListOffsets take only -1 as none.
            epoch = max(getattr(p, "current_leader_epoch", -1), -1)
            log_start = getattr(p, "log_start_offset", -1)
            info = PartitionFetchInfo(p.fetch_offset, p.partition_max_bytes, epoch, log_start)
            partitions.append(((name, p.partition), info))
    return FetchParams(
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        tuple(partitions),
        replica_epoch,
        1 if isolation_level == 1 else 0,
    )
