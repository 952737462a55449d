"""Scenarios of CreatePartitions (growing, the counts and assignments it refuses) and
DescribeCluster, at every version Purgatory advertises."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    every_version,
    metadata,
    scenario,
    topic_ready,
    topic_with_records,
    versions,
)


async def grow(
    c: Client, label: str, version: int, *changes: tuple[str, int, list[list[int]] | None]
) -> Any:
    """CreatePartitions of (topic, new count, assignments of the added partitions)."""
    return await c.call(
        label,
        ApiKey.CREATE_PARTITIONS,
        version,
        topics=[
            {
                "name": name,
                "count": count,
                "assignments": None
                if assignments is None
                else [{"broker_ids": b} for b in assignments],
            }
            for name, count, assignments in changes
        ],
        timeout=10_000,
        validate_only=False,
    )


@scenario
async def create_partitions_at_every_version(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    count = 1
    for version in versions(ApiKey.CREATE_PARTITIONS):
        count += 1
        await grow(c, f"grow_to_{count}_v{version}", version, (topic, count, None))
        await topic_ready(c, topic)
    await metadata(c, "metadata", [topic])
    last = max(versions(ApiKey.CREATE_PARTITIONS))
    await grow(c, "same_count", last, (topic, count, None))
    await grow(c, "fewer", last, (topic, 1, None))
    await grow(c, "unknown_topic", last, (c.topic("missing"), 3, None))
    await grow(c, "assignment_to_missing_broker", last, (topic, count + 1, [[7]]))
    await grow(c, "assignments_short", last, (topic, count + 2, [[0]]))
    await grow(c, "twice", last, (topic, count + 1, None), (topic, count + 1, None))
    await grow(c, "with_assignment", last, (topic, count + 1, [[0]]))
    await topic_ready(c, topic)
    await metadata(c, "metadata_after", [topic])


@scenario
async def describe_cluster_at_every_version(c: Client) -> None:
    await every_version(
        c,
        "describe_cluster",
        ApiKey.DESCRIBE_CLUSTER,
        include_cluster_authorized_operations=False,
        endpoint_type=1,
    )
