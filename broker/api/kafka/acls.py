"""The Kafka listener's ACL APIs: DescribeAcls (29), answered by any broker from its
metadata image, and CreateAcls (30) and DeleteAcls (31), which the active controller
serves (forwarded there, ``AclControlManager``). As Kafka's AclApis: without an
authorizer each answers SECURITY_DISABLED; DescribeAcls needs DESCRIBE on the cluster,
CreateAcls and DeleteAcls ALTER (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.acl_requests import describe_acls, refusal
from purgatory.broker.api.request_limits import MAX_PARTITIONS_PER_REQUEST
from purgatory.broker.api.results import Result
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import acl_messages as am
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

ACL_APIS = frozenset({ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS})


class AclApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
        }

    def handle_describe_acls(self, request: Any, version: int) -> Result:
        asked = _filter(
            request.resource_type_filter,
            request.resource_name_filter,
            request.pattern_type_filter,
            request.principal_filter,
            request.host_filter,
            request.operation,
            request.permission_type,
        )
        refused = refusal(self.broker.auth, AclOperation.DESCRIBE)
        if refused is not None:
            return describe_response(version, am.DescribeAclsResponse(*refused, []))
        return describe_response(
            version, describe_acls(self.broker.metadata.image.acls.acls, asked)
        )

    async def handle_create_acls(self, request: Any, version: int) -> Any:
        _check_count(len(request.creations))
        refused = refusal(self.broker.auth, AclOperation.ALTER)
        if refused is not None:
            return create_response(version, len(request.creations), refused)
        asked = am.CreateAclsRequest(
            [
                am.Acl(
                    c.resource_type,
                    c.resource_name,
                    c.resource_pattern_type,
                    c.principal,
                    c.host,
                    c.operation,
                    c.permission_type,
                )
                for c in request.creations
            ]
        )
        done = await self.broker.forwarding.create_acls(asked)
        schema = response_module(ApiKey.CREATE_ACLS, version)
        return build(
            schema.CreateAclsResponse,
            throttle_time=0,
            results=[
                build(
                    schema.AclCreationResult, error_code=r.error_code, error_message=r.error_message
                )
                for r in done.results
            ],
        )

    async def handle_delete_acls(self, request: Any, version: int) -> Any:
        _check_count(len(request.filters))
        refused = refusal(self.broker.auth, AclOperation.ALTER)
        if refused is not None:
            return delete_error_response(version, len(request.filters), *refused)
        asked = am.DeleteAclsRequest(
            [
                _filter(
                    f.resource_type_filter,
                    f.resource_name_filter,
                    f.pattern_type_filter,
                    f.principal_filter,
                    f.host_filter,
                    f.operation,
                    f.permission_type,
                )
                for f in request.filters
            ]
        )
        done = await self.broker.forwarding.delete_acls(asked)
        return delete_response(version, done)


def _filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> am.Acl:
    """A kio filter's fields (int8 codes) as our protocol's filter."""
    return am.Acl(
        int(resource_type),
        name,
        int(pattern_type),
        principal,
        host,
        int(operation),
        int(permission_type),
    )


def _check_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"at most {MAX_PARTITIONS_PER_REQUEST} ACLs per request"
        )


def describe_response(version: int, described: am.DescribeAclsResponse) -> Any:
    """Kafka groups the ACLs by resource (type, name, pattern)."""
    schema = response_module(ApiKey.DESCRIBE_ACLS, version)
    resources: dict[tuple[int, str, int], list[am.Acl]] = defaultdict(list)
    for acl in described.acls:
        resources[(acl.resource_type, acl.resource_name or "", acl.pattern_type)].append(acl)
    return build(
        schema.DescribeAclsResponse,
        throttle_time=0,
        error_code=described.error_code,
        error_message=described.error_message,
        resources=[
            build(
                schema.DescribeAclsResource,
                resource_type=kind,
                resource_name=name,
                pattern_type=pattern,
                acls=[
                    build(
                        schema.AclDescription,
                        principal=a.principal or "",
                        host=a.host or "",
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in acls
                ],
            )
            for (kind, name, pattern), acls in sorted(resources.items())
        ],
    )


def create_response(version: int, count: int, error: tuple[int, str]) -> Any:
    schema = response_module(ApiKey.CREATE_ACLS, version)
    code, message = error
    return build(
        schema.CreateAclsResponse,
        throttle_time=0,
        results=[
            build(schema.AclCreationResult, error_code=code, error_message=message)
            for _ in range(count)
        ],
    )


def delete_response(version: int, done: am.DeleteAclsResponse) -> Any:
    schema = response_module(ApiKey.DELETE_ACLS, version)
    return build(
        schema.DeleteAclsResponse,
        throttle_time=0,
        filter_results=[
            build(
                schema.DeleteAclsFilterResult,
                error_code=r.error_code,
                error_message=r.error_message,
                matching_acls=[
                    build(
                        schema.DeleteAclsMatchingAcl,
                        error_code=m.error_code,
                        error_message=m.error_message,
                        resource_type=m.acl.resource_type,
                        resource_name=m.acl.resource_name or "",
                        pattern_type=m.acl.pattern_type,
                        principal=m.acl.principal or "",
                        host=m.acl.host or "",
                        operation=m.acl.operation,
                        permission_type=m.acl.permission_type,
                    )
                    for m in r.matching_acls
                ],
            )
            for r in done.filter_results
        ],
    )


def delete_error_response(version: int, count: int, code: int, message: str) -> Any:
    return delete_response(
        version,
        am.DeleteAclsResponse([am.DeleteAclsFilterResult(code, message, []) for _ in range(count)]),
    )


def error_response(key: int, version: int, body: Any, code: int, message: str) -> Any:
    """The API's answer refusing the whole request with ``code`` (Kafka's
    ``getErrorResponse``)."""
    if key == ApiKey.DESCRIBE_ACLS:
        return describe_response(version, am.DescribeAclsResponse(code, message, []))
    if key == ApiKey.CREATE_ACLS:
        return create_response(version, len(body.creations), (code, message))
    return delete_error_response(version, len(body.filters), code, message)
