"""Kafka's consumer protocol: the bytes group members exchange through the coordinator.

A consumer's JoinGroup carries, per assignor it supports ("range", "roundrobin", ...), its
subscription; the leader's SyncGroup carries each member's assignment. The coordinator
passes both along without reading them (except to tell which topics a group consumes).
Both are written as Kafka's ConsumerProtocol writes them: an int16 version, then that
version of ConsumerProtocolSubscription / ConsumerProtocolAssignment (kio's schemas). We
write version 0, which every client reads, and read every version (fields a newer version
adds after the ones we know are ignored, as Kafka's own reader does).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = {}  # v1+: what the member holds (cooperative)
    rack_id: str | None = None  # v3+


class Assignment(NamedTuple):
    partitions: dict[str, list[int]]  # topic -> partition indexes
    user_data: bytes | None = None


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer protocol subscription or assignment."""


def _module(modules: Sequence[Any], version: int) -> Any:
    if version < 0:
        raise ConsumerProtocolError(f"negative consumer protocol version {version}")
    return modules[min(version, len(modules) - 1)]


def _read(data: bytes, cls_of: Any) -> Any:
    if len(data) < _VERSION.size:
        raise ConsumerProtocolError(f"{len(data)} bytes hold no consumer protocol version")
    (version,) = _VERSION.unpack_from(data)
    cls = cls_of(version)
    try:
        value, _ = entity_reader(cls)(memoryview(bytes(data[_VERSION.size :])), 0)
    except Exception as exc:  # kio raises several kinds on short or garbled input
        raise ConsumerProtocolError(f"unreadable {cls.__name__} v{version}: {exc}") from None
    return value


def _write(value: Any) -> bytes:
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    entity_writer(type(value))(out, value)
    return out.getvalue()


def _subscription_cls(version: int) -> Any:
    module = _module((subscription_v0, subscription_v1, subscription_v2, subscription_v3), version)
    return module.ConsumerProtocolSubscription


def _assignment_cls(version: int) -> Any:
    module = _module((assignment_v0, assignment_v1, assignment_v2, assignment_v3), version)
    return module.ConsumerProtocolAssignment


def encode_subscription(subscription: Subscription) -> bytes:
    return _write(
        subscription_v0.ConsumerProtocolSubscription(
            topics=tuple(subscription.topics), user_data=subscription.user_data
        )
    )


def decode_subscription(data: bytes) -> Subscription:
    value = _read(data, _subscription_cls)
    owned = {
        tp.topic: [int(p) for p in tp.partitions] for tp in getattr(value, "owned_partitions", ())
    }
    return Subscription(list(value.topics), value.user_data, owned, getattr(value, "rack_id", None))


def encode_assignment(assignment: Assignment) -> bytes:
    return _write(
        assignment_v0.ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                assignment_v0.TopicPartition(topic=TopicName(t), partitions=tuple(map(i32, ps)))
                for t, ps in sorted(assignment.partitions.items())
            ),
            user_data=assignment.user_data,
        )
    )


def decode_assignment(data: bytes) -> Assignment:
    """An empty byte string is an empty assignment (what the coordinator gives a member the
    leader left out)."""
    if not data:
        return Assignment({})
    value = _read(data, _assignment_cls)
    return Assignment(
        {tp.topic: [int(p) for p in tp.partitions] for tp in value.assigned_partitions},
        value.user_data,
    )


def assigned_topics(assignments: Mapping[str, bytes]) -> set[str]:
    """Topics any of the assignments names (unreadable ones name none)."""
    topics: set[str] = set()
    for data in assignments.values():
        try:
            topics.update(decode_assignment(data).partitions)
        except ConsumerProtocolError:
            continue
    return topics
