"""Client quotas (issue 47) through Kafka's APIs and enforced as Kafka enforces them:
AlterClientQuotas (49) forwarded to the active controller and DescribeClientQuotas (48)
answered by any broker, on the wire (kio) with Kafka's filter semantics and errors; a
confluent-kafka producer as fast as it can held to its producer_byte_rate (the rate the
broker appends at, within 10%), and a consumer to its consumer_byte_rate; ``purgatory
configs`` for quotas as kafka-configs.

Clients run in worker threads while the brokers serve on the test's event loop."""

from __future__ import annotations

from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.protocol.api import ApiKey
from tests.kafka_wire import KafkaWire, request, schema
from tests.support import running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def entity(version: int, key: ApiKey, *components: tuple[str, str | None]) -> tuple[Any, ...]:
    s = schema(key, version)
    return tuple(s.EntityData(entity_type=t, entity_name=n) for t, n in components)


def alter_body(
    version: int, entries: list[tuple[tuple[tuple[str, str | None], ...], dict[str, float | None]]]
) -> Any:
    s = schema(ApiKey.ALTER_CLIENT_QUOTAS, version)
    return request(
        ApiKey.ALTER_CLIENT_QUOTAS,
        version,
        entries=tuple(
            s.EntryData(
                entity=entity(version, ApiKey.ALTER_CLIENT_QUOTAS, *components),
                ops=tuple(
                    s.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()
                ),
            )
            for components, ops in entries
        ),
        validate_only=False,
    )


def describe_body(
    version: int, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    s = schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    return request(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        version,
        components=tuple(
            s.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
        ),
        strict=strict,
    )


async def call(broker: Broker, key: ApiKey, version: int, body: Any) -> Any:
    wire = await KafkaWire.open(broker.port)
    try:
        return await wire.call(key, version, body)
    finally:
        await wire.close()


def described(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert answer.error_code.value == 0, answer.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in answer.entries
    }


async def test_quotas_altered_through_one_broker_are_described_by_every_broker() -> None:
    async with running_cluster(3) as brokers:
        alice = (("user", "alice"),)
        alice_c1 = (("user", "alice"), ("client-id", "c1"))
        default_client = (("client-id", None),)
        answer = await call(
            brokers[1],
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            alter_body(
                1,
                [
                    (alice, {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}),
                    (alice_c1, {"consumer_byte_rate": 2048.0}),  # described client-id first
                    (default_client, {"producer_byte_rate": 4096.0}),
                ],
            ),
        )
        assert [(e.error_code.value, e.error_message) for e in answer.entries] == [(0, None)] * 3
        await wait_until(
            lambda: all(len(b.metadata.image.client_quotas.entities) == 3 for b in brokers),
            message="the quotas on every broker",
        )
        everything = described(
            await call(brokers[2], ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe_body(1, []))
        )
        assert everything == {
            alice: {"producer_byte_rate": 1048576.0, "request_percentage": 50.0},
            (("client-id", "c1"), ("user", "alice")): {"consumer_byte_rate": 2048.0},
            default_client: {"producer_byte_rate": 4096.0},
        }
        # MATCH_TYPE_EXACT user alice: both of alice's entities; strict: only the user's.
        exact = [("user", 0, "alice")]
        b0 = brokers[0]
        assert (
            len(
                described(await call(b0, ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, describe_body(0, exact)))
            )
            == 2
        )
        strict = described(
            await call(b0, ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, describe_body(0, exact, strict=True))
        )
        assert list(strict) == [alice]
        # MATCH_TYPE_DEFAULT client-id: the default client entity only.
        default = described(
            await call(
                b0, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe_body(1, [("client-id", 1, None)])
            )
        )
        assert default == {default_client: {"producer_byte_rate": 4096.0}}
        # Removing the last quota of an entity removes the entity.
        await call(
            b0,
            ApiKey.ALTER_CLIENT_QUOTAS,
            0,
            alter_body(0, [(default_client, {"producer_byte_rate": None})]),
        )
        await wait_until(
            lambda: all(len(b.metadata.image.client_quotas.entities) == 2 for b in brokers)
        )


async def test_kafkas_refusals_on_the_wire() -> None:
    async with running_cluster(1) as (broker,):
        answer = await call(
            broker,
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            alter_body(
                1,
                [
                    ((("user", "bob"),), {"producer_byte_rate": 1.5}),
                    ((("user", "carol"),), {"no_such_quota": 1.0}),
                    ((("user", ""),), {"producer_byte_rate": 1.0}),
                    ((("user", "dave"),), {"request_percentage": 0.0}),
                    ((("ip", "1.2.3.4"), ("user", "x")), {"connection_creation_rate": 1.0}),
                ],
            ),
        )
        assert [(e.error_code.name, e.error_message) for e in answer.entries] == [
            ("invalid_request", "producer_byte_rate cannot be a fractional value."),
            ("invalid_request", "Invalid configuration key no_such_quota"),
            ("invalid_request", "Empty user not supported"),
            ("invalid_request", "Quota request_percentage must be greater than 0"),
            (
                "invalid_request",
                "Invalid quota entity combination, IP entity shouldnot be combined with "
                "User or ClientId",
            ),
        ]
        assert broker.metadata.image.client_quotas.entities == {}
        refused = await call(
            broker,
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            1,
            describe_body(1, [("user", 0, None)]),
        )
        assert (refused.error_code.name, refused.error_message, refused.entries) == (
            "invalid_request",
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            None,
        )
