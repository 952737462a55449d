"""A Fetch request of either protocol as the replica manager is asked it: bounds checked
(INVALID_REQUEST where one is negative, as Kafka's FetchRequest validation), then
``FetchParams``. The handlers differ only in how they find the fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from purgatory.broker.api.authorization import unauthorized_topics
from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    PartitionFetchInfo,
    TopicPartition,
    error_data,
)
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol.api import RequestError
from purgatory.protocol.errors import ErrorCode

# A topic fetched by an id the broker does not know is named "?" and its id (no topic can
# be: "?" is not allowed in names); Kafka answers it UNKNOWN_TOPIC_ID before authorizing.
UNKNOWN_ID = "?"

T = TypeVar("T")


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


Refusals = list[tuple[TopicPartition, FetchPartitionData]]


def fetch_refusals(auth: AuthHelper, params: FetchParams) -> tuple[FetchParams, Refusals]:
    """Kafka's Fetch authorization (handleFetchRequest): a consumer needs READ on each
    topic, a follower CLUSTER_ACTION (a broker's connection has it); a partition refused
    is TOPIC_AUTHORIZATION_FAILED, left out of the fetch and answered after the rest."""
    if not auth.enabled:
        return params, []
    names = {key[0] for key, _ in params.partitions if not key[0].startswith(UNKNOWN_ID)}
    if params.replica_id >= 0:
        denied = frozenset() if auth.authorize_cluster(AclOperation.CLUSTER_ACTION) else names
    else:
        denied = unauthorized_topics(auth, AclOperation.READ, names)
    if not denied:
        return params, []
    refused = error_data(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    kept = tuple([entry for entry in params.partitions if entry[0][0] not in denied])
    refusals = [(key, refused) for key, _ in params.partitions if key[0] in denied]
    return msgspec.structs.replace(params, partitions=kept), refusals


def with_fetch_refusals(
    respond: Callable[[FetchResult], T], refusals: Refusals
) -> Callable[[FetchResult], T]:
    """``respond`` to the partitions fetched, then those ``refusals`` (Kafka's order)."""
    if not refusals:
        return respond

    def answer(result: FetchResult) -> T:
        return respond(msgspec.structs.replace(result, partitions=result.partitions + refusals))

    return answer
