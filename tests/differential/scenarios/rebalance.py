"""Scenarios of classic groups with more than one member: a second member's join rebalances
the group (heartbeats answer REBALANCE_IN_PROGRESS, the first member rejoins, the leader's
SyncGroup hands out the assignment), stale generations, a batch LeaveGroup, static members
replacing themselves (FENCED_INSTANCE_ID), and the group admin APIs around them."""

from __future__ import annotations

import asyncio

from tests.differential.harness import Client
from tests.differential.scenarios.base import scenario, topic_with_records
from tests.differential.scenarios.group_requests import (
    commit,
    coordinator_ready,
    delete_groups,
    describe_groups,
    heartbeat,
    join,
    leave,
    list_groups,
    offset_fetch,
    state_is,
    sync,
)


async def first_member(c: Client, group: str) -> tuple[str, int]:
    """The group's first member (member id required, then joined and synced): its id and
    the generation."""
    await topic_with_records(c, b"a")
    await coordinator_ready(c, group)
    member = (await join(c, "a_join_without_member_id", group)).member_id
    generation = (await join(c, "a_join", group, member)).generation_id
    await sync(c, "a_sync", group, member, generation)
    return member, generation


@scenario
async def group_second_member_rebalances(c: Client) -> None:
    group = c.topic("group")
    a, gen1 = await first_member(c, group)
    other = await c.connect()
    b = (await join(other, "b_join_without_member_id", group)).member_id
    b_joins = asyncio.create_task(join(other, "b_join", group, b))
    await state_is(c, group, "PreparingRebalance")
    await heartbeat(c, "a_heartbeat_in_rebalance", group, a, gen1)
    await commit(c, "a_commit_in_rebalance", group, c.topic(), 1, a, gen1)
    await describe_groups(c, "describe_preparing", group)
    await list_groups(c, "list_preparing", ["PreparingRebalance"])
    gen2 = (await join(c, "a_rejoin", group, a)).generation_id
    await b_joins
    b_syncs = asyncio.create_task(sync(other, "b_sync", group, b, gen2))
    await state_is(c, group, "CompletingRebalance")
    await heartbeat(c, "a_heartbeat_completing", group, a, gen2)
    await commit(c, "a_commit_completing", group, c.topic(), 1, a, gen2)
    await sync(c, "a_sync_as_leader", group, a, gen2, b)
    await b_syncs
    await heartbeat(c, "a_heartbeat_stale_generation", group, a, gen1)
    await heartbeat(other, "b_heartbeat", group, b, gen2)
    await commit(c, "a_commit_stale_generation", group, c.topic(), 1, a, gen1)
    await commit(other, "b_commit", group, c.topic(), 1, b, gen2)
    await describe_groups(c, "describe_stable", group)
    await list_groups(c, "list_stable", ["Stable"])
    await list_groups(c, "list_empty_filter_matches_none", ["Empty"])
    await delete_groups(c, "delete_non_empty", group)
    await leave(other, "b_and_unknown_leave", group, b, "nobody")
    await heartbeat(c, "a_heartbeat_after_b_left", group, a, gen2)
    gen3 = (await join(c, "a_rejoin_alone", group, a)).generation_id
    await sync(c, "a_sync_alone", group, a, gen3)
    await leave(c, "a_leave", group, a)
    await describe_groups(c, "describe_empty", group)
    await delete_groups(c, "delete_empty", group)
    await describe_groups(c, "describe_deleted", group)
    await offset_fetch(c, "offset_fetch_deleted", group, [c.topic()])


@scenario
async def group_static_member_replaced(c: Client) -> None:
    await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    joined = await join(c, "join_static", group, instance="i1")
    old, generation = joined.member_id, joined.generation_id
    await sync(c, "sync", group, old, generation, instance="i1")
    new = (await join(c, "rejoin_after_restart", group, instance="i1")).member_id
    await heartbeat(c, "heartbeat_old_member_id", group, old, generation, "i1")
    await heartbeat(c, "heartbeat_new_member_id", group, new, generation, "i1")
    await commit(c, "commit_old_member_id", group, c.topic(), 1, old, generation, "i1")
    await sync(c, "sync_old_member_id", group, old, generation, instance="i1")
    await join(c, "join_old_member_id", group, old, instance="i1")
    await leave(c, "leave_wrong_member_id", group, (old, "i1"))
    await leave(c, "leave_unknown_instance", group, ("", "i2"))
    await describe_groups(c, "describe", group)
    await leave(c, "leave_by_instance", group, ("", "i1"))
    await describe_groups(c, "describe_after_leave", group)


@scenario
async def group_admin_of_unknown_and_offsets_only_groups(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    await describe_groups(c, "describe_unknown", c.topic("nogroup"))
    await delete_groups(c, "delete_unknown", c.topic("nogroup"))
    await commit(c, "commit", group, topic, 1)
    await describe_groups(c, "describe_offsets_only", group)
    await list_groups(c, "list", [], [])
    await list_groups(c, "list_classic", [], ["classic"])
    await list_groups(c, "list_consumer_type", [], ["consumer"])
    await delete_groups(c, "delete", group, c.topic("nogroup"))
    await offset_fetch(c, "offset_fetch_after_delete", group, [topic])


@scenario
async def group_member_that_does_not_rejoin_is_removed(c: Client) -> None:
    """A member that does not rejoin within the rebalance timeout (1.5 s) is dropped: the
    join that started the rebalance completes without it, as the new leader."""
    group = c.topic("group")
    await topic_with_records(c, b"a")
    await coordinator_ready(c, group)
    a = (await join(c, "a_join_without_member_id", group, rebalance_timeout=1500)).member_id
    gen1 = (await join(c, "a_join", group, a, rebalance_timeout=1500)).generation_id
    await sync(c, "a_sync", group, a, gen1)
    b = (await join(c, "b_join_without_member_id", group, rebalance_timeout=1500)).member_id
    joined = await join(c, "b_join_without_a", group, b, rebalance_timeout=1500)
    await heartbeat(c, "a_heartbeat_after_removal", group, a, gen1)
    await join(c, "a_join_after_removal", group, a, rebalance_timeout=1500)
    await sync(c, "b_sync", group, b, joined.generation_id)
    await describe_groups(c, "describe", group)


@scenario
async def group_protocol_mismatches(c: Client) -> None:
    group = c.topic("group")
    await topic_with_records(c, b"a")
    await coordinator_ready(c, group)
    a = (await join(c, "join_without_member_id", group)).member_id
    generation = (await join(c, "join", group, a)).generation_id
    await sync(c, "sync_other_protocol_type", group, a, generation, protocol=("connect", "range"))
    await sync(c, "sync_other_protocol", group, a, generation, protocol=("consumer", "sticky"))
    await sync(c, "sync", group, a, generation)
    await join(c, "join_other_protocol_type", group, protocol_type="connect")
    await join(c, "join_no_common_protocol", group, protocols=("roundrobin",))
    await join(c, "join_no_protocols", group, protocols=())
    await join(c, "join_empty_protocol_type", c.topic("group2"), protocol_type="")
    await describe_groups(c, "describe", group)


@scenario
async def group_static_leader_replaced_beside_a_dynamic_member(c: Client) -> None:
    """A static leader restarted while its group is Stable takes its place back without a
    rebalance (its new member id skips the assignment); one that comes back subscribed to
    more topics makes the group rebalance."""
    group = c.topic("group")
    await topic_with_records(c, b"a")
    await coordinator_ready(c, group)
    a_joined = await join(c, "a_join_static", group, instance="i1")
    a = a_joined.member_id
    await sync(c, "a_sync", group, a, a_joined.generation_id, instance="i1")
    other = await c.connect()
    b = (await join(other, "b_join_without_member_id", group)).member_id
    b_joins = asyncio.create_task(join(other, "b_join", group, b))
    await state_is(c, group, "PreparingRebalance")
    gen2 = (await join(c, "a_rejoin", group, a, instance="i1")).generation_id
    await b_joins
    b_syncs = asyncio.create_task(sync(other, "b_sync", group, b, gen2))
    await sync(c, "a_sync_as_leader", group, a, gen2, b, instance="i1")
    await b_syncs
    restarted = (await join(c, "a_restarted", group, instance="i1")).member_id
    await heartbeat(other, "b_heartbeat_after_a_restarted", group, b, gen2)
    await sync(c, "a_restarted_sync", group, restarted, gen2, instance="i1")
    await describe_groups(c, "describe_after_restart", group)
    more = (c.topic(), "x")
    a_rejoins = asyncio.create_task(
        join(c, "a_subscribes_to_more", group, restarted, instance="i1", topics=more)
    )
    await state_is(other, group, "PreparingRebalance")
    await heartbeat(other, "b_heartbeat_after_a_subscribed", group, b, gen2)
    await join(other, "b_rejoin", group, b)
    await a_rejoins
