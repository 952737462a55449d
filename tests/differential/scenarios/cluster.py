"""Scenarios of the cluster and topic APIs: ApiVersions, Metadata, CreateTopics, DeleteTopics."""

from __future__ import annotations

import uuid
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    API_VERSIONS,
    DELETE_TOPICS,
    METADATA,
    create,
    metadata,
    scenario,
    topic_ready,
)

# -- ApiVersions ------------------------------------------------------------------------


@scenario
async def api_versions(c: Client) -> None:
    """Only the error code is compared; the test reports the ranges as information."""
    await c.call(
        "api_versions",
        ApiKey.API_VERSIONS,
        API_VERSIONS,
        client_software_name="differential",
        client_software_version="1",
    )


# -- Metadata ----------------------------------------------------------------------------


@scenario
async def metadata_known_topic(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": 3})
    await topic_ready(c, c.topic())
    await metadata(c, "metadata", [c.topic()])


@scenario
async def metadata_unknown_topic_without_auto_create(c: Client) -> None:
    await metadata(c, "metadata", [c.topic("missing")])
    await metadata(c, "metadata_again", [c.topic("missing")])  # still not created


@scenario
async def metadata_no_topics(c: Client) -> None:
    await metadata(c, "metadata", [])


@scenario
async def metadata_all_topics(c: Client) -> None:
    await create(c, "create", {"name": c.topic("a")}, {"name": c.topic("b"), "num_partitions": 2})
    await topic_ready(c, c.topic("a"))
    await topic_ready(c, c.topic("b"))
    response = await metadata(c, "metadata", None)
    names = {t.name for t in response.topics}
    assert {c.topic("a"), c.topic("b")} <= names, names


@scenario
async def metadata_invalid_topic_name(c: Client) -> None:
    await metadata(c, "metadata", ["bad/name"])


# -- CreateTopics ------------------------------------------------------------------------


@scenario
async def create_topics_ok_then_exists(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": 2})
    await create(c, "create_again", {"name": c.topic(), "num_partitions": 2})


@scenario
async def create_topics_invalid_replication_factor(c: Client) -> None:
    await create(c, "rf_3_of_1_broker", {"name": c.topic("a"), "replication_factor": 3})
    await create(c, "rf_0", {"name": c.topic("b"), "replication_factor": 0})


@scenario
async def create_topics_invalid_partitions(c: Client) -> None:
    await create(c, "zero_partitions", {"name": c.topic("a"), "num_partitions": 0})
    await create(c, "negative_partitions", {"name": c.topic("b"), "num_partitions": -5})


@scenario
async def create_topics_bad_names(c: Client) -> None:
    await create(c, "slash", {"name": "bad/name"})
    await create(c, "dot", {"name": "."})
    await create(c, "too_long", {"name": "x" * 250})
    await create(c, "empty", {"name": ""})


@scenario
async def create_topics_defaults(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": -1, "replication_factor": -1})


@scenario
async def create_topics_validate_only(c: Client) -> None:
    await create(c, "validate", {"name": c.topic(), "num_partitions": 2}, validate_only=True)
    await create(c, "validate_bad", {"name": c.topic("b"), "num_partitions": 0}, validate_only=True)
    await metadata(c, "metadata", [c.topic()])  # not created


@scenario
async def create_topics_invalid_config(c: Client) -> None:
    await create(
        c, "unknown_config", {"name": c.topic("a"), "configs": [{"name": "no.such", "value": "1"}]}
    )
    await create(
        c,
        "bad_value",
        {"name": c.topic("b"), "configs": [{"name": "retention.ms", "value": "soon"}]},
    )


@scenario
async def create_topics_assignments_duplicates_and_collisions(c: Client) -> None:
    on_0 = [{"partition_index": 0, "broker_ids": [0]}]
    await create(c, "assignment_and_partition_count", {"name": c.topic("c"), "assignments": on_0})
    await create(c, "same_name_twice", {"name": c.topic("d")}, {"name": c.topic("d")})
    await create(c, "dotted", {"name": c.topic("e.f")})
    await create(c, "colliding_with_dotted", {"name": c.topic("e_f")})
    await create(c, "name_of_249", {"name": c.topic("g").ljust(249, "x")})
    manual = {"num_partitions": -1, "replication_factor": -1}
    for label, assignments in (
        ("manual_assignment", [(0, [0])]),
        ("assignment_to_missing_broker", [(0, [7])]),
        ("assignment_twice", [(0, [0]), (0, [0])]),
        ("assignment_from_1", [(1, [0])]),
        ("assignment_empty", [(0, [])]),
        ("assignment_repeating_a_broker", [(0, [0, 0])]),
    ):
        given = [{"partition_index": i, "broker_ids": b} for i, b in assignments]
        await create(c, label, {"name": c.topic(label), **manual, "assignments": given})


@scenario
async def metadata_by_topic_id(c: Client) -> None:
    created = await create(c, "create", {"name": c.topic()})
    await topic_ready(c, c.topic())
    for label, topic_id in (
        ("by_id", created.topics[0].topic_id),
        ("by_unknown_id", uuid.UUID(int=4242)),
    ):
        await c.call(
            label,
            ApiKey.METADATA,
            METADATA,
            topics=[{"name": None, "topic_id": topic_id}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )


# -- DeleteTopics ------------------------------------------------------------------------


async def delete(
    c: Client, label: str, names: list[str | None], ids: list[Any] | None = None
) -> Any:
    topics = [{"name": n, "topic_id": None} for n in names]
    topics += [{"name": None, "topic_id": i} for i in ids or []]
    return await c.call(label, ApiKey.DELETE_TOPICS, DELETE_TOPICS, topics=topics, timeout=10_000)


@scenario
async def delete_topics(c: Client) -> None:
    created = await create(c, "create", {"name": c.topic()})
    await topic_ready(c, c.topic())
    topic_id = created.topics[0].topic_id
    await delete(c, "delete", [c.topic()])
    await delete(c, "delete_again", [c.topic()])
    await delete(c, "delete_unknown_id", [], [uuid.UUID(int=12345)])
    await delete(c, "delete_deleted_id", [], [topic_id])
    await c.until(
        ApiKey.METADATA,
        METADATA,
        _no_topic,
        topics=[{"name": c.topic(), "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    await metadata(c, "metadata_after_delete", [c.topic()])


def _no_topic(response: Any) -> bool:
    return all(t.error_code.value != 0 for t in response.topics)
