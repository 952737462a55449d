"""ClientQuotaControlManager: AlterClientQuotas (49) on the controller (Kafka's
ClientQuotaControlManager). Each entry is checked against the controller's image and
turned into ClientQuotaRecords; every broker enforces the quotas once it replays them
(``ClientQuotasImage``, ``broker.quota``).

Results are per entity, and an entity fails or succeeds whole, INVALID_REQUEST with
Kafka's message when:

- an entity is empty, names a type other than ``user``, ``client-id`` and ``ip``, has an
  empty name, or combines ``ip`` with ``user`` or ``client-id``;
- an ``ip`` entity's name is not an IP address (Kafka also resolves host names: not here);
- a key is not one of the entity's (users and client ids: producer_byte_rate,
  consumer_byte_rate, request_percentage, controller_mutation_rate; ips:
  connection_creation_rate), a value is not above 0, or an integral key's value is
  fractional or too large;
- the request names one entity twice, or an entity's ops one key twice (Kafka's message
  then is "Ignoring duplicate entity" too).

A value equal to the current one writes nothing, as does removing a key not set. An
entity naming a type twice is that type's last name (Kafka reads the request's entity into
a map by type), and answered so.
"""

from __future__ import annotations

import ipaddress

from purgatory.broker.metadata.client_quota_image import (
    CLIENT_ID,
    IP,
    USER,
    Entity,
    entity_of,
    entity_text,
)
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import ClientQuotaRecord
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.errors import ErrorCode

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig keys and their ConfigDef types.
_LONG, _INT, _DOUBLE = "LONG", "INT", "DOUBLE"
USER_AND_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: _LONG,
    CONSUMER_BYTE_RATE: _LONG,
    REQUEST_PERCENTAGE: _DOUBLE,
    CONTROLLER_MUTATION_RATE: _DOUBLE,
}
IP_KEYS = {CONNECTION_CREATION_RATE: _INT}
_MAX = {_LONG: (float(2**63 - 1), "a LONG"), _INT: (float(2**31 - 1), "an INT")}

Result = tuple[int, str | None]
_NONE: Result = (ErrorCode.NONE, None)


def _invalid(message: str) -> Result:
    return (ErrorCode.INVALID_REQUEST, message)


class ClientQuotaControlManager:
    def alter_client_quotas(
        self, image: MetadataImage, request: qm.AlterClientQuotasRequest
    ) -> tuple[qm.AlterClientQuotasResponse, list[ClientQuotaRecord]]:
        """The answer to an AlterClientQuotas request and the records that make it (none
        for a validate_only request)."""
        records: list[ClientQuotaRecord] = []
        results: dict[Entity, tuple[list[qm.EntityData], Result]] = {}
        for entry in request.entries:
            given = list({c.entity_type: c for c in entry.entity}.values())
            entity = entity_of((c.entity_type, c.entity_name) for c in given)
            alterations: dict[str, float | None] = {}
            duplicate = entity in results
            for op in entry.ops:
                # Kafka puts "Duplicate quota key ..." in the results, then finds the entity
                # there and answers it as a duplicate entity: its message is that one.
                duplicate = duplicate or op.key in alterations
                alterations[op.key] = None if op.remove else op.value
            if duplicate:
                results[entity] = (
                    given,
                    _invalid(f"Ignoring duplicate entity {entity_text(entity)}"),
                )
            else:
                current = image.client_quotas.entities.get(entity, {})
                result, made = _alter_entity(given, entity, current, alterations)
                results[entity] = (given, result)
                if result == _NONE:
                    records.extend(made)
        response = qm.AlterClientQuotasResponse(
            [
                qm.AlterEntryResult(code, message, given)
                for given, (code, message) in results.values()
            ]
        )
        return response, [] if request.validate_only else records


def _alter_entity(
    given: list[qm.EntityData],
    entity: Entity,
    current: dict[str, float],
    alterations: dict[str, float | None],
) -> tuple[Result, list[ClientQuotaRecord]]:
    error = validate_entity(given)
    if error is not None:
        return _invalid(error), []
    keys = IP_KEYS if entity[0][0] == IP else USER_AND_CLIENT_KEYS
    records: list[ClientQuotaRecord] = []
    for key, value in alterations.items():
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(list(entity), key, remove=True))
            continue
        error = validate_quota_value(keys, key, value)
        if error is not None:
            return _invalid(error), []
        if current.get(key) != value:
            records.append(ClientQuotaRecord(list(entity), key, value))
    return _NONE, records


def validate_entity(given: list[qm.EntityData]) -> str | None:
    """Kafka's validateEntity and configKeysForEntityType: the message refusing an
    entity, or None."""
    if not given:
        return "Invalid empty client quota entity"
    seen: dict[str, str | None] = {}
    for component in given:
        kind, name = component.entity_type, component.entity_name
        if kind not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {kind}"
        if name is not None and not name:
            return f"Empty {kind} not supported"
        seen[kind] = name
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            # (Kafka's message, its missing space included.)
            return (
                "Invalid quota entity combination, IP entity shouldnot be combined with "
                "User or ClientId"
            )
        ip = seen[IP]
        if ip is not None and not _is_ip(ip):
            return f"{ip} is not a valid IP or resolvable host."
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def validate_quota_value(keys: dict[str, str], key: str, value: float) -> str | None:
    """Kafka's validateQuotaKeyValue: the message refusing ``key=value``, or None."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == _DOUBLE:
        return None
    limit, name = _MAX[kind]
    if value > limit:
        return f"Proposed value for {key} is too large for {name}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None
