"""Valid request frames of every served API version of both protocols: what the fuzzer
mutates. Kafka's from kio's schemas (every field set, arrays of 0, 1 and 2 elements);
ours from msgspec's type information; and Produce requests that carry real batches, so
that mutations reach the record validator with a good CRC."""

from __future__ import annotations

import time
from typing import Any

import msgspec.inspect as mi

from purgatory.protocol import kafka_records
from purgatory.protocol.api import SCHEMAS, encode_request_into
from purgatory.protocol.kafka_schemas import VERSIONS
from tests.kafka_wire import request_frame, sample_request


def kafka_frames() -> list[bytes]:
    """One frame per served (API, version, width): length prefix included."""
    frames = []
    for key, (low, high) in sorted(VERSIONS.items()):
        for version in range(low, high + 1):
            for width in (0, 1, 2):
                body = sample_request(key, version, width)
                frames.append(request_frame(key, version, 1, body, client_id="fuzz"))
    return frames + _consumer_group_joins()


def _consumer_group_joins() -> list[bytes]:
    """ConsumerGroupHeartbeats that join (epoch 0, nothing owned, by names and by a
    regex): the samples above are unknown members' heartbeats, refused before the group's
    state, its assignors and RE2 see them; mutations of these reach all three."""
    import dataclasses

    from purgatory.protocol.api import ApiKey

    key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    frames = []
    for version in range(VERSIONS[key][0], VERSIONS[key][1] + 1):
        join = dataclasses.replace(
            sample_request(key, version, 1),
            member_epoch=0,
            instance_id=None,
            topic_partitions=(),
            server_assignor=None,
        )
        if version >= 1:
            join = dataclasses.replace(join, subscribed_topic_regex="fuzz.*")
        frames.append(request_frame(key, version, 1, join, client_id="fuzz"))
    return frames


def _sample(info: mi.Type, depth: int = 0) -> Any:
    if isinstance(info, mi.IntType):
        return 1
    if isinstance(info, mi.FloatType):
        return 1.0
    if isinstance(info, mi.StrType):
        return "s"
    if isinstance(info, mi.BytesType):
        return b"b"
    if isinstance(info, mi.BoolType):
        return True
    if isinstance(info, (mi.NoneType, mi.AnyType)):
        return None
    if isinstance(info, mi.UnionType):
        return _sample(next(t for t in info.types if not isinstance(t, mi.NoneType)), depth)
    if isinstance(info, mi.LiteralType):
        return info.values[0]
    if isinstance(info, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return [] if depth > 4 else [_sample(info.item_type, depth + 1)]
    if isinstance(info, mi.DictType):
        return {} if depth > 4 else {_sample(info.key_type): _sample(info.value_type, depth + 1)}
    if isinstance(info, mi.StructType):
        return info.cls(**{f.name: _sample(f.type, depth + 1) for f in info.fields if f.required})
    return None  # pragma: no cover - a type the schemas do not use


def msgpack_frames() -> list[bytes]:
    """One frame per (API, version) of our protocol."""
    frames = []
    for (key, version), (request_type, _) in sorted(SCHEMAS.items()):
        body = _sample(mi.type_info(request_type))
        buffer = bytearray()
        encode_request_into(buffer, key, version, 1, "fuzz", body)
        frames.append(bytes(buffer))
    return frames


PING_ID = 0x7ABCDEF0  # the correlation id of a ping: its 4 bytes mark the answer


def pings() -> tuple[bytes, bytes]:
    """ApiVersions v0 on Kafka's protocol and on ours, with PING_ID: sent after a burst,
    its answer (answers come in order) says the broker has read everything before it."""
    from purgatory.protocol import messages as m
    from purgatory.protocol.api import ApiKey

    kafka = request_frame(ApiKey.API_VERSIONS, 0, PING_ID, sample_request(ApiKey.API_VERSIONS, 0))
    ours = bytearray()
    encode_request_into(ours, ApiKey.API_VERSIONS, 0, PING_ID, "fuzz", m.ApiVersionsRequest())
    return kafka, bytes(ours)


def kafka_batch(records: int = 2) -> bytes:
    now = int(time.time() * 1000)
    return kafka_records.encode([(now, b"k", b"v%d" % i, []) for i in range(records)])


def produce_frame(batch: bytes, topic: str = "fuzz", acks: int = 1) -> bytes:
    """A Kafka Produce v9 frame carrying ``batch`` as it is."""
    from purgatory.protocol.api import ApiKey
    from tests.integration.test_kafka_wire import produce_body

    return request_frame(ApiKey.PRODUCE, 9, 1, produce_body(topic, batch, acks), client_id="fuzz")
