"""Scenarios of the read-only record APIs: OffsetForLeaderEpoch (a client's, KIP-320),
DescribeLogDirs, DescribeProducers and DescribeTopicPartitions (KIP-966)."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    batch,
    create,
    init_producer_id,
    produce,
    scenario,
    topic_ready,
    topic_with_records,
)
from tests.differential.scenarios.delete_records import delete_records

OFFSET_FOR_LEADER_EPOCH = 4
DESCRIBE_LOG_DIRS = 4
DESCRIBE_PRODUCERS = 0
DESCRIBE_TOPIC_PARTITIONS = 0


async def epoch_end(
    c: Client,
    label: str,
    topic: str,
    leader_epoch: int,
    current_leader_epoch: int = -1,
    partition: int = 0,
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        OFFSET_FOR_LEADER_EPOCH,
        replica_id=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": current_leader_epoch,
                        "leader_epoch": leader_epoch,
                    }
                ],
            }
        ],
    )


# -- OffsetForLeaderEpoch --------------------------------------------------------------------


@scenario
async def offset_for_leader_epoch(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b", b"c")
    await epoch_end(c, "current_epoch", topic, 0, 0)
    await epoch_end(c, "current_epoch_unchecked", topic, 0)
    await epoch_end(c, "epoch_after_the_latest", topic, 3, 0)
    await epoch_end(c, "no_epoch", topic, -1, 0)
    await epoch_end(c, "asker_ahead", topic, 0, 1)
    await epoch_end(c, "unknown_partition", topic, 0, partition=4)
    await epoch_end(c, "unknown_topic", c.topic("missing"), 0)


@scenario
async def offset_for_leader_epoch_of_an_empty_log(c: Client) -> None:
    topic = await topic_with_records(c)
    await epoch_end(c, "current_epoch", topic, 0, 0)


@scenario
async def offset_for_leader_epoch_after_delete_records(c: Client) -> None:
    """An epoch older than every epoch the log still holds (-2 here: a 1-node log has only
    epoch 0) is answered as itself, ending where the first one held now starts."""
    topic = await topic_with_records(c, b"a", b"b", b"c", b"d")
    await epoch_end(c, "older_than_any", topic, -2, 0)
    await delete_records(c, "delete_to_2", topic, 2)
    await epoch_end(c, "older_than_any_after", topic, -2, 0)
    await epoch_end(c, "current_after", topic, 0, 0)
    await delete_records(c, "delete_all", topic, -1)
    await epoch_end(c, "older_than_any_when_empty", topic, -2, 0)


# -- DescribeLogDirs -------------------------------------------------------------------------


@scenario
async def describe_log_dirs(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    await c.call(
        "describe",
        ApiKey.DESCRIBE_LOG_DIRS,
        DESCRIBE_LOG_DIRS,
        topics=[
            {"topic": topic, "partitions": [0, 5]},
            {"topic": c.topic("missing"), "partitions": [0]},
        ],
    )
    await c.call(
        "describe_nothing_held",
        ApiKey.DESCRIBE_LOG_DIRS,
        DESCRIBE_LOG_DIRS,
        topics=[{"topic": c.topic("missing"), "partitions": [0]}],
    )


# -- DescribeProducers -----------------------------------------------------------------------


async def describe_producers(c: Client, label: str, *topics: tuple[str, list[int]]) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_PRODUCERS,
        DESCRIBE_PRODUCERS,
        topics=[{"name": name, "partition_indexes": indexes} for name, indexes in topics],
    )


@scenario
async def describe_producers_of_idempotent_batches(c: Client) -> None:
    topic = await topic_with_records(c, partitions=2)
    await describe_producers(c, "before", (topic, [0, 1]))
    init = await init_producer_id(c, "init_producer_id")
    pid = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    await produce(c, "seq_0", topic, batch(b"a", b"b", base_sequence=0, **pid))
    await produce(c, "seq_2", topic, batch(b"c", ts=1_700_000_000_500, base_sequence=2, **pid))
    await produce(c, "plain", topic, batch(b"d"), partition=1)
    await describe_producers(c, "after", (topic, [0, 1, 7]), (c.topic("missing"), [0]))


# -- DescribeTopicPartitions -----------------------------------------------------------------


async def describe_partitions(
    c: Client, label: str, names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        DESCRIBE_TOPIC_PARTITIONS,
        topics=[{"name": n} for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    )


@scenario
async def describe_topic_partitions_by_cursor(c: Client) -> None:
    a, b = c.topic("a"), c.topic("b")
    await create(c, "create", {"name": b, "num_partitions": 2}, {"name": a, "num_partitions": 3})
    await topic_ready(c, a)
    await topic_ready(c, b)
    names = [b, a, c.topic("missing"), "bad/name"]
    await describe_partitions(c, "first_page", names, 2)
    await describe_partitions(c, "second_page", names, 2, (a, 2))
    await describe_partitions(c, "last_page", names, 2, (b, 1))
    await describe_partitions(c, "exactly_one_topic", names, 3)
    await describe_partitions(c, "all_at_once", names, 2000)
    await describe_partitions(c, "limit_0", [a], 0)
    await describe_partitions(c, "cursor_past_the_end", [a], 10, (a, 7))
    await describe_partitions(c, "cursor_not_named", [b], 10, (a, 0))
    await describe_partitions(c, "cursor_negative_partition", [a], 10, (a, -1))
