"""Scenarios of AlterClientQuotas (49) and DescribeClientQuotas (48) on the plain pair:
quotas of a user, a client id, both, and the default entities; each refusal (an unknown
key, a bad value, an empty name, a bad combination of types, validate_only) with its
message; EXACT, DEFAULT and SPECIFIED filters, strict and not, and their refusals; and a
Produce over a tiny producer_byte_rate answered with a throttle time. Every quota set is
removed at the end: the corpus's connections are all User:ANONYMOUS with client id "wire"."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client

# cluster's scenarios register first: its metadata_all_topics lists every topic, and must
# not see client_quota_throttles_produce's (the package's note on order).
from tests.differential.scenarios import cluster  # noqa: F401
from tests.differential.scenarios.base import PRODUCE, batch, create, scenario, topic_ready
from tests.differential.scenarios.user_scram_credentials import with_messages

VERSION = 1
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
# Large enough that no other scenario's requests come near them (ANONYMOUS is a user too).
HIGH = 1_000_000_000.0


def entity(**components: str | None) -> list[dict[str, str | None]]:
    """An entity from its components (``client_id`` for client-id; None: the default)."""
    return [
        {"entity_type": kind.replace("_", "-"), "entity_name": name}
        for kind, name in components.items()
    ]


def entry(ent: list[dict[str, str | None]], **ops: float | None) -> dict[str, Any]:
    """An AlterClientQuotas entry setting each key to its value (None: removing it)."""
    return {
        "entity": ent,
        "ops": [
            {"key": k, "value": 0.0 if v is None else v, "remove": v is None}
            for k, v in ops.items()
        ],
    }


def sorted_entities(value: Any) -> Any:
    """A response with messages kept (`with_messages`) and its entries, their components
    and values sorted: Kafka keeps quota entities in hash maps."""
    plain = with_messages(value)
    entries = plain.get("entries")
    if entries is None:
        return plain
    for e in entries:
        e["entity"] = sorted(e["entity"], key=repr)
        if "values" in e:
            e["values"] = sorted(e["values"], key=repr)
    plain["entries"] = sorted(entries, key=repr)
    return plain


async def alter(
    c: Client, label: str, *entries: dict[str, Any], validate_only: bool = False
) -> Any:
    return await c.call(
        label,
        ApiKey.ALTER_CLIENT_QUOTAS,
        VERSION,
        view=sorted_entities,
        entries=list(entries),
        validate_only=validate_only,
    )


def filter_of(strict: bool, **components: tuple[int, str | None]) -> dict[str, Any]:
    return {
        "components": [
            {"entity_type": kind.replace("_", "-"), "match_type": match, "match": name}
            for kind, (match, name) in components.items()
        ],
        "strict": strict,
    }


async def describe(
    c: Client, label: str, strict: bool = False, **components: tuple[int, str | None]
) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        VERSION,
        view=sorted_entities,
        **filter_of(strict, **components),
    )


async def settled(c: Client, expected: dict[str, float], **components: str | None) -> None:
    """Wait (unrecorded) until the broker describes the entity of ``components`` with
    exactly the quotas ``expected`` (none: the entity gone): Kafka's brokers answer from
    their metadata image, which follows the controller's commit a moment later."""

    def described(r: Any) -> bool:
        values = {v.key: v.value for e in r.entries or () for v in e.values}
        return r.error_code.value == 0 and values == expected

    await c.until(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        VERSION,
        described,
        **filter_of(
            True,
            **{k: (EXACT, v) if v is not None else (DEFAULT, None) for k, v in components.items()},
        ),
    )


def throttled(value: Any) -> Any:
    """A Produce response with its throttle time told only as positive or not (how long
    depends on each broker's clock)."""
    plain = with_messages(value)
    plain["throttled"] = "positive" if value.throttle_time.total_seconds() > 0 else "zero"
    return plain


@scenario
async def client_quotas(c: Client) -> None:
    user, client = c.topic("user"), c.topic("client")
    await describe(c, "describe_before", user=(EXACT, user))
    await alter(
        c,
        "set_user_client_and_both",
        entry(entity(user=user), producer_byte_rate=HIGH, consumer_byte_rate=HIGH * 2),
        entry(entity(client_id=client), request_percentage=250.5),
        entry(entity(user=user, client_id=client), consumer_byte_rate=HIGH * 3),
    )
    await alter(
        c,
        "set_defaults",
        entry(entity(user=None), consumer_byte_rate=HIGH),
        entry(entity(client_id=None), producer_byte_rate=HIGH),
        entry(entity(user=user, client_id=None), producer_byte_rate=HIGH * 4),
    )
    await alter(
        c,
        "validate_only",
        entry(entity(user=c.topic("never")), producer_byte_rate=HIGH),
        validate_only=True,
    )
    await alter(c, "unknown_key", entry(entity(user=user), fetch_byte_rate=HIGH))
    await alter(c, "zero_value", entry(entity(user=user), producer_byte_rate=0.0))
    await alter(c, "negative_value", entry(entity(user=user), request_percentage=-1.0))
    await alter(c, "fractional_value", entry(entity(user=user), producer_byte_rate=1.5))
    await alter(c, "ip_key_for_user", entry(entity(user=user), connection_creation_rate=10.0))
    await alter(c, "empty_user", entry(entity(user=""), producer_byte_rate=HIGH))
    await alter(c, "empty_client_id", entry(entity(client_id=""), producer_byte_rate=HIGH))
    await alter(c, "empty_entity", entry([], producer_byte_rate=HIGH))
    await alter(c, "unknown_type", entry(entity(group="g"), producer_byte_rate=HIGH))
    await alter(
        c, "ip_with_user", entry(entity(user=user, ip="127.0.0.1"), producer_byte_rate=HIGH)
    )
    await alter(
        c,
        "user_twice_last_wins",
        entry(
            entity(user=c.topic("first")) + entity(user=user),  # Kafka: the last
            producer_byte_rate=HIGH,
        ),
    )
    await alter(
        c,
        "validate_only_refused",
        entry(entity(user=user), producer_byte_rate=0.0),
        validate_only=True,
    )
    await settled(c, {"producer_byte_rate": HIGH, "consumer_byte_rate": HIGH * 2}, user=user)
    await settled(c, {"request_percentage": 250.5}, client_id=client)
    await settled(c, {"consumer_byte_rate": HIGH * 3}, user=user, client_id=client)
    await settled(c, {"consumer_byte_rate": HIGH}, user=None)
    await settled(c, {"producer_byte_rate": HIGH}, client_id=None)
    await settled(c, {"producer_byte_rate": HIGH * 4}, user=user, client_id=None)
    await describe(c, "exact_user", user=(EXACT, user))
    await describe(c, "exact_user_strict", True, user=(EXACT, user))
    await describe(c, "exact_client_strict", True, client_id=(EXACT, client))
    await describe(c, "exact_both", user=(EXACT, user), client_id=(EXACT, client))
    await describe(
        c, "user_and_default_client", True, user=(EXACT, user), client_id=(DEFAULT, None)
    )
    await describe(c, "default_user", user=(DEFAULT, None))
    await describe(c, "default_client_strict", True, client_id=(DEFAULT, None))
    await describe(c, "specified_user", user=(SPECIFIED, None))
    await describe(c, "specified_user_strict", True, user=(SPECIFIED, None))
    await describe(c, "specified_client_strict", True, client_id=(SPECIFIED, None))
    await describe(c, "never_written", user=(EXACT, c.topic("never")))
    await describe(c, "exact_without_match", user=(EXACT, None))
    await describe(c, "default_with_match", user=(DEFAULT, user))
    await describe(c, "unknown_type_filter", group=(SPECIFIED, None))
    await describe(c, "ip_with_user_filter", user=(EXACT, user), ip=(SPECIFIED, None))
    await alter(
        c,
        "remove_all",
        entry(entity(user=user), producer_byte_rate=None, consumer_byte_rate=None),
        entry(entity(client_id=client), request_percentage=None),
        entry(entity(user=user, client_id=client), consumer_byte_rate=None),
        entry(entity(user=None), consumer_byte_rate=None),
        entry(entity(client_id=None), producer_byte_rate=None),
        entry(entity(user=user, client_id=None), producer_byte_rate=None),
    )
    await settled(c, {}, user=user)
    await settled(c, {}, user=None)
    await settled(c, {}, client_id=None)
    await describe(c, "specified_user_after_removal", user=(SPECIFIED, None))


@scenario
async def client_quota_throttles_produce(c: Client) -> None:
    """A producer's own quota (User:ANONYMOUS with its client id, the most specific entity)
    of 1 byte/s: its first Produce is answered with a throttle time."""
    producer_id = c.topic("producer")
    topic = c.topic()
    await create(c, "create", {"name": topic})
    await topic_ready(c, topic)
    me = entity(user="ANONYMOUS", client_id=producer_id)
    await alter(c, "set_tiny_quota", entry(me, producer_byte_rate=1.0))
    await settled(c, {"producer_byte_rate": 1.0}, user="ANONYMOUS", client_id=producer_id)
    producer = await c.connect(client_id=producer_id)
    await producer.call(
        "produce_over_quota",
        ApiKey.PRODUCE,
        PRODUCE,
        view=throttled,
        transactional_id=None,
        acks=1,
        timeout=10_000,
        topic_data=[
            {"name": topic, "partition_data": [{"index": 0, "records": batch(b"x" * 200)}]}
        ],
    )
    await producer.close()
    await alter(c, "remove_tiny_quota", entry(me, producer_byte_rate=None))
    await settled(c, {}, user="ANONYMOUS", client_id=producer_id)
