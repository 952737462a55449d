"""Scenarios of authorization (secured pair, the StandardAuthorizer): what a user without
ACLs is refused by each API Kafka's KafkaApis checks (Produce, Fetch, Metadata,
ListOffsets, FindCoordinator, JoinGroup, OffsetCommit, CreateTopics, DescribeConfigs,
InitProducerId transactional and idempotent), and with ACLs (literal and prefixed, ALLOW
and DENY, IDEMPOTENT_WRITE on the cluster) what is allowed, refused in part, or hidden.

The super user (User:ANONYMOUS on PLAINTEXT) sets topics and ACLs up; ``alice`` (PLAIN on
the SASL listener) asks. Every ACL names this scenario's topics, groups and ids, so other
scenarios' users see nothing of them."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.acls import (
    CLUSTER,
    CREATE,
    DENY,
    DESCRIBE,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    acl_filter,
    binding,
    create_acls,
    delete_acls,
)
from tests.differential.scenarios.base import (
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LATEST,
    METADATA,
    batch,
    create,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    secured_scenario,
    topic_with_records,
)
from tests.differential.scenarios.group_requests import commit, join
from tests.differential.scenarios.security import login

ALICE = "User:alice"
DESCRIBE_CONFIGS = 4
BROKER = 4  # DescribeConfigs' resource type of a broker


async def find_coordinator(c: Client, label: str, key_type: int, *keys: str) -> Any:
    return await c.call(
        label, ApiKey.FIND_COORDINATOR, FIND_COORDINATOR, key_type=key_type, coordinator_keys=keys
    )


async def init_as(c: Client, label: str, transactional_id: str | None) -> Any:
    return await c.call(
        label,
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        transactional_id=transactional_id,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )


# (Not topic_configs.describe: importing that module would register its scenarios first.)
async def describe_configs(
    c: Client, label: str, name: str, keys: list[str], resource_type: int = TOPIC
) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_CONFIGS,
        DESCRIBE_CONFIGS,
        resources=[
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
        ],
        include_synonyms=False,
        include_documentation=False,
    )


async def metadata_all(alice: Client, c: Client) -> Any:
    """A Metadata of every topic, recorded as the list of this scenario's topics in it."""
    return await alice.call(
        "metadata_all",
        ApiKey.METADATA,
        METADATA,
        view=lambda r: sorted(
            (t.name, t.error_code.name) for t in r.topics if t.name.startswith(c.prefix)
        ),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def acls_applied(alice: Client, topic: str) -> None:
    """Wait (unrecorded) until alice may describe ``topic``: the brokers' authorizers
    apply ACLs from the metadata log in their own time after CreateAcls answers."""
    await alice.until(
        ApiKey.METADATA,
        METADATA,
        lambda r: all(t.error_code.value == 0 for t in r.topics),
        topics=[{"name": topic, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


@secured_scenario
async def authorization_denied_without_acls(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    alice = await login(c, "alice")
    missing = c.topic("missing")
    await produce(alice, "produce_refused", topic, batch(b"x"))
    await produce(alice, "produce_unknown_topic", missing, batch(b"x"))
    await fetch(alice, "fetch", topic, 0)
    await metadata(alice, "metadata_named", [topic, missing])
    await metadata_all(alice, c)
    await list_offsets(alice, "list_offsets", topic, LATEST)
    await find_coordinator(alice, "find_group_coordinator", 0, c.topic("group"))
    await find_coordinator(alice, "find_transaction_coordinator", 1, c.topic("txn"))
    await join(alice, "join_group", c.topic("group"))
    await commit(alice, "offset_commit", c.topic("group"), topic, 0)
    await create(alice, "create_topics", {"name": c.topic("new")})
    await describe_configs(alice, "describe_topic_configs", topic, ["retention.ms"])
    await describe_configs(alice, "describe_broker_configs", "0", ["log.retention.ms"], BROKER)
    await init_as(alice, "init_transactional", c.topic("txn"))
    await init_as(alice, "init_idempotent", None)


@secured_scenario
async def authorization_with_acls(c: Client) -> None:
    readable = await topic_with_records(c, b"a")
    denied = c.topic("denied")
    await create(c, "create_denied", {"name": denied})
    group = c.topic("group")
    await create_acls(
        c,
        "grant",
        binding(ALICE, TOPIC, c.prefix, PREFIXED, READ),
        binding(ALICE, TOPIC, readable, LITERAL, WRITE),
        binding(ALICE, TOPIC, denied, LITERAL, READ, DENY),
        binding(ALICE, GROUP, group, LITERAL, READ),
        binding(ALICE, TOPIC, c.topic("made"), LITERAL, CREATE),
        binding(ALICE, TRANSACTIONAL_ID, c.topic("txn"), LITERAL, DESCRIBE),
        binding(ALICE, CLUSTER, "kafka-cluster", LITERAL, IDEMPOTENT_WRITE),
    )
    alice = await login(c, "alice")
    await acls_applied(alice, readable)
    await produce(alice, "produce_allowed", readable, batch(b"x"))
    await produce(alice, "produce_denied", denied, batch(b"x"))
    await fetch(alice, "fetch_allowed", readable, 0)
    await fetch(alice, "fetch_denied", denied, 0)
    await metadata(alice, "metadata_named", [readable, denied])
    await metadata_all(alice, c)
    await list_offsets(alice, "list_offsets_denied", denied, LATEST)
    await find_coordinator(alice, "find_transaction_coordinator", 1, c.topic("txn"))
    await commit(alice, "offset_commit_of_a_denied_topic", group, denied, 0)
    made, not_made = {"name": c.topic("made")}, {"name": c.topic("not-made")}
    await create(alice, "create_topics", made, not_made, validate_only=True)
    await describe_configs(alice, "describe_topic_configs", readable, ["retention.ms"])
    await init_as(alice, "init_transactional_without_write", c.topic("txn"))
    await init_producer_id(c, "init_idempotent_as_super_user")  # producer ids ready
    await init_as(alice, "init_idempotent_with_idempotent_write", None)
    await delete_acls(c, "revoke", acl_filter(ALICE, TOPIC, c.prefix, PREFIXED))
