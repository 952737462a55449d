"""Scenarios of KIP-848's consumer groups: ConsumerGroupHeartbeat v0 and v1 (joining by
names and by regex, its validation, reconciliation between two members, fencing, leaving
and static members), ConsumerGroupDescribe, and how the classic group APIs see a consumer
group (ListGroups' types, DescribeGroups, OffsetCommit and OffsetFetch by member epoch,
JoinGroup).

Member ids are the client's own (v1) and fixed, or the broker's (v0), symbols either way;
topic ids are symbols. Both brokers run their default server-side assignor (uniform),
and the partitions it gives each member are compared exactly (the same on both, in the
cases here); a member's assigned topics are compared as a set (the harness sorts
``topic_partitions``: Kafka lists them in a HashMap's order). Kafka's coordinator learns
of a new topic a moment after its Metadata shows it, so a scenario waits until the
coordinator assigns its topics (`coordinator_sees`) before its members join.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
import uuid
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client, body
from tests.differential.scenarios.base import (
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    create,
    scenario,
    topic_ready,
)
from tests.differential.scenarios.group_requests import (
    coordinator_ready,
    join,
    list_groups,
    sync,
)

HEARTBEAT_V = 1
DESCRIBE_V = 1
OFFSET_COMMIT_V = 9
OFFSET_FETCH_V = 9

Owned = list[tuple[uuid.UUID, list[int]]]  # (topic id, partitions) a member owns


async def cg_heartbeat(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    epoch: int,
    *,
    version: int = HEARTBEAT_V,
    topics: list[str] | None = None,
    regex: str | None = None,
    rebalance_timeout: int = -1,
    owned: Owned | None = None,
    instance: str | None = None,
    assignor: str | None = None,
    rack: str | None = None,
) -> Any:
    """ConsumerGroupHeartbeat; the fields left None are not sent (unchanged)."""
    values: dict[str, Any] = {}
    if version >= 1:
        values["subscribed_topic_regex"] = regex
    return await c.call(
        label,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        version,
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=rack,
        rebalance_timeout=rebalance_timeout,
        subscribed_topic_names=topics,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [{"topic_id": t, "partitions": ps} for t, ps in owned],
        **values,
    )


async def cg_join(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    topics: list[str] | None = None,
    *,
    version: int = HEARTBEAT_V,
    regex: str | None = None,
    instance: str | None = None,
) -> Any:
    """A member's first heartbeat (epoch 0): its subscription and rebalance timeout."""
    return await cg_heartbeat(
        c,
        label,
        group,
        member_id,
        0,
        version=version,
        topics=topics,
        regex=regex,
        rebalance_timeout=30_000,
        owned=[],
        instance=instance,
    )


def owned_of(response: Any, before: Owned | None = None) -> Owned:
    """The partitions a heartbeat's answer assigns, as the member's next owned partitions
    (``before`` when it assigns nothing new)."""
    if response is None or response.assignment is None:
        return before or []
    return [(tp.topic_id, list(tp.partitions)) for tp in response.assignment.topic_partitions]


async def cg_describe(c: Client, label: str, *groups: str) -> Any:
    """ConsumerGroupDescribe, its groups recorded sorted by id: Kafka answers them in the
    order of its coordinator partitions."""

    def by_id(response: Any) -> Any:
        return dataclasses.replace(
            response, groups=sorted(response.groups, key=lambda g: g.group_id)
        )

    return await c.call(
        label,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        DESCRIBE_V,
        view=by_id,
        group_ids=list(groups),
        include_authorized_operations=False,
    )


async def commit_v9(
    c: Client, label: str, group: str, topic: str, member_id: str, epoch: int
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_COMMIT,
        OFFSET_COMMIT_V,
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                ],
            }
        ],
    )


async def fetch_v9(
    c: Client, label: str, group: str, topic: str, member_id: str | None, epoch: int
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH_V,
        groups=[
            {
                "group_id": group,
                "member_id": member_id,
                "member_epoch": epoch,
                "topics": [{"name": topic, "partition_indexes": [0]}],
            }
        ],
        require_stable=False,
    )


async def describe_groups(c: Client, label: str, *groups: str) -> Any:
    """DescribeGroups, its groups recorded sorted by id: Kafka answers them in the order of
    its coordinator partitions."""

    def by_id(response: Any) -> Any:
        return dataclasses.replace(
            response, groups=sorted(response.groups, key=lambda g: g.group_id)
        )

    return await c.call(
        label,
        ApiKey.DESCRIBE_GROUPS,
        DESCRIBE_GROUPS,
        view=by_id,
        groups=list(groups),
        include_authorized_operations=False,
    )


def _coordinator_partition(group: str, partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it (Java's
    ``String.hashCode``, non-negative, modulo ``offsets.topic.num.partitions``)."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


async def coordinator_sees(c: Client, group: str, *topics: str) -> None:
    """Wait (unrecorded) until the group's coordinator knows ``topics``: Kafka's coordinator
    shards apply a new metadata image a moment after its Metadata answers show the topics,
    and a member joining before that is assigned nothing. A probe group of the same shard
    joins until it is assigned every topic, then leaves."""
    probe = next(
        f"probe{i}-{group}"
        for i in range(10_000)
        if _coordinator_partition(f"probe{i}-{group}") == _coordinator_partition(group)
    )
    await coordinator_ready(c, probe)
    deadline = time.monotonic() + 30
    for attempt in itertools.count():
        member = f"probe{attempt}"
        request = body(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            HEARTBEAT_V,
            group_id=probe,
            member_id=member,
            member_epoch=0,
            rebalance_timeout=30_000,
            subscribed_topic_names=list(topics),
            topic_partitions=[],
        )
        joined = await c.wire.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_V, request)
        leave = body(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            HEARTBEAT_V,
            group_id=probe,
            member_id=member,
            member_epoch=-1,
            topic_partitions=None,
        )
        await c.wire.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_V, leave)
        if joined.assignment is not None and len(joined.assignment.topic_partitions) == len(topics):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the coordinator of {group} does not see {topics} in 30 s")
        await asyncio.sleep(0.05)  # poll interval, bounded by the deadline


async def listed_as(c: Client, group: str, group_type: str) -> None:
    """Wait (unrecorded) until ListGroups lists the group of this type: Kafka lists what its
    coordinator's log has committed, a moment after it answered the request that changed
    the group."""
    await c.until(
        ApiKey.LIST_GROUPS,
        LIST_GROUPS,
        lambda r: any(g.group_id == group and g.group_type == group_type for g in r.groups),
        states_filter=[],
        types_filter=[],
    )


async def topic_of(c: Client, partitions: int, name: str = "t") -> str:
    topic = c.topic(name)
    await create(c, f"create_{name}", {"name": topic, "num_partitions": partitions})
    await topic_ready(c, topic)
    return topic


@scenario
async def consumer_group_heartbeat_refusals(c: Client) -> None:
    topic = await topic_of(c, 1)
    group = c.topic("group")
    await coordinator_ready(c, group)
    some_topic = uuid.UUID(int=7)
    for v in (0, 1):
        joining = "" if v == 0 else "m1"  # v0: the broker names a joining member

        async def refused(
            name: str, member_id: str = joining, epoch: int = 0, to: str = group, **fields: Any
        ) -> None:
            values: dict[str, Any] = {"topics": [topic], "rebalance_timeout": 30_000, "owned": []}
            values.update(fields)
            label = f"{name}_v{v}"  # noqa: B023 (awaited within the iteration)
            await cg_heartbeat(c, label, to, member_id, epoch, version=v, **values)  # noqa: B023

        await refused("empty_group_id", to="")
        await refused("empty_member_id_epoch_1", "", 1)
        await refused("empty_member_id_leaving", "", -1)
        await refused("no_rebalance_timeout", rebalance_timeout=-1)
        await refused("owned_partitions", owned=[(some_topic, [0])])
        await refused("owned_null", owned=None)
        await refused("no_subscription", topics=None)
        await refused("empty_subscription", topics=[])
        await refused("static_leave_without_instance", "m1", -2)
        await refused("epoch_below_minus_2", "m1", -3)
        await refused("unknown_assignor", assignor="nope")
        await refused("empty_instance_id", instance="")
        await refused("empty_rack_id", rack="")
        if v == 1:
            await refused("empty_member_id_joining", "", 0)
            await refused("invalid_regex", topics=None, regex="[")
            await refused("names_and_invalid_regex", regex="(")
    await cg_describe(c, "describe_nothing_joined", group)


@scenario
async def consumer_group_join_and_reconcile(c: Client) -> None:
    """Two members of one topic of 4 partitions: the second's arrival takes two partitions
    from the first, which revokes them on its next heartbeat before either moves on."""
    topic = await topic_of(c, 4)
    group = c.topic("group")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    first = await cg_join(c, "m1_joins", group, "m1", [topic])
    e1, m1 = first.member_epoch, owned_of(first)
    await cg_heartbeat(c, "m1_heartbeat", group, "m1", e1, owned=m1)
    await cg_describe(c, "describe_one_member", group)
    second = await cg_join(c, "m2_joins", group, "m2", [topic])
    e2 = second.member_epoch
    revoke = await cg_heartbeat(c, "m1_asked_to_revoke", group, "m1", e1, owned=m1)
    await cg_heartbeat(c, "m2_waits_for_partitions", group, "m2", e2, owned=[])
    await cg_describe(c, "describe_while_revoking", group)
    await cg_heartbeat(c, "m1_owns_all_still", group, "m1", e1, owned=m1)
    kept = owned_of(revoke, m1)
    revoked = await cg_heartbeat(c, "m1_revoked", group, "m1", e1, owned=kept)
    e1 = revoked.member_epoch
    second = await cg_heartbeat(c, "m2_gets_partitions", group, "m2", e2, owned=[])
    m2 = owned_of(second)
    await cg_heartbeat(c, "m2_stable", group, "m2", e2, owned=m2)
    await cg_heartbeat(c, "m1_stable", group, "m1", e1, owned=kept)
    await cg_describe(c, "describe_two_members", group)
    await cg_heartbeat(c, "epoch_ahead", group, "m1", e1 + 1, owned=kept)
    await cg_heartbeat(c, "previous_epoch_owning_its_own", group, "m1", e1 - 1, owned=kept)
    await cg_heartbeat(c, "previous_epoch_owning_more", group, "m1", e1 - 1, owned=m1)
    await cg_heartbeat(c, "epoch_far_behind", group, "m2", e2 - 2, owned=[])
    await cg_heartbeat(c, "unknown_member", group, "nobody", e2, owned=[])
    await cg_heartbeat(c, "unknown_member_leaving", group, "nobody", -1)
    await cg_heartbeat(c, "m2_leaves", group, "m2", -1)
    await cg_heartbeat(c, "m2_after_leaving", group, "m2", e2, owned=[])
    after = await cg_heartbeat(c, "m1_after_m2_left", group, "m1", e1, owned=kept)
    await cg_heartbeat(c, "m1_takes_all", group, "m1", after.member_epoch, owned=owned_of(after))
    await cg_describe(c, "describe_after_leaving", group)
    await cg_heartbeat(c, "m1_leaves", group, "m1", -1)
    await cg_describe(c, "describe_empty", group)


@scenario
async def consumer_group_heartbeat_v0(c: Client) -> None:
    """v0: the broker names the member."""
    topic = await topic_of(c, 2)
    group = c.topic("group")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    joined = await cg_join(c, "join", group, "", [topic], version=0)
    member, epoch = joined.member_id, joined.member_epoch
    await cg_heartbeat(c, "heartbeat", group, member, epoch, version=0, owned=owned_of(joined))
    await cg_heartbeat(
        c,
        "full_heartbeat",
        group,
        member,
        epoch,
        version=0,
        owned=owned_of(joined),
        topics=[topic],
        rebalance_timeout=30_000,
    )
    gone = await cg_heartbeat(
        c, "subscribe_nothing", group, member, epoch, version=0, topics=[], owned=owned_of(joined)
    )
    await cg_heartbeat(
        c, "released", group, member, gone.member_epoch, version=0, owned=owned_of(gone)
    )
    await cg_describe(c, "describe", group)
    await cg_heartbeat(c, "leave", group, member, -1, version=0)


@scenario
async def consumer_group_regex_subscription(c: Client) -> None:
    """A regex matches this scenario's topics (a full match), not a topic named after it."""
    topic = await topic_of(c, 2)
    other = await topic_of(c, 1, "tt")
    await topic_of(c, 1, "other")
    group = c.topic("group")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic, other)
    joined = await cg_join(c, "join", group, "m1", regex=f"{c.prefix}-t.?")
    assigned = await c.until(  # Kafka resolves the regex in the background: a new epoch
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        HEARTBEAT_V,
        lambda r: r.error_code.value != 0 or r.member_epoch >= 2,
        group_id=group,
        member_id="m1",
        member_epoch=joined.member_epoch,
        topic_partitions=[],
    )
    await cg_describe(c, "describe", group)
    owned = owned_of(assigned, owned_of(joined))
    await cg_heartbeat(c, "heartbeat", group, "m1", assigned.member_epoch, owned=owned)
    await cg_heartbeat(
        c,
        "regex_to_names",
        group,
        "m1",
        assigned.member_epoch,
        owned=owned,
        regex="",
        topics=[topic],
    )
    await cg_describe(c, "describe_by_name", group)


@scenario
async def consumer_group_static_members(c: Client) -> None:
    topic = await topic_of(c, 2)
    group = c.topic("group")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    joined = await cg_join(c, "join", group, "m1", [topic], instance="i1")
    owned, epoch = owned_of(joined), joined.member_epoch
    await cg_join(c, "same_instance_other_member", group, "m2", [topic], instance="i1")
    await cg_heartbeat(c, "wrong_instance", group, "m1", epoch, owned=owned, instance="i2")
    await cg_heartbeat(c, "other_member_instance", group, "m2", epoch, owned=owned, instance="i1")
    await cg_heartbeat(c, "static_leave_wrong_member", group, "m2", -2, instance="i1")
    await cg_heartbeat(c, "static_leave_unknown_instance", group, "m1", -2, instance="i9")
    await cg_heartbeat(c, "static_leave", group, "m1", -2, instance="i1")
    await cg_describe(c, "describe_away", group)
    await cg_heartbeat(
        c, "heartbeat_after_static_leave", group, "m1", epoch, owned=owned, instance="i1"
    )
    back = await cg_join(c, "rejoin_new_member_id", group, "m3", [topic], instance="i1")
    await cg_describe(c, "describe_back", group)
    await cg_heartbeat(c, "old_member_id", group, "m1", epoch, owned=owned, instance="i1")
    await cg_heartbeat(
        c, "heartbeat_back", group, "m3", back.member_epoch, owned=owned_of(back), instance="i1"
    )
    await cg_heartbeat(c, "leave_dynamic_epoch", group, "m3", -1, instance="i1")
    await cg_describe(c, "describe_gone", group)


@scenario
async def consumer_group_not_found(c: Client) -> None:
    topic = await topic_of(c, 1)
    group = c.topic("nogroup")
    classic = c.topic("classic")
    await coordinator_ready(c, group)
    await coordinator_ready(c, classic)
    await coordinator_sees(c, classic, topic)
    await cg_heartbeat(c, "heartbeat_unknown_group", group, "m1", 1, owned=[])
    await cg_heartbeat(c, "leave_unknown_group", group, "m1", -1)
    await cg_heartbeat(c, "static_leave_unknown_group", group, "m1", -2, instance="i1")
    first = await join(c, "classic_join_unknown", classic, topics=(topic,))
    member = first.member_id
    joined = await join(c, "classic_join", classic, member, topics=(topic,))
    await sync(c, "classic_sync", classic, member, joined.generation_id)
    await cg_join(c, "consumer_join_non_empty_classic", classic, "m1", [topic])
    await cg_heartbeat(c, "heartbeat_classic_group", classic, "m1", 1, owned=[])
    await cg_describe(c, "describe", group, classic)


@scenario
async def consumer_group_seen_by_classic_apis(c: Client) -> None:
    """ListGroups by type, DescribeGroups, and a classic JoinGroup, of a consumer group."""
    topic = await topic_of(c, 1)
    group = c.topic("group")
    classic = c.topic("classic")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    await coordinator_ready(c, classic)
    await cg_join(c, "join", group, "m1", [topic])
    first = await join(c, "classic_join", classic, topics=(topic,))
    await join(c, "classic_join_again", classic, first.member_id, topics=(topic,))
    await cg_describe(c, "consumer_group_describe_of_a_classic_group", classic, group)
    await list_groups(c, "list_all")
    await list_groups(c, "list_consumer", types=["consumer"])
    await list_groups(c, "list_classic", types=["classic"])
    await list_groups(c, "list_consumer_type_case", types=["Consumer"])
    await list_groups(c, "list_stable", states=["stable"])
    await list_groups(c, "list_unknown_type", types=["share"])
    await describe_groups(c, "describe_groups", group, classic)
    await join(c, "classic_join_non_empty_consumer_group", group, topics=(topic,))
    await cg_heartbeat(c, "leave", group, "m1", -1)
    await describe_groups(c, "describe_groups_empty", group)
    await list_groups(c, "list_empty", types=["consumer"])
    required = await join(c, "classic_join_empty_consumer_group", group, topics=(topic,))
    await listed_as(c, group, "classic")
    await list_groups(c, "list_after_member_id_required")
    await join(c, "classic_join_with_member_id", group, required.member_id, topics=(topic,))
    await list_groups(c, "list_after_classic_join")


@scenario
async def consumer_group_offsets_by_member_epoch(c: Client) -> None:
    topic = await topic_of(c, 1)
    group = c.topic("group")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    joined = await cg_join(c, "join", group, "m1", [topic])
    epoch = joined.member_epoch
    await commit_v9(c, "commit", group, topic, "m1", epoch)
    await commit_v9(c, "commit_stale_epoch", group, topic, "m1", epoch - 1)
    await commit_v9(c, "commit_epoch_ahead", group, topic, "m1", epoch + 1)
    await commit_v9(c, "commit_unknown_member", group, topic, "nobody", epoch)
    await commit_v9(c, "commit_no_member", group, topic, "", -1)
    await fetch_v9(c, "fetch", group, topic, "m1", epoch)
    await fetch_v9(c, "fetch_stale_epoch", group, topic, "m1", epoch - 1)
    await fetch_v9(c, "fetch_epoch_ahead", group, topic, "m1", epoch + 1)
    await fetch_v9(c, "fetch_unknown_member", group, topic, "nobody", epoch)
    await fetch_v9(c, "fetch_no_member", group, topic, None, -1)
    await cg_heartbeat(c, "leave", group, "m1", -1)
    await commit_v9(c, "commit_after_leaving", group, topic, "m1", epoch)
    await fetch_v9(c, "fetch_after_leaving", group, topic, "m1", epoch)
