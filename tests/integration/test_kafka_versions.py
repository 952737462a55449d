"""Every advertised Kafka API version answers: a request with every field set (and one
with every array empty) for each served (API, version) goes to a broker over a socket; the
answer must come, decode to its last byte with kio's response schema, and carry no
UNKNOWN_SERVER_ERROR anywhere. An advertised version that always fails cannot recur."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from purgatory.broker.server import Broker
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import VERSIONS
from tests.kafka_wire import KafkaWire, sample_request
from tests.support import running_cluster

SERVED = [(key, v) for key, (lo, hi) in sorted(VERSIONS.items()) for v in range(lo, hi + 1)]


def error_codes(value: Any) -> list[int]:
    """Every ``error_code`` in a kio response, at any depth."""
    found = []
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            inner = getattr(value, field.name)
            if field.name == "error_code":
                found.append(int(inner))
            else:
                found += error_codes(inner)
    elif isinstance(value, tuple):
        for item in value:
            found += error_codes(item)
    return found


async def failure(broker: Broker, api_key: ApiKey, version: int, width: int) -> str | None:
    """What is wrong with the answer to this request, or None."""
    wire = await KafkaWire.open(broker.port)
    try:
        async with asyncio.timeout(10):
            request = sample_request(api_key, version, width)
            if api_key == ApiKey.DESCRIBE_TRANSACTIONS and width:
                # Not the id InitProducerId's sample made: an id with no transaction open
                # has a start time of -1 (as in Kafka), which kio's reader refuses.
                request = dataclasses.replace(request, transactional_ids=("never-initialised",))
            if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and width:
                # A join (epoch 0, nothing owned, a served assignor), not an unknown
                # member's heartbeat: ConsumerGroupDescribe (the next key) then describes
                # a group with a member and its assignment.
                request = dataclasses.replace(
                    request, member_epoch=0, topic_partitions=(), server_assignor="uniform"
                )
            answer = await wire.call(api_key, version, request)
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, AssertionError) as exc:
        return f"{api_key.name} v{version} (width {width}): {exc!r}"
    finally:
        await wire.close()
    if ErrorCode.UNKNOWN_SERVER_ERROR in error_codes(answer):
        return f"{api_key.name} v{version} (width {width}): UNKNOWN_SERVER_ERROR in {answer}"
    return None


async def test_every_served_version_is_answered_without_a_server_error() -> None:
    async with running_cluster(1, **{"num.partitions": 1}) as brokers:
        failures = [
            found
            for api_key, version in SERVED
            for width in (1, 0)
            if (found := await failure(brokers[0], api_key, version, width)) is not None
        ]
    assert not failures, "\n".join(failures)
