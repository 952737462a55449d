"""Scenarios of DeleteRecords, and what ListOffsets and Fetch answer after it."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    EARLIEST,
    LATEST,
    create,
    fetch,
    list_offsets,
    scenario,
    topic_ready,
    topic_with_records,
)

DELETE_RECORDS = 2


async def delete_records(
    c: Client, label: str, topic: str, offset: int, partition: int = 0, timeout: int = 10_000
) -> Any:
    return await c.call(
        label,
        ApiKey.DELETE_RECORDS,
        DELETE_RECORDS,
        topics=[{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
        timeout=timeout,
    )


@scenario
async def delete_records_moves_the_log_start(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b", b"c", b"d", b"e", b"f")
    await delete_records(c, "delete_to_3", topic, 3)
    await list_offsets(c, "earliest_after", topic, EARLIEST)
    await list_offsets(c, "latest_after", topic, LATEST)
    await fetch(c, "fetch_below_the_start", topic, 1)
    await fetch(c, "fetch_at_the_start", topic, 3)
    await delete_records(c, "delete_below_the_start_again", topic, 2)
    await delete_records(c, "delete_to_the_high_watermark", topic, -1)
    await list_offsets(c, "earliest_at_the_end", topic, EARLIEST)


@scenario
async def delete_records_refused(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    await delete_records(c, "past_the_high_watermark", topic, 3)
    await delete_records(c, "below_minus_one", topic, -2)
    await delete_records(c, "partition_5_of_1", topic, 0, partition=5)
    await delete_records(c, "unknown_topic", c.topic("missing"), 0)
    await list_offsets(c, "earliest_unmoved", topic, EARLIEST)


@scenario
async def delete_records_of_a_compacted_topic(c: Client) -> None:
    topic = c.topic()
    compact = [{"name": "cleanup.policy", "value": "compact"}]
    await create(c, "create", {"name": topic, "configs": compact})
    await topic_ready(c, topic)
    await delete_records(c, "compacted", topic, 0)
