"""Scenarios of ElectLeaders on one broker: every partition already has the leader any
election would give it, so these compare what Kafka's controller answers when nothing is
to be done and when the request is wrong (its results, errors and messages)."""

from __future__ import annotations

import dataclasses
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import scenario, topic_with_records

PREFERRED, UNCLEAN = 0, 1


async def elect(
    c: Client,
    label: str,
    election_type: int,
    partitions: dict[str, list[int]] | None,
    version: int = 2,
    view: Any = None,
) -> Any:
    named = (
        None
        if partitions is None
        else [{"topic": t, "partitions": p} for t, p in partitions.items()]
    )
    return await c.call(
        label,
        ApiKey.ELECT_LEADERS,
        version,
        view=view,
        lenient=True,
        election_type=election_type,
        topic_partitions=named,
        timeout=10_000,
    )


@scenario
async def elect_leaders_not_needed(c: Client) -> None:
    topic = await topic_with_records(c, b"a", partitions=2)
    await elect(c, "preferred", PREFERRED, {topic: [0, 1]})
    await elect(c, "unclean", UNCLEAN, {topic: [1]})
    for version in (0, 1):
        await elect(c, f"preferred_v{version}", PREFERRED, {topic: [0]}, version=version)

    def own(response: Any) -> Any:
        mine = [r for r in response.replica_election_results if r.topic.startswith(c.prefix)]
        return dataclasses.replace(response, replica_election_results=mine)

    # Every partition: those needing no election are left out, their topic listed.
    await elect(c, "every_partition_preferred", PREFERRED, None, view=own)
    await elect(c, "every_partition_unclean", UNCLEAN, None, view=own)


@scenario
async def elect_leaders_refused(c: Client) -> None:
    topic = await topic_with_records(c)
    await elect(c, "partition_5_of_1", PREFERRED, {topic: [5]})
    await elect(c, "unknown_topic", UNCLEAN, {c.topic("missing"): [0]})
    await elect(c, "unknown_type", 2, {topic: [0]})
    await elect(c, "unknown_type_v1", 7, {topic: [0], c.topic("missing"): [0, 1]}, version=1)
