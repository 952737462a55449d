"""ClientQuotasImage and ClientQuotasDelta (Kafka's): every client quota entity's quotas
as of one image of the metadata log, and the changes a run of ClientQuotaRecords makes.
Every broker holds every quota, so any of them answers DescribeClientQuotas
(``describe``, Kafka's filter semantics) and enforces them (``broker.quota``)."""

from __future__ import annotations

from collections.abc import Iterable

from purgatory.broker.metadata.records import ClientQuotaRecord
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# An entity: its (entity type, entity name) components sorted by type, each type once; a
# name of None is the type's default entity.
Entity = tuple[tuple[str, str | None], ...]


def entity_of(components: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(components, key=lambda c: c[0]))


def entity_text(entity: Entity) -> str:
    """As Kafka's ClientQuotaEntity.toString: ``ClientQuotaEntity(entries={user=alice})``."""
    entries = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


class DescribeError(Exception):
    """A DescribeClientQuotas filter Kafka refuses: ``code`` and its message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ClientQuotasImage:
    """Invariant: ``entities`` maps an entity to a non-empty dict of quota key -> value;
    never changed once made (a delta makes the next one)."""

    __slots__ = ("entities",)

    def __init__(self, entities: dict[Entity, dict[str, float]] | None = None) -> None:
        self.entities = entities if entities is not None else {}

    def records(self) -> list[ClientQuotaRecord]:
        """Records that rebuild this image from nothing (for a snapshot)."""
        return [
            ClientQuotaRecord(list(entity), key, value)
            for entity, quotas in self.entities.items()
            for key, value in sorted(quotas.items())
        ]

    def describe(self, request: qm.DescribeClientQuotasRequest) -> qm.DescribeClientQuotasResponse:
        """DescribeClientQuotas (Kafka's ClientQuotasImage.describe): the entities the
        filter matches, or the whole request refused with Kafka's error and message."""
        try:
            exact, specified = _parse_filter(request.components)
        except DescribeError as exc:
            return qm.DescribeClientQuotasResponse(exc.code, exc.message, None)
        entries = [
            qm.DescribeEntryData(
                [qm.EntityData(t, n) for t, n in entity],
                [qm.ValueData(k, v) for k, v in sorted(quotas.items())],
            )
            for entity, quotas in self.entities.items()
            if _matches(entity, exact, specified, request.strict)
        ]
        return qm.DescribeClientQuotasResponse(ErrorCode.NONE, None, entries)


def _parse_filter(
    components: list[qm.ComponentData],
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    invalid = ErrorCode.INVALID_REQUEST
    for c in components:
        kind = c.entity_type
        if not kind:
            raise DescribeError(invalid, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise DescribeError(
                invalid, f"Entity type {kind} cannot appear more than once in the filter."
            )
        if kind not in ENTITY_TYPES:
            raise DescribeError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == qm.MATCH_TYPE_EXACT:
            if c.match is None:
                raise DescribeError(
                    invalid, "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[kind] = c.match
        elif c.match_type == qm.MATCH_TYPE_DEFAULT:
            if c.match is not None:
                raise DescribeError(
                    invalid,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif c.match_type == qm.MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                raise DescribeError(
                    invalid,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(kind)
        else:
            raise DescribeError(invalid, f"Unknown match type {c.match_type}")
    if (IP in exact or IP in specified) and (
        USER in exact or USER in specified or CLIENT_ID in exact or CLIENT_ID in specified
    ):
        raise DescribeError(
            invalid,
            "Invalid entity filter component combination. IP filter component should not "
            "be used with user or clientId filter component.",
        )
    return exact, specified


def _matches(
    entity: Entity, exact: dict[str, str | None], specified: set[str], strict: bool
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    names = dict(entity)
    for kind, name in exact.items():
        if kind not in names or names[kind] != name:
            return False
    return all(kind in names for kind in specified)


class ClientQuotasDelta:
    """ClientQuotaRecords replayed on top of ``image``; ``apply`` makes the next image,
    sharing every entity no record touched."""

    def __init__(self, image: ClientQuotasImage) -> None:
        self.image = image
        self._entities = dict(image.entities)
        self._copied: set[Entity] = set()  # entities whose dict is this delta's own

    def replay(self, record: ClientQuotaRecord) -> None:
        entity = entity_of((kind, name) for kind, name in record.entity)
        if entity not in self._copied:
            self._entities[entity] = dict(self._entities.get(entity, {}))
            self._copied.add(entity)
        if record.remove:
            self._entities[entity].pop(record.key, None)
        else:
            self._entities[entity][record.key] = record.value

    def apply(self) -> ClientQuotasImage:
        return ClientQuotasImage({e: q for e, q in self._entities.items() if q})
