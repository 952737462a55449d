"""StandardAuthorizer: Kafka's authorizer over the ACLs of the metadata log (its
StandardAuthorizer and StandardAuthorizerData).

``authorize`` decides one action on one resource: a super user (``super.users``) may do
anything; otherwise the ACLs that apply to the resource are those of its type whose
LITERAL name is the resource's or ``*``, and whose PREFIXED name begins it. Among those
that match the principal (or ``User:*``) and the client's host (or ``*``), a DENY of the
operation (or ALL) wins; else an ALLOW of it (or ALL, or an operation that implies it:
READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS)
allows; else the action is denied, unless no ACL applies to the resource at all and
``allow.everyone.if.no.acl.found`` is true.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from purgatory.broker.security.authorizer.acl import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from purgatory.broker.security.kafka_principal import KafkaPrincipal

# What authorizer.class.name names to turn it on (Kafka's KRaft authorizer).
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: ``User:admin;User:broker`` (semicolon-separated principals)."""
    users = frozenset(u.strip() for u in value.split(";") if u.strip())
    for principal in users:
        kind, sep, name = principal.partition(":")
        if not (sep and kind and name):
            raise ValueError(f"super user {principal!r} is not a principal (User:name)")
    return users


class StandardAuthorizer:
    def __init__(self, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        # The ACLs by resource type (replaced whole when the metadata image changes); the
        # LITERAL ones of a type also by name, so a check reads only those that apply.
        self._by_type: dict[int, list[AclBinding]] = {}
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}

    def load(self, acls: Iterable[AclBinding]) -> None:
        """Take the metadata image's ACLs."""
        by_type: dict[int, list[AclBinding]] = defaultdict(list)
        literal: dict[tuple[int, str], list[AclBinding]] = defaultdict(list)
        prefixed: dict[int, list[AclBinding]] = defaultdict(list)
        for acl in acls:
            by_type[acl.resource_type].append(acl)
            if acl.pattern_type == PatternType.LITERAL:
                literal[(acl.resource_type, acl.resource_name)].append(acl)
            else:
                prefixed[acl.resource_type].append(acl)
        self._by_type, self._literal, self._prefixed = dict(by_type), dict(literal), dict(prefixed)

    def _applying(self, resource_type: int, name: str) -> Iterable[AclBinding]:
        """The ACLs that apply to the resource: LITERAL ones of its name or ``*``, and the
        PREFIXED ones its name begins with."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for acl in self._prefixed.get(resource_type, ()):
            if name.startswith(acl.resource_name):
                yield acl

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if str(principal) in self.super_users:
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        applies = allowed = False
        for acl in self._applying(resource_type, name):
            applies = True
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.operation in (AclOperation.ALL, operation):
                    return False  # a DENY wins
            elif acl.operation in (AclOperation.ALL, operation) or (
                acl.operation in IMPLIED_BY.get(operation, ())
            ):
                allowed = True
        return allowed or (not applies and self.allow_if_no_acl)

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on some resource of the type (Kafka's
        Authorizer.authorizeByResourceType, KIP-679: an idempotent producer may write if
        it may write to any topic): an ALLOW of it not covered by a DENY."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        denied: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allows: list[AclBinding] = []
        for acl in self._by_type.get(resource_type, ()):
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if acl.operation not in (AclOperation.ALL, operation):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                denied[acl.pattern_type].add(acl.resource_name)
            elif acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                return True
            else:
                allows.append(acl)
        for acl in allows:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            prefixes = (name[: i + 1] for i in range(len(name)))
            if not any(prefix in denied[PatternType.PREFIXED] for prefix in prefixes):
                return True
        return False
