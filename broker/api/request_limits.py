"""How much one request may name, on either protocol: more is refused with INVALID_REQUEST
(a bounded loop per request on the event loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purgatory.protocol.api import RequestError
from purgatory.protocol.errors import ErrorCode

MAX_PARTITIONS_PER_REQUEST = 10000


def check_topic_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"at most {MAX_PARTITIONS_PER_REQUEST} topics per request"
        )


def _partitions_of(topic: Any) -> list[Any]:
    return topic.partitions  # type: ignore[no-any-return]


def check_partition_count(
    topics: list[Any], partitions_of: Callable[[Any], list[Any]] = _partitions_of
) -> None:
    """Refuse requests naming more partitions than one request may (bounded loop time)."""
    if len(topics) == 1 and len(partitions_of(topics[0])) <= MAX_PARTITIONS_PER_REQUEST:
        return
    count = 0
    for topic in topics:
        count += len(partitions_of(topic))
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"request names {count} partitions; at most {MAX_PARTITIONS_PER_REQUEST} are served per request",
        )
