"""Apache Kafka's message schemas as the Kafka listener uses them: which APIs and versions it
serves, and a builder for kio's response classes that takes plain Python values.

kio (generated from Kafka's JSON schemas) has one frozen dataclass per API, version and
nested entity, with strict field types (``ErrorCode`` enums, ``timedelta`` for durations,
``UUID`` for topic ids, ``datetime`` for timestamps). ``build`` coerces plain integers and
strings to those types by each field's ``kafka_type`` and drops values for fields the
version lacks, so one handler serves every version of its API.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.constants import EntityType

from purgatory.protocol.api import ApiKey

# The versions served, from Kafka 4.0's minimums; maxima as in Kafka 3.7/3.9 where the
# clients measured pick them (kafka-python infers the broker release from these ranges).
VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 10),
    ApiKey.FETCH: (4, 16),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (2, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    # KIP-848's consumer group protocol (v1: client-generated member ids, regexes).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # KIP-932's share groups (Kafka 4.1's v1; v0 was the early access).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.API_VERSIONS: (0, 4),
    # SASL (served on SASL listeners; elsewhere answered ILLEGAL_SASL_STATE, as Kafka).
    # SaslHandshake v0, whose tokens follow without Kafka's framing, is not served.
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    # Kafka 4.x's; DescribeLogDirs without 4.3's v5 (kafka-python would infer a 4.3 broker).
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # KIP-932's share consumers' record APIs (Kafka 4.1's v1, 4.2's v2; v0 was the early access).
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    # Transactions (version 1 of them: no KIP-890 part 2, whose EndTxn v5 bumps epochs).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    # ACLs in the metadata log (Kafka 4.x's versions).
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (2, 3),
    ApiKey.DELETE_ACLS: (2, 3),
    # Client quotas in the metadata log (v0-1; Kafka 4 serves v0-1 too).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # SCRAM users' credentials in the metadata log (Kafka serves v0 only).
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

E = TypeVar("E")


def supports(api_key: int, version: int) -> bool:
    versions = VERSIONS.get(api_key)  # type: ignore[call-overload]
    return versions is not None and versions[0] <= version <= versions[1]


@functools.cache
def request_class(api_key: int, version: int) -> type[Any]:
    module = load_payload_module(api_key, version, EntityType.request)
    return _payload_class(module, EntityType.request)


@functools.cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The kio module of a response version: its nested entity classes by Kafka's names."""
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def response_class(api_key: int, version: int) -> type[Any]:
    return _payload_class(response_module(api_key, version), EntityType.response)


def is_flexible(api_key: int, version: int) -> bool:
    """Whether the version uses compact types and tagged fields (and request header v2)."""
    return bool(request_class(api_key, version).__flexible__)


def _payload_class(module: ModuleType, kind: EntityType) -> type[Any]:
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "__type__", None) is kind:
            return value
    raise LookupError(f"{module.__name__} has no {kind.name} class")  # pragma: no cover


# -- building responses from plain values ----------------------------------------------------


def _error_code(value: int) -> KioErrorCode:
    return KioErrorCode(value)


def _duration(value: int | datetime.timedelta) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)


_MS = datetime.timedelta(milliseconds=1)


def millis(value: datetime.timedelta) -> int:
    """A duration from a kio request in Kafka's milliseconds, exactly: through float seconds
    (``total_seconds() * 1000``) about 1 in 135 of them came out one short (1001 ms as 1000)."""
    return value // _MS


def _uuid(value: str | uuid.UUID | None) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(hex=value) if value else None


def _timestamp(value: int | datetime.datetime | None) -> datetime.datetime | None:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if value < 0:
        return None
    return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)


_COERCE: dict[str, Callable[[Any], Any]] = {
    "error_code": _error_code,
    "timedelta_i32": _duration,
    "timedelta_i64": _duration,
    "uuid": _uuid,
    "datetime_i64": _timestamp,
}


_plans: dict[type[Any], dict[str, Callable[[Any], Any] | None]] = {}


def _plan(cls: type[Any]) -> dict[str, Callable[[Any], Any] | None]:
    plan = _plans.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls)
        plan = _plans[cls] = {f.name: _COERCE.get(f.metadata.get("kafka_type", "")) for f in fields}
    return plan


def build(cls: type[E], **values: Any) -> E:
    """An instance of a kio entity from plain values: error codes as ints, durations in ms,
    topic ids as hex strings, timestamps in ms (-1: none). Values for fields this version
    of the entity lacks are dropped; fields not given keep their schema default."""
    plan = _plan(cls)
    kwargs = {}
    for name, value in values.items():
        if name in plan:
            coerce = plan[name]
            kwargs[name] = value if coerce is None else coerce(value)
    return cls(**kwargs)
