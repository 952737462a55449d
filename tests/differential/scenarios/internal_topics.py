"""Scenarios of what a client may not do to __consumer_offsets (produce to it, create,
delete or describe it), and of incremental fetch sessions (KIP-227) a consumer asks for."""

from __future__ import annotations

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    FETCH,
    batch,
    consumer_fetch,
    create,
    fetched,
    metadata,
    produce,
    scenario,
    topic_with_records,
)
from tests.differential.scenarios.cluster import delete
from tests.differential.scenarios.group_requests import coordinator_ready

OFFSETS_TOPIC = "__consumer_offsets"


@scenario
async def internal_topic_from_a_client(c: Client) -> None:
    await coordinator_ready(c, c.topic("group"))  # the offsets topic exists
    await produce(c, "produce", OFFSETS_TOPIC, batch(b"a"))
    await create(c, "create", {"name": OFFSETS_TOPIC})
    await delete(c, "delete", [OFFSETS_TOPIC])


@scenario
async def fetch_session_asked_for(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    partitions = [{"topic": topic, "partitions": [fetched(0, 0)]}]
    request = consumer_fetch(partitions) | {"session_epoch": 0}
    await c.call("new_session", ApiKey.FETCH, FETCH, lenient=True, **request)
    for label, session_id, epoch in (
        ("unknown_session", 12345, 1),
        ("no_session_epoch_1", 0, 1),
        ("close_unknown_session", 12345, -1),
    ):
        asked = consumer_fetch(partitions) | {"session_id": session_id, "session_epoch": epoch}
        await c.call(label, ApiKey.FETCH, FETCH, lenient=True, **asked)
    await metadata(c, "metadata", [topic])
