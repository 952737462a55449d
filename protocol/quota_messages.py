"""Request and response bodies of the client quota APIs on our protocol,
DescribeClientQuotas (48) and AlterClientQuotas (49), in Kafka's shapes
(``protocol.messages`` describes how Structs travel). An entity is a list of
(entity type, entity name) components: ``user``, ``client-id`` or ``ip``, a name of None
standing for the type's default entity (kafka-configs' ``--entity-default``)."""

from __future__ import annotations

from purgatory.protocol.messages import Message

# Kafka's DescribeClientQuotas match types.
MATCH_TYPE_EXACT = 0  # the entity of that name
MATCH_TYPE_DEFAULT = 1  # the type's default entity
MATCH_TYPE_SPECIFIED = 2  # any entity of the type (kafka-configs without --entity-name)


class EntityData(Message):
    entity_type: str
    entity_name: str | None


# -- DescribeClientQuotas (48) ---------------------------------------------------------------


class ComponentData(Message):
    entity_type: str
    match_type: int
    match: str | None = None


class DescribeClientQuotasRequest(Message):
    components: list[ComponentData]
    strict: bool = False  # only entities with no component beyond those filtered


class ValueData(Message):
    key: str
    value: float


class DescribeEntryData(Message):
    entity: list[EntityData]
    values: list[ValueData]


class DescribeClientQuotasResponse(Message):
    error_code: int
    error_message: str | None
    entries: list[DescribeEntryData] | None


# -- AlterClientQuotas (49) ------------------------------------------------------------------


class OpData(Message):
    key: str
    value: float
    remove: bool = False


class AlterEntryData(Message):
    entity: list[EntityData]
    ops: list[OpData]


class AlterClientQuotasRequest(Message):
    entries: list[AlterEntryData]
    validate_only: bool = False


class AlterEntryResult(Message):
    error_code: int
    error_message: str | None
    entity: list[EntityData]


class AlterClientQuotasResponse(Message):
    entries: list[AlterEntryResult]
