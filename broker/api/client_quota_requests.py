"""What both protocols' client quota APIs share (Kafka's KafkaApis
handleDescribeClientQuotas and handleAlterClientQuotas): DescribeClientQuotas answered
from a metadata image, needing DESCRIBE_CONFIGS on the cluster, and AlterClientQuotas
forwarded to the active controller, needing ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED
without; everything is allowed without an authorizer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.broker.api.request_limits import MAX_PARTITIONS_PER_REQUEST
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.api import RequestError
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

CLUSTER_REFUSED = "Cluster authorization failed."


def describe_client_quotas(
    broker: Broker, request: qm.DescribeClientQuotasRequest
) -> qm.DescribeClientQuotasResponse:
    if not broker.auth.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return qm.DescribeClientQuotasResponse(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED, None
        )
    return broker.metadata.image.client_quotas.describe(request)


async def alter_client_quotas(
    broker: Broker, request: qm.AlterClientQuotasRequest
) -> qm.AlterClientQuotasResponse:
    if len(request.entries) > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"at most {MAX_PARTITIONS_PER_REQUEST} entities per request",
        )
    if not broker.auth.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return refused_alter(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED)
    return await broker.forwarding.alter_client_quotas(request)


def refused_alter(
    request: qm.AlterClientQuotasRequest, code: int, message: str | None
) -> qm.AlterClientQuotasResponse:
    """Every entity of ``request`` answered ``code`` (Kafka's getErrorResponse)."""
    return qm.AlterClientQuotasResponse(
        [qm.AlterEntryResult(code, message, e.entity) for e in request.entries]
    )
