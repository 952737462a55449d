"""Scenarios of KIP-932's share groups: ShareGroupHeartbeat v1 (joining, a second and a
third member, epochs, the simple assignor's partitions, its validation, unknown members,
fenced epochs, leaving), ShareGroupDescribe, ListGroups by type share, a group's configs
(DescribeConfigs and IncrementalAlterConfigs on the GROUP resource), and ShareFetch and
ShareAcknowledge v1 and v2 (a share session opened with epoch 0, records acquired with
their delivery counts, ACCEPT, RELEASE and REJECT and their errors, session epochs, the
session closed with -1).

Member ids are the client's own, fixed, written as Kafka's ``Uuid`` strings; they and
topic ids become symbols. Each scenario waits, like consumer_groups.py, until the group
coordinator sees its topics (`coordinator_sees`), then warms its group up (`warm_up`: Kafka
assigns a topic to a share group only once its share coordinator has initialised the
topic's state for the group, one group epoch later), so epochs compare relative to the
warmed-up group's (`_relative`). The simple assignor's choice of partitions is Kafka's
hash maps' and changes from run to run: assignments compare as counts per member and
members per partition (`counted`, `sharing`). Heartbeat refusals' messages are compared,
their numbers (epochs) as ``#``. A fetching scenario first sets the group's
``share.auto.offset.reset`` to ``earliest`` (a share partition starts at the log's end by
default) and waits until DescribeConfigs shows it (`configs_are`).
"""

from __future__ import annotations

import base64
import dataclasses
import re
import uuid
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client, body
from tests.differential.scenarios.base import (
    METADATA,
    batch,
    produce,
    scenario,
)
from tests.differential.scenarios.consumer_groups import (
    cg_join,
    coordinator_sees,
    topic_of,
)
from tests.differential.scenarios.group_requests import coordinator_ready, list_groups

HEARTBEAT_V = 1
DESCRIBE_V = 1
GROUP = 32  # ConfigResource.Type.GROUP
SET, DELETE = 0, 1
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
LOCK_MS = "share.record.lock.duration.ms"
RESET = "share.auto.offset.reset"
GROUP_CONFIGS = [
    "consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    LOCK_MS,
    RESET,
    "share.isolation.level",
]


def member(n: int) -> str:
    """A fixed member id, as Kafka's ``Uuid.toString`` writes one (base64url, unpadded)."""
    raw = uuid.UUID(int=0x5EED_0000 + n).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def sg_heartbeat(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    epoch: int,
    topics: list[str] | None = None,
    rack: str | None = None,
) -> Any:
    """ShareGroupHeartbeat; ``topics`` and ``rack`` None are not sent (unchanged)."""
    return await c.call(
        label,
        ApiKey.SHARE_GROUP_HEARTBEAT,
        HEARTBEAT_V,
        view=lambda r: told(_relative(c, r)),
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=rack,
        subscribed_topic_names=topics,
    )


async def sg_describe(c: Client, label: str, *groups: str) -> Any:
    """ShareGroupDescribe, its groups recorded sorted by id: Kafka answers them in the
    order of its coordinator partitions."""

    def view(response: Any) -> Any:
        groups = sorted(response.groups, key=lambda g: g.group_id)
        relative = _relative(c, dataclasses.replace(response, groups=groups))
        return {
            "groups": [
                {
                    **{f.name: getattr(g, f.name) for f in dataclasses.fields(g)},
                    "members": [
                        {
                            **{f.name: getattr(m, f.name) for f in dataclasses.fields(m)},
                            "assignment": counted(m.assignment.topic_partitions),
                        }
                        for m in g.members
                    ],
                    "sharing": sharing(g),
                }
                for g in relative.groups
            ]
        }

    return await c.call(
        label,
        ApiKey.SHARE_GROUP_DESCRIBE,
        DESCRIBE_V,
        view=view,
        group_ids=list(groups),
        include_authorized_operations=False,
    )


async def group_configs(
    c: Client, label: str, group: str, *ops: tuple[str, int, str | None]
) -> Any:
    return await c.call(
        label,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
            }
        ],
        validate_only=False,
    )


async def describe_group_configs(c: Client, label: str, group: str, keys: list[str]) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[{"resource_type": GROUP, "resource_name": group, "configuration_keys": keys}],
        include_synonyms=True,
        include_documentation=False,
    )


async def configs_are(c: Client, group: str, **values: str) -> None:
    """Wait (unrecorded) until DescribeConfigs shows the group's configs with these values
    (names with dots for underscores): Kafka's broker applies a change from the metadata
    log a moment after IncrementalAlterConfigs answers."""
    wanted = {k.replace("_", "."): v for k, v in values.items()}
    await c.until(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        lambda r: {e.name: e.value for e in r.results[0].configs} == wanted,
        resources=[
            {"resource_type": GROUP, "resource_name": group, "configuration_keys": list(wanted)}
        ],
        include_synonyms=False,
        include_documentation=False,
    )


async def topic_id(c: Client, topic: str) -> uuid.UUID:
    response = await c.until(
        ApiKey.METADATA,
        METADATA,
        lambda r: r.topics[0].error_code.value == 0,
        topics=[{"name": topic, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    found: uuid.UUID = response.topics[0].topic_id
    return found


def by_partition(response: Any) -> Any:
    """A ShareFetch or ShareAcknowledge answer, each topic's partitions sorted by index:
    Kafka lists them in the order of its share session's partition map."""
    responses = [
        dataclasses.replace(t, partitions=sorted(t.partitions, key=lambda p: p.partition_index))
        for t in response.responses
    ]
    return dataclasses.replace(response, responses=responses)


Acks = list[tuple[int, int, list[int]]]  # (first offset, last offset, acknowledge types)


def _batches(acks: Acks) -> list[dict[str, Any]]:
    return [{"first_offset": f, "last_offset": last, "acknowledge_types": t} for f, last, t in acks]


async def share_fetch(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    epoch: int,
    partitions: dict[uuid.UUID, dict[int, Acks]],
    *,
    version: int = 1,
    max_wait: int = 0,
    max_records: int = 500,
    forgotten: dict[uuid.UUID, list[int]] | None = None,
) -> Any:
    """ShareFetch of ``partitions`` (topic id -> partition -> acknowledgements to send)."""
    return await c.call(
        label,
        ApiKey.SHARE_FETCH,
        version,
        view=by_partition,
        lenient=True,
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        share_acquire_mode=0,
        is_renew_ack=False,
        topics=[
            {
                "topic_id": t,
                "partitions": [
                    {"partition_index": p, "acknowledgement_batches": _batches(acks)}
                    for p, acks in ps.items()
                ],
            }
            for t, ps in partitions.items()
        ],
        forgotten_topics_data=[
            {"topic_id": t, "partitions": ps} for t, ps in (forgotten or {}).items()
        ],
    )


async def share_acknowledge(
    c: Client,
    label: str,
    group: str,
    member_id: str,
    epoch: int,
    partitions: dict[uuid.UUID, dict[int, Acks]],
    *,
    version: int = 1,
) -> Any:
    return await c.call(
        label,
        ApiKey.SHARE_ACKNOWLEDGE,
        version,
        view=by_partition,
        lenient=True,
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        is_renew_ack=False,
        topics=[
            {
                "topic_id": t,
                "partitions": [
                    {"partition_index": p, "acknowledgement_batches": _batches(acks)}
                    for p, acks in ps.items()
                ],
            }
            for t, ps in partitions.items()
        ],
    )


# The group epoch each scenario's group reached in `warm_up`, by scenario run (its
# responses list, which every connection of one run shares).
_BASE_EPOCH: dict[int, int] = {}


def told(response: Any) -> Any:
    """A heartbeat's answer as plain data, its error message kept under another name (the
    harness drops ``error_message``: ShareGroupHeartbeat's refusals say what to fix) with
    its numbers, epochs, as ``#`` (see `_relative`), and its assignment as `counted`."""
    plain = {f.name: getattr(response, f.name) for f in dataclasses.fields(response)}
    message = plain.pop("error_message")
    plain["error_text"] = None if message is None else re.sub(r"-?\d+", "#", message)
    if response.assignment is not None:
        plain["assignment"] = counted(response.assignment.topic_partitions)
    return plain


def counted(topic_partitions: Any) -> list[dict[str, Any]]:
    """An assignment as how many partitions of each topic: which ones Kafka's simple
    assignor picks depends on its hash maps' order (of topic ids, random per run) and on
    what each member had; how many it gives each member does not (its
    SimpleHomogeneousAssignmentBuilder's desired counts by member index; members in its
    hash map's order of their ids, by id in ours: these ids are in the same order in both)."""
    return [
        {
            **{f.name: getattr(tp, f.name) for f in dataclasses.fields(tp)},
            "partitions": len(tp.partitions),
        }
        for tp in topic_partitions
    ]


def sharing(group: Any) -> list[int]:
    """How many members each assigned partition has, in increasing order: every partition
    to at least one member, shared evenly when members outnumber partitions."""
    holders: dict[tuple[Any, int], int] = {}
    for m in group.members:
        for tp in m.assignment.topic_partitions:
            for p in tp.partitions:
                holders[(tp.topic_id, p)] = holders.get((tp.topic_id, p), 0) + 1
    return sorted(holders.values())


def _relative(c: Client, response: Any) -> Any:
    """A heartbeat's or description's epochs relative to the group's epoch after
    `warm_up`: Kafka's group has one epoch more by then (it bumps the epoch again when
    the share coordinator has initialised the topic's share partitions, which Purgatory,
    having no share coordinator, does not need)."""
    base = _BASE_EPOCH.get(id(c.responses), 0)

    def rel(epoch: int) -> int:
        return epoch - base if epoch > 0 else epoch

    if hasattr(response, "member_epoch"):
        return dataclasses.replace(response, member_epoch=rel(response.member_epoch))
    groups = [
        dataclasses.replace(
            g,
            group_epoch=rel(g.group_epoch),
            assignment_epoch=rel(g.assignment_epoch),
            members=[dataclasses.replace(m, member_epoch=rel(m.member_epoch)) for m in g.members],
        )
        for g in response.groups
    ]
    return dataclasses.replace(response, groups=groups)


async def warm_up(c: Client, group: str, topic: str) -> None:
    """Unrecorded: a member joins the group, heartbeats until it is assigned the topic's
    partitions, and leaves. Kafka's coordinator assigns a topic only once the share
    coordinator has initialised its share partitions for the group (asked for when a
    member first subscribes to it); once that is done, both brokers assign at once."""
    warm = member(0)
    joined = await c.wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        HEARTBEAT_V,
        body(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            HEARTBEAT_V,
            group_id=group,
            member_id=warm,
            member_epoch=0,
            subscribed_topic_names=[topic],
        ),
    )
    assert joined.error_code.value == 0, joined
    if joined.assignment is None or not joined.assignment.topic_partitions:
        await c.until(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            HEARTBEAT_V,
            lambda r: (
                r.error_code.value != 0
                or (r.assignment is not None and bool(r.assignment.topic_partitions))
            ),
            group_id=group,
            member_id=warm,
            member_epoch=joined.member_epoch,
        )
    await c.wire.call(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        HEARTBEAT_V,
        body(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            HEARTBEAT_V,
            group_id=group,
            member_id=warm,
            member_epoch=-1,
        ),
    )
    described = await c.wire.call(
        ApiKey.SHARE_GROUP_DESCRIBE,
        DESCRIBE_V,
        body(
            ApiKey.SHARE_GROUP_DESCRIBE,
            DESCRIBE_V,
            group_ids=[group],
            include_authorized_operations=False,
        ),
    )
    _BASE_EPOCH[id(c.responses)] = described.groups[0].group_epoch


async def share_group_of(c: Client, partitions: int, earliest: bool = False) -> tuple[str, str]:
    """This scenario's topic of ``partitions`` and its share group, the coordinator seeing
    the topic and the group warmed up (`warm_up`), reading from the earliest offset if
    asked."""
    topic = await topic_of(c, partitions)
    group = c.topic("share")
    await coordinator_ready(c, group)
    await coordinator_sees(c, group, topic)
    if earliest:
        await group_configs(c, "earliest", group, (RESET, SET, "earliest"))
        await configs_are(c, group, share_auto_offset_reset="earliest")
    await warm_up(c, group, topic)
    return topic, group


@scenario
async def share_group_heartbeat_refusals(c: Client) -> None:
    topic, group = await share_group_of(c, 1)
    m1 = member(1)
    await sg_heartbeat(c, "empty_group_id", "", m1, 0, [topic])
    await sg_heartbeat(c, "blank_group_id", " ", m1, 0, [topic])
    await sg_heartbeat(c, "empty_member_id", group, "", 0, [topic])
    await sg_heartbeat(c, "empty_member_id_epoch_1", group, "", 1, [topic])
    await sg_heartbeat(c, "no_subscription", group, m1, 0)
    await sg_heartbeat(c, "empty_subscription", group, m1, 0, [])
    await sg_heartbeat(c, "epoch_minus_2", group, m1, -2, [topic])
    await sg_heartbeat(c, "empty_rack_id", group, m1, 0, [topic], rack="")
    await sg_heartbeat(c, "unknown_group", group, m1, 1, [topic])
    await sg_heartbeat(c, "leave_unknown_group", group, m1, -1)
    await sg_describe(c, "describe_nothing_joined", group)


@scenario
async def share_group_join_assign_and_leave(c: Client) -> None:
    """Three members of one topic of 2 partitions: the simple assignor spreads them over
    the first two and shares one with the third."""
    topic, group = await share_group_of(c, 2)
    m1, m2, m3 = member(1), member(2), member(3)
    first = await sg_heartbeat(c, "m1_joins", group, m1, 0, [topic])
    e1 = first.member_epoch
    await sg_heartbeat(c, "m1_heartbeat", group, m1, e1)
    await sg_describe(c, "describe_one_member", group)
    second = await sg_heartbeat(c, "m2_joins", group, m2, 0, [topic])
    e2 = second.member_epoch
    moved = await sg_heartbeat(c, "m1_after_m2_joined", group, m1, e1)
    e1 = moved.member_epoch
    await sg_heartbeat(c, "m1_stable", group, m1, e1)
    await sg_describe(c, "describe_two_members", group)
    third = await sg_heartbeat(c, "m3_joins", group, m3, 0, [topic])
    e3 = third.member_epoch
    await sg_heartbeat(c, "m1_after_m3_joined", group, m1, e1)
    await sg_heartbeat(c, "m2_after_m3_joined", group, m2, e2)
    await sg_describe(c, "describe_three_members", group)
    await sg_heartbeat(c, "epoch_ahead", group, m3, e3 + 1)
    await sg_heartbeat(c, "epoch_behind", group, m3, e3 - 1)
    await sg_heartbeat(c, "epoch_far_behind", group, m2, 1)
    await sg_heartbeat(c, "unknown_member", group, member(9), e3)
    await sg_heartbeat(c, "unknown_member_leaving", group, member(9), -1)
    await sg_heartbeat(c, "rejoin_with_epoch_0", group, m3, 0, [topic])
    await sg_heartbeat(c, "m3_leaves", group, m3, -1)
    await sg_heartbeat(c, "m3_after_leaving", group, m3, e3)
    await sg_heartbeat(c, "m2_leaves", group, m2, -1)
    await sg_heartbeat(c, "m1_alone", group, m1, e1)
    await sg_describe(c, "describe_one_left", group)
    await sg_heartbeat(c, "m1_leaves", group, m1, -1)
    await sg_describe(c, "describe_empty", group)


@scenario
async def share_group_describe_and_list(c: Client) -> None:
    topic, group = await share_group_of(c, 1)
    consumer = c.topic("consumer")
    await coordinator_ready(c, consumer)
    await cg_join(c, "consumer_join", consumer, "c1", [topic])
    await sg_heartbeat(c, "join", group, member(1), 0, [topic])
    await sg_describe(c, "describe", group, c.topic("nothing"), consumer)
    await list_groups(c, "list_all")
    await list_groups(c, "list_share", types=["share"])
    await list_groups(c, "list_share_type_case", types=["Share"])
    await list_groups(c, "list_consumer", types=["consumer"])
    await list_groups(c, "list_stable_share", states=["stable"], types=["share"])
    await sg_heartbeat(c, "join_a_consumer_group", consumer, member(2), 0, [topic])
    await sg_heartbeat(c, "leave", group, member(1), -1)
    await list_groups(c, "list_share_empty", types=["share"])


@scenario
async def share_group_configs(c: Client) -> None:
    group = c.topic("share")
    await describe_group_configs(c, "describe_defaults", group, GROUP_CONFIGS)
    await group_configs(c, "set_earliest", group, (RESET, SET, "earliest"))
    await group_configs(c, "set_lock_duration", group, (LOCK_MS, SET, "20000"))
    await group_configs(c, "lock_duration_below_min", group, (LOCK_MS, SET, "1000"))
    await group_configs(c, "lock_duration_not_a_number", group, (LOCK_MS, SET, "soon"))
    await group_configs(c, "reset_unknown", group, (RESET, SET, "middle"))
    await group_configs(c, "unknown_config", group, ("share.nothing", SET, "1"))
    await group_configs(
        c, "isolation_committed", group, ("share.isolation.level", SET, "read_committed")
    )
    await configs_are(
        c,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms="20000",
        share_isolation_level="read_committed",
    )
    await describe_group_configs(c, "describe_set", group, GROUP_CONFIGS)
    await group_configs(c, "delete_lock_duration", group, (LOCK_MS, DELETE, None))
    await configs_are(c, group, share_record_lock_duration_ms="30000")
    await describe_group_configs(c, "describe_after_delete", group, [LOCK_MS, RESET])


@scenario
async def share_fetch_acquire_and_acknowledge(c: Client) -> None:
    topic, group = await share_group_of(c, 1, earliest=True)
    await produce(c, "produce_5", topic, batch(b"a", b"b", b"c", b"d", b"e"))
    await produce(c, "produce_3", topic, batch(b"f", b"g", b"h"))
    tid = await topic_id(c, topic)
    m1 = member(1)
    joined = await sg_heartbeat(c, "join", group, m1, 0, [topic])
    await sg_heartbeat(c, "heartbeat", group, m1, joined.member_epoch)
    await share_fetch(c, "open_with_acks", group, m1, 0, {tid: {0: [(0, 0, [ACCEPT])]}})
    await share_fetch(c, "open", group, m1, 0, {tid: {0: []}}, max_wait=5000)
    await share_fetch(c, "nothing_left", group, m1, 1, {tid: {0: []}})
    await share_acknowledge(
        c,
        "ack_accept_release_reject",
        group,
        m1,
        2,
        {tid: {0: [(0, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 3, [REJECT])]}},
    )
    await share_acknowledge(c, "ack_again", group, m1, 3, {tid: {0: [(0, 0, [ACCEPT])]}})
    await share_acknowledge(c, "ack_released", group, m1, 4, {tid: {0: [(2, 2, [ACCEPT])]}})
    m2 = member(2)
    await sg_heartbeat(c, "m2_joins", group, m2, 0, [topic])
    await share_fetch(c, "m2_opens_nothing_to_acquire", group, m2, 0, {tid: {0: []}})
    await share_acknowledge(c, "m2_acks_m1s_record", group, m2, 1, {tid: {0: [(4, 4, [ACCEPT])]}})
    await share_fetch(c, "m2_closes", group, m2, -1, {})
    await share_acknowledge(c, "ack_not_fetched", group, m1, 5, {tid: {0: [(50, 51, [ACCEPT])]}})
    await share_acknowledge(c, "ack_first_after_last", group, m1, 6, {tid: {0: [(5, 4, [ACCEPT])]}})
    await share_acknowledge(
        c, "ack_types_per_offset_wrong_count", group, m1, 7, {tid: {0: [(4, 6, [ACCEPT, ACCEPT])]}}
    )
    await share_acknowledge(c, "ack_unknown_type", group, m1, 8, {tid: {0: [(4, 4, [9])]}})
    await share_fetch(c, "released_again", group, m1, 9, {tid: {0: []}}, max_wait=5000)
    await share_fetch(c, "epoch_skipped", group, m1, 11, {tid: {0: []}})
    await share_fetch(c, "epoch_repeated", group, m1, 9, {tid: {0: []}})
    await share_acknowledge(c, "ack_epoch_0", group, m1, 0, {tid: {0: [(4, 4, [ACCEPT])]}})
    await share_acknowledge(
        c,
        "ack_per_offset_types",
        group,
        m1,
        10,
        {tid: {0: [(4, 7, [ACCEPT, GAP, RELEASE, REJECT])]}},
        version=2,
    )
    await share_fetch(
        c, "v2_released", group, m1, 11, {tid: {0: [(2, 2, [ACCEPT])]}}, version=2, max_wait=5000
    )
    await share_fetch(
        c, "close_with_acks", group, m1, -1, {tid: {0: [(6, 6, [ACCEPT])]}}, version=2
    )
    await share_acknowledge(
        c, "ack_after_close", group, m1, 13, {tid: {0: [(5, 5, [ACCEPT])]}}, version=2
    )
    await share_fetch(c, "reopen", group, m1, 0, {tid: {0: []}}, version=2, max_wait=5000)
    await share_fetch(c, "close", group, m1, -1, {}, version=2)


@scenario
async def share_fetch_sessions(c: Client) -> None:
    topic, group = await share_group_of(c, 2, earliest=True)
    await produce(c, "produce_0", topic, batch(b"a", b"b"), partition=0)
    await produce(c, "produce_1", topic, batch(b"c"), partition=1)
    tid = await topic_id(c, topic)
    m1 = member(1)
    joined = await sg_heartbeat(c, "join", group, m1, 0, [topic])
    await sg_heartbeat(c, "heartbeat", group, m1, joined.member_epoch)
    await share_fetch(c, "no_session", group, m1, 1, {tid: {0: []}})
    await share_acknowledge(c, "ack_no_session", group, m1, 1, {tid: {0: [(0, 0, [ACCEPT])]}})
    await share_fetch(c, "close_no_session", group, m1, -1, {})
    await share_fetch(c, "open_partition_0", group, m1, 0, {tid: {0: []}}, max_wait=5000)
    await share_fetch(c, "add_partition_1", group, m1, 1, {tid: {1: []}}, max_wait=5000)
    await share_fetch(c, "forget_partition_0", group, m1, 2, {}, forgotten={tid: [0]})
    await share_fetch(c, "unknown_topic", group, m1, 3, {uuid.UUID(int=7): {0: []}})
    await share_fetch(c, "reopen_releases", group, m1, 0, {tid: {0: [], 1: []}}, max_wait=5000)
    other = member(2)
    await share_fetch(c, "not_a_member", group, other, 0, {tid: {0: []}})
    unknown = {uuid.UUID(int=7): {0: []}, tid: {1: []}}
    await share_fetch(c, "open_with_unknown_topic", group, member(3), 0, unknown)
    await share_fetch(c, "member_id_not_a_uuid", group, "m1", 0, {tid: {0: []}})
    await share_fetch(c, "close", group, m1, -1, {})
    await sg_heartbeat(c, "leave", group, m1, -1)
