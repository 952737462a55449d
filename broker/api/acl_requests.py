"""What both protocols' ACL APIs share (Kafka's AclApis): when a request is refused whole,
and DescribeAcls answered from a metadata image's ACLs."""

from __future__ import annotations

from collections.abc import Mapping

from purgatory.broker.controller.acl_control import binding_filter, filter_problem, wire_acl
from purgatory.broker.security.authorizer.acl import AclBinding, AclOperation
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol import acl_messages as am
from purgatory.protocol.errors import ErrorCode

# Kafka's AclApis words it one way for DescribeAcls, another for CreateAcls and DeleteAcls.
NO_AUTHORIZER = "No Authorizer is configured on the broker"
NO_AUTHORIZER_TO_ALTER = "No Authorizer is configured."


def refusal(auth: AuthHelper, operation: AclOperation) -> tuple[int, str] | None:
    """Why an ACL request is refused whole, if it is: SECURITY_DISABLED without an
    authorizer; CLUSTER_AUTHORIZATION_FAILED without ``operation`` on the cluster
    (DESCRIBE for DescribeAcls, ALTER for CreateAcls and DeleteAcls)."""
    if not auth.enabled:
        message = NO_AUTHORIZER if operation == AclOperation.DESCRIBE else NO_AUTHORIZER_TO_ALTER
        return ErrorCode.SECURITY_DISABLED, message
    if not auth.authorize_cluster(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return None


def describe_acls(acls: Mapping[str, AclBinding], asked: am.Acl) -> am.DescribeAclsResponse:
    """DescribeAcls from an image's ACLs (by id): INVALID_REQUEST for a filter that cannot
    match, as Kafka's DescribeAclsRequest refuses one."""
    acl_filter = binding_filter(asked)
    problem = filter_problem(acl_filter)
    if problem is not None:
        return am.DescribeAclsResponse(ErrorCode.INVALID_REQUEST, problem, [])
    matching = [wire_acl(a) for _, a in sorted(acls.items()) if acl_filter.matches(a)]
    return am.DescribeAclsResponse(ErrorCode.NONE, None, matching)
