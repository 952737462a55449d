"""Request and response bodies of the ACL APIs on our protocol, CreateAcls (30),
DescribeAcls (29) and DeleteAcls (31), in Kafka's shapes with Kafka's codes
(``broker.security.authorizer.acl``; ``protocol.messages`` describes how Structs
travel)."""

from __future__ import annotations

from enum import IntEnum

from purgatory.protocol.messages import Message

# Kafka's codes (its ResourceType, PatternType, AclOperation and AclPermissionType).


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class Acl(Message):
    """One ACL binding, or (in a filter) what matches bindings: a null name, principal or
    host matches any; resource type, pattern type, operation and permission ANY (1) too."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int


# -- CreateAcls (30) --------------------------------------------------------------------------


class CreateAclsRequest(Message):
    creations: list[Acl]


class AclCreationResult(Message):
    error_code: int
    error_message: str | None = None


class CreateAclsResponse(Message):
    results: list[AclCreationResult]


# -- DescribeAcls (29) ------------------------------------------------------------------------


class DescribeAclsRequest(Message):
    filter: Acl


class DescribeAclsResponse(Message):
    error_code: int
    error_message: str | None
    acls: list[Acl]


# -- DeleteAcls (31) --------------------------------------------------------------------------


class DeleteAclsRequest(Message):
    filters: list[Acl]


class DeleteAclsMatchingAcl(Message):
    error_code: int
    error_message: str | None
    acl: Acl


class DeleteAclsFilterResult(Message):
    error_code: int
    error_message: str | None
    matching_acls: list[DeleteAclsMatchingAcl]


class DeleteAclsResponse(Message):
    filter_results: list[DeleteAclsFilterResult]
