"""Request helpers of the group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch) and the consumer protocol's payloads."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)


async def coordinator_ready(c: Client, group: str) -> None:
    """Wait (unrecorded) until the group's coordinator is known: the first FindCoordinator
    starts creating the offsets topic, in Kafka's own time and ours."""
    await c.until(
        ApiKey.FIND_COORDINATOR,
        FIND_COORDINATOR,
        lambda r: all(k.error_code.value == 0 for k in r.coordinators),
        key_type=0,
        coordinator_keys=[group],
    )
    loading = {"not_coordinator", "coordinator_load_in_progress", "coordinator_not_available"}
    await c.until(
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        lambda r: r.groups[0].error_code.name not in loading,
        groups=[{"group_id": group, "topics": []}],
        require_stable=False,
    )


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, *partitions: int) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions, no user data."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


async def join(
    c: Client,
    label: str,
    group: str,
    member_id: str = "",
    session_timeout: int = 30_000,
    instance: str | None = None,
    rebalance_timeout: int = 30_000,
    protocol_type: str = "consumer",
    protocols: tuple[str, ...] = ("range",),
    topics: tuple[str, ...] = (),
) -> Any:
    """JoinGroup of a consumer subscribed to ``topics``, by default the scenario's topic
    (``instance``: a static member's group.instance.id)."""
    metadata = subscription(*(topics or (c.topic(),)))
    return await c.call(
        label,
        ApiKey.JOIN_GROUP,
        JOIN_GROUP,
        group_id=group,
        session_timeout=session_timeout,
        rebalance_timeout=rebalance_timeout,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=[{"name": p, "metadata": metadata} for p in protocols],
        reason=None,
    )


async def sync(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    generation: int,
    *others: str,
    instance: str | None = None,
    protocol: tuple[str, str] = ("consumer", "range"),
) -> Any:
    """SyncGroup; the leader's gives the member partition 0 and ``others`` none
    (``protocol``: the type and name it says the group has)."""
    assignments = [{"member_id": member_id, "assignment": assignment(c.topic(), 0)}]
    assignments += [{"member_id": m, "assignment": assignment(c.topic())} for m in others]
    return await c.call(
        label,
        ApiKey.SYNC_GROUP,
        SYNC_GROUP,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol[0],
        protocol_name=protocol[1],
        assignments=assignments,
    )


async def heartbeat(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    generation: int,
    instance: str | None = None,
) -> Any:
    return await c.call(
        label,
        ApiKey.HEARTBEAT,
        HEARTBEAT,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
    )


Member = str | tuple[str, str | None]  # a member id, or (member id, group.instance.id)


async def leave(c: Client, label: str, group: str, *members: Member) -> Any:
    """LeaveGroup v3+: one request for a batch of members."""
    pairs = [(m, None) if isinstance(m, str) else m for m in members]
    return await c.call(
        label,
        ApiKey.LEAVE_GROUP,
        LEAVE_GROUP,
        group_id=group,
        members=[{"member_id": m, "group_instance_id": i, "reason": None} for m, i in pairs],
    )


async def commit(
    c: Client,
    label: str,
    group: str,
    topic: str,
    offset: int,
    member_id: str = "",
    generation: int = -1,
    instance: str | None = None,
    partition: int = 0,
    leader_epoch: int = -1,
    metadata: str = "m",
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_COMMIT,
        OFFSET_COMMIT,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": leader_epoch,
                        "committed_metadata": metadata,
                    }
                ],
            }
        ],
    )


async def offset_fetch(
    c: Client, label: str, group: str, topics: list[str] | None, partitions: tuple[int, ...] = (0,)
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        groups=[
            {
                "group_id": group,
                "topics": None
                if topics is None
                else [{"name": t, "partition_indexes": list(partitions)} for t in topics],
            }
        ],
        require_stable=False,
    )


async def describe_groups(c: Client, label: str, *groups: str) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_GROUPS,
        DESCRIBE_GROUPS,
        groups=list(groups),
        include_authorized_operations=False,
    )


async def list_groups(
    c: Client, label: str, states: list[str] | None = None, types: list[str] | None = None
) -> Any:
    """ListGroups, recorded as the scenario's own groups only (sorted by id): the answer
    lists every group of the broker, those of earlier scenarios too."""

    def own(response: Any) -> Any:
        mine = [g for g in response.groups if g.group_id.startswith(c.prefix)]
        return dataclasses.replace(response, groups=sorted(mine, key=lambda g: g.group_id))

    return await c.call(
        label,
        ApiKey.LIST_GROUPS,
        LIST_GROUPS,
        view=own,
        states_filter=states or [],
        types_filter=types or [],
    )


async def delete_groups(c: Client, label: str, *groups: str) -> Any:
    """DeleteGroups, its results recorded sorted by group: Kafka answers them in the order
    of its coordinator partitions."""

    def by_group(response: Any) -> Any:
        return dataclasses.replace(
            response, results=sorted(response.results, key=lambda r: r.group_id)
        )

    return await c.call(
        label, ApiKey.DELETE_GROUPS, DELETE_GROUPS, view=by_group, groups_names=list(groups)
    )


async def state_is(c: Client, group: str, state: str) -> None:
    """Wait (unrecorded) until the group is in ``state`` (a request another connection
    sent has reached the coordinator)."""
    await c.until(
        ApiKey.DESCRIBE_GROUPS,
        DESCRIBE_GROUPS,
        lambda r: r.groups[0].group_state == state,
        groups=[group],
        include_authorized_operations=False,
    )
