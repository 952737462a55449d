"""The Kafka listener's client quota APIs: DescribeClientQuotas (48), answered by any
broker from its metadata image (``ClientQuotasImage.describe``), and AlterClientQuotas
(49), which the active controller serves (forwarded there,
``ClientQuotaControlManager``). v0-1, as Kafka serves them
(``broker/api/client_quota_requests.py`` holds what both protocols share)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api.client_quota_requests import (
    alter_client_quotas,
    describe_client_quotas,
    refused_alter,
)
from purgatory.broker.api.results import Result
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

CLIENT_QUOTA_APIS = frozenset({ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS})


class ClientQuotaApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.handle_alter_client_quotas,
        }

    def handle_describe_client_quotas(self, request: Any, version: int) -> Result:
        asked = qm.DescribeClientQuotasRequest(
            [qm.ComponentData(c.entity_type, c.match_type, c.match) for c in request.components],
            request.strict,
        )
        return describe_response(version, describe_client_quotas(self.broker, asked))

    async def handle_alter_client_quotas(self, request: Any, version: int) -> Any:
        done = await alter_client_quotas(self.broker, _alter_request(request))
        return alter_response(version, done)


def _alter_request(request: Any) -> qm.AlterClientQuotasRequest:
    return qm.AlterClientQuotasRequest(
        [
            qm.AlterEntryData(
                [qm.EntityData(e.entity_type, e.entity_name) for e in entry.entity],
                [qm.OpData(o.key, o.value, o.remove) for o in entry.ops],
            )
            for entry in request.entries
        ],
        request.validate_only,
    )


def describe_response(version: int, described: qm.DescribeClientQuotasResponse) -> Any:
    schema = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    entries = None
    if described.entries is not None:
        entries = [
            build(
                schema.EntryData,
                entity=[
                    build(schema.EntityData, entity_type=c.entity_type, entity_name=c.entity_name)
                    for c in e.entity
                ],
                values=[build(schema.ValueData, key=v.key, value=v.value) for v in e.values],
            )
            for e in described.entries
        ]
    return build(
        schema.DescribeClientQuotasResponse,
        throttle_time=0,
        error_code=described.error_code,
        error_message=described.error_message,
        entries=entries,
    )


def alter_response(version: int, done: qm.AlterClientQuotasResponse) -> Any:
    schema = response_module(ApiKey.ALTER_CLIENT_QUOTAS, version)
    return build(
        schema.AlterClientQuotasResponse,
        throttle_time=0,
        entries=[
            build(
                schema.EntryData,
                error_code=r.error_code,
                error_message=r.error_message,
                entity=[
                    build(schema.EntityData, entity_type=c.entity_type, entity_name=c.entity_name)
                    for c in r.entity
                ],
            )
            for r in done.entries
        ],
    )


def error_response(key: int, version: int, body: Any, code: int, message: str) -> Any:
    """The API's answer refusing the whole request with ``code``, as Kafka's
    ``getErrorResponse``: a describe's at the top, an alter's in every entity."""
    if key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
        return describe_response(version, qm.DescribeClientQuotasResponse(code, message, None))
    return alter_response(version, refused_alter(_alter_request(body), code, message))
