"""ACL bindings as Kafka has them (its ResourcePattern, AccessControlEntry, AclBinding and
their filters), with Kafka's codes: a resource (type, name, LITERAL or PREFIXED pattern)
and an entry (principal, host, operation, ALLOW or DENY). A filter matches bindings for
DescribeAcls and DeleteAcls (ANY matches every value, MATCH every pattern that applies
to a name)."""

from __future__ import annotations

from enum import IntEnum

import msgspec

from purgatory.protocol.acl_messages import AclOperation as AclOperation
from purgatory.protocol.acl_messages import AclPermissionType as AclPermissionType
from purgatory.protocol.acl_messages import PatternType as PatternType
from purgatory.protocol.acl_messages import ResourceType as ResourceType

WILDCARD = "*"  # a literal resource name or host matching every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource


# What each operation also allows (Kafka's AclEntry.supportedOperations' implications):
# READ, WRITE, DELETE and ALTER each imply DESCRIBE; ALTER_CONFIGS implies
# DESCRIBE_CONFIGS. Only for ALLOW: a DENY denies its own operation (or ALL) only.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


class AclBinding(msgspec.Struct, frozen=True, gc=False):
    """One ACL: on resources of ``resource_type`` named ``resource_name`` (exactly, or
    every name with it as prefix), ``principal`` from ``host`` is allowed or denied
    ``operation``."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def __str__(self) -> str:
        return (
            f"(pattern=ResourcePattern(resourceType={ResourceType(self.resource_type).name}, "
            f"name={self.resource_name}, patternType={PatternType(self.pattern_type).name}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={AclOperation(self.operation).name}, "
            f"permissionType={AclPermissionType(self.permission_type).name}))"
        )


class AclBindingFilter(msgspec.Struct, frozen=True):
    """Which bindings DescribeAcls and DeleteAcls mean: None (a null filter field) and
    ANY match every value; pattern MATCH matches every binding that applies to
    ``resource_name`` (its literal, the wildcard, and every prefix of it)."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)

    def _pattern_matches(self, acl: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return name is None or name == acl.resource_name


def binding_problem(acl: AclBinding) -> str | None:
    """Why an ACL cannot be created, if it cannot (Kafka's AclApis and
    AclControlManager.validateNewAcl; answered INVALID_REQUEST). A principal must be
    ``type:name`` (Kafka's StandardAcl parses it to match)."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or (
        acl.resource_type not in set(ResourceType)
    ):
        return f"Invalid resourceType {_name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {_name(PatternType, acl.pattern_type)}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or (
        acl.operation not in set(AclOperation)
    ):
        return f"Invalid operation {_name(AclOperation, acl.operation)}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {_name(AclPermissionType, acl.permission_type)}"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    principal_type, sep, principal_name = acl.principal.partition(":")
    if not (sep and principal_type and principal_name):
        return (
            f"Could not parse principal from `{acl.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    return None


def _name(kind: type[IntEnum], value: int) -> str:
    try:
        return kind(value).name
    except ValueError:
        return "UNKNOWN"
