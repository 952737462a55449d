"""Scenarios of one group member and of offsets: FindCoordinator, the member's lifecycle and
its errors, requests to unknown groups, OffsetCommit/OffsetFetch."""

from __future__ import annotations

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import FIND_COORDINATOR, scenario, topic_with_records
from tests.differential.scenarios.group_requests import (
    commit,
    coordinator_ready,
    heartbeat,
    join,
    leave,
    offset_fetch,
    sync,
)


@scenario
async def find_coordinator_of_a_group(c: Client) -> None:
    group = c.topic("group")
    await coordinator_ready(c, group)
    await c.call(
        "find", ApiKey.FIND_COORDINATOR, FIND_COORDINATOR, key_type=0, coordinator_keys=[group]
    )
    await c.call("find_v3", ApiKey.FIND_COORDINATOR, 3, key_type=0, key=group)


@scenario
async def group_member_lifecycle_and_its_errors(c: Client) -> None:
    await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    first = await join(c, "join_without_member_id", group)
    member = first.member_id
    joined = await join(c, "join", group, member)
    generation = joined.generation_id
    await sync(c, "sync_wrong_generation", group, member, generation + 1)
    await sync(c, "sync_unknown_member", group, "nobody", generation)
    await sync(c, "sync", group, member, generation)
    await heartbeat(c, "heartbeat", group, member, generation)
    await heartbeat(c, "heartbeat_wrong_generation", group, member, generation + 1)
    await heartbeat(c, "heartbeat_older_generation", group, member, generation - 1)
    await heartbeat(c, "heartbeat_unknown_member", group, "nobody", generation)
    await commit(c, "commit", group, c.topic(), 1, member, generation)
    await commit(c, "commit_illegal_generation", group, c.topic(), 1, member, generation + 5)
    await commit(c, "commit_unknown_member", group, c.topic(), 1, "nobody", generation)
    await offset_fetch(c, "offset_fetch", group, [c.topic()])
    await leave(c, "leave_unknown_member", group, "nobody")
    await leave(c, "leave", group, member)
    await heartbeat(c, "heartbeat_after_leaving", group, member, generation)
    await offset_fetch(c, "offset_fetch_after_leaving", group, None)


@scenario
async def group_join_errors(c: Client) -> None:
    group = c.topic("group")
    await coordinator_ready(c, group)
    await join(c, "session_timeout_too_short", group, session_timeout=1000)
    await join(c, "unknown_member_id", group, "nobody")
    await join(c, "empty_group_id", "")


@scenario
async def group_requests_to_an_unknown_group(c: Client) -> None:
    group = c.topic("nogroup")
    await coordinator_ready(c, group)
    await heartbeat(c, "heartbeat", group, "nobody", 1)
    await sync(c, "sync", group, "nobody", 1)
    await leave(c, "leave", group, "nobody")
    await offset_fetch(c, "offset_fetch", group, [c.topic()])


@scenario
async def offset_commit_and_fetch_standalone(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    group = c.topic("group")
    await coordinator_ready(c, group)
    await commit(c, "commit", group, topic, 2)
    await offset_fetch(c, "fetch_one", group, [topic])
    await offset_fetch(c, "fetch_all", group, None)
    await commit(c, "commit_again", group, topic, 1)
    await offset_fetch(c, "fetch_after_rewind", group, [topic])
    await offset_fetch(c, "fetch_uncommitted_topic", group, [c.topic("other")])
    await commit(c, "commit_unknown_topic", group, c.topic("missing"), 1)
