"""Every version of the APIs the corpus covers, as Purgatory advertises them (each within
Kafka 4.3.1's range): one request shape per API sent at each version (``lenient``: the
fields a version lacks are left out), so fields that come and go by version (throttle
times, leader epochs, topic ids, per-group batches, tagged fields) are compared too."""

from __future__ import annotations

import dataclasses
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    EARLIEST,
    LATEST,
    TS,
    batch,
    consumer_fetch,
    create,
    every_version,
    fetched,
    init_producer_id,
    scenario,
    topic_ready,
    topic_with_records,
    versions,
)
from tests.differential.scenarios.group_requests import (
    coordinator_ready,
    join,
    subscription,
    sync,
)


def _sorted(*path: str, key: str) -> Any:
    """A view of a response with the list at ``path`` (through lists of entities) sorted
    by ``key``: where a broker answers in its hash order."""

    def view(entity: Any, at: tuple[str, ...] = path) -> Any:
        items = getattr(entity, at[0])
        if len(at) == 1:
            return dataclasses.replace(
                entity, **{at[0]: sorted(items, key=lambda i: getattr(i, key))}
            )
        return dataclasses.replace(entity, **{at[0]: tuple(view(i, at[1:]) for i in items)})

    return view


@scenario
async def every_version_of_metadata(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": 2})
    await topic_ready(c, c.topic())
    await every_version(
        c,
        "metadata",
        ApiKey.METADATA,
        topics=[
            {"name": c.topic(), "topic_id": None},
            {"name": c.topic("missing"), "topic_id": None},
        ],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


@scenario
async def every_version_of_produce_fetch_and_list_offsets(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    created = c.responses[0][1].topics[0]
    for version in versions(ApiKey.PRODUCE):
        await c.call(
            f"produce_v{version}",
            ApiKey.PRODUCE,
            version,
            lenient=True,
            transactional_id=None,
            acks=-1,
            timeout=10_000,
            topic_data=[
                {
                    "name": topic,
                    "partition_data": [
                        {"index": 0, "records": batch(b"v%d" % version, ts=TS + version)},
                        {"index": 9, "records": batch(b"x")},
                    ],
                }
            ],
        )
    topics = [
        {
            "topic": topic,
            "topic_id": created.topic_id,
            "partitions": [fetched(0, offset=1), fetched(9, offset=0)],
        }
    ]
    await every_version(c, "fetch", ApiKey.FETCH, **consumer_fetch(topics))
    for timestamp, name in ((EARLIEST, "earliest"), (LATEST, "latest"), (TS + 5, "by_time")):
        await every_version(
            c,
            f"list_offsets_{name}",
            ApiKey.LIST_OFFSETS,
            view=_sorted("topics", "partitions", key="partition_index"),
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp},
                        {"partition_index": 9, "current_leader_epoch": -1, "timestamp": timestamp},
                    ],
                }
            ],
        )


@scenario
async def every_version_of_topic_admin(c: Client) -> None:
    names = []
    for version in versions(ApiKey.CREATE_TOPICS):
        name = c.topic(f"v{version}")
        names.append(name)
        await c.call(
            f"create_v{version}",
            ApiKey.CREATE_TOPICS,
            version,
            topics=[
                {
                    "name": n,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for n in (name, c.topic("bad/name"))
            ],
            timeout=10_000,
            validate_only=False,
        )
    for name in names:
        await topic_ready(c, name)
    for version, name in zip(versions(ApiKey.DELETE_TOPICS), names, strict=False):
        await c.call(
            f"delete_v{version}",
            ApiKey.DELETE_TOPICS,
            version,
            view=_sorted("responses", key="name"),
            lenient=True,
            topic_names=[name, c.topic("missing")],
            topics=[{"name": n, "topic_id": None} for n in (name, c.topic("missing"))],
            timeout=10_000,
        )


@scenario
async def every_version_of_api_versions_and_init_producer_id(c: Client) -> None:
    def error_only(response: Any) -> Any:  # the ranges are reported by api_versions
        return response.error_code

    for version in versions(ApiKey.API_VERSIONS):
        await c.call(
            f"api_versions_v{version}",
            ApiKey.API_VERSIONS,
            version,
            view=error_only,
            lenient=True,
            client_software_name="differential",
            client_software_version="1",
        )
    await init_producer_id(c, "init_latest")
    await every_version(
        c,
        "init_producer_id",
        ApiKey.INIT_PRODUCER_ID,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )


@scenario
async def every_version_of_the_group_apis(c: Client) -> None:
    """A Stable one-member group asked at every version of each group API, then a new
    member per JoinGroup version, each leaving at a LeaveGroup version, and DeleteGroups
    of the emptied groups at each of its versions."""
    topic = await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    member = (await join(c, "join_without_member_id", group)).member_id
    generation = (await join(c, "join", group, member)).generation_id
    await sync(c, "sync", group, member, generation)
    membership = {"group_id": group, "member_id": member, "group_instance_id": None}
    await every_version(c, "heartbeat", ApiKey.HEARTBEAT, generation_id=generation, **membership)
    await every_version(
        c,
        "sync_again",
        ApiKey.SYNC_GROUP,
        generation_id=generation,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
        **membership,
    )
    await every_version(
        c,
        "commit",
        ApiKey.OFFSET_COMMIT,
        generation_id_or_member_epoch=generation,
        retention_time=-1,
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
        **membership,
    )
    asked = [{"name": topic, "partition_indexes": [0, 3]}]
    await every_version(
        c,
        "offset_fetch",
        ApiKey.OFFSET_FETCH,
        group_id=group,
        topics=asked,
        groups=[{"group_id": group, "topics": asked}],
        require_stable=False,
    )
    await every_version(
        c,
        "find_coordinator",
        ApiKey.FIND_COORDINATOR,
        key=group,
        key_type=0,
        coordinator_keys=[group],
    )
    await every_version(
        c, "describe", ApiKey.DESCRIBE_GROUPS, groups=[group], include_authorized_operations=False
    )
    for version in versions(ApiKey.LIST_GROUPS):
        await c.call(
            f"list_v{version}",
            ApiKey.LIST_GROUPS,
            version,
            view=_own_groups(c.prefix),
            lenient=True,
            states_filter=[],
            types_filter=[],
        )
    await joins_and_leaves_at_every_version(c)


def _own_groups(prefix: str) -> Any:
    def own(response: Any) -> Any:
        mine = [g for g in response.groups if g.group_id.startswith(prefix)]
        return dataclasses.replace(response, groups=sorted(mine, key=lambda g: g.group_id))

    return own


async def joins_and_leaves_at_every_version(c: Client) -> None:
    leave_versions = list(versions(ApiKey.LEAVE_GROUP))
    groups = []
    for i, version in enumerate(versions(ApiKey.JOIN_GROUP)):
        group = c.topic(f"group-v{version}")
        groups.append(group)
        values: dict[str, Any] = {
            "group_id": group,
            "session_timeout": 30_000,
            "rebalance_timeout": 30_000,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(c.topic())}],
            "reason": None,
        }
        first = await c.call(
            f"join_v{version}", ApiKey.JOIN_GROUP, version, lenient=True, member_id="", **values
        )
        member = first.member_id
        if first.error_code.name == "member_id_required":
            await c.call(
                f"join_again_v{version}",
                ApiKey.JOIN_GROUP,
                version,
                lenient=True,
                member_id=member,
                **values,
            )
        leave = leave_versions[min(i, len(leave_versions) - 1)]
        await c.call(
            f"leave_v{leave}_after_join_v{version}",
            ApiKey.LEAVE_GROUP,
            leave,
            lenient=True,
            group_id=group,
            member_id=member,
            members=[{"member_id": member, "group_instance_id": None, "reason": None}],
        )
    for version in versions(ApiKey.DELETE_GROUPS):
        await c.call(
            f"delete_groups_v{version}",
            ApiKey.DELETE_GROUPS,
            version,
            groups_names=[groups[version]],
        )
