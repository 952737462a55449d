"""Kafka's StandardAuthorizer semantics (cases after its StandardAuthorizerTest): super
users, LITERAL, wildcard and PREFIXED patterns, DENY over ALLOW, implied DESCRIBE,
principals and hosts, allow.everyone.if.no.acl.found, authorization by resource type
(KIP-679); ACL filters and the checks on a new ACL."""

from __future__ import annotations

import pytest

from purgatory.broker.security.authorizer.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from purgatory.broker.security.authorizer.standard_authorizer import (
    StandardAuthorizer,
    parse_super_users,
)
from purgatory.broker.security.kafka_principal import KafkaPrincipal, user

ALICE, BOB = user("alice"), user("bob")
R, W, D = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str,
    operation: AclOperation = R,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    *,
    pattern: PatternType = LITERAL,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def authorizer(
    *acls: AclBinding, super_users: str = "", allow_if_no_acl: bool = False
) -> StandardAuthorizer:
    out = StandardAuthorizer(parse_super_users(super_users), allow_if_no_acl)
    out.load(acls)
    return out


def can(
    auth: StandardAuthorizer,
    op: AclOperation,
    name: str,
    who: KafkaPrincipal = ALICE,
    host: str = "10.0.0.1",
    resource_type: ResourceType = TOPIC,
) -> bool:
    return auth.authorize(who, host, op, resource_type, name)


def test_without_acls_only_super_users_may_unless_everyone_is_allowed() -> None:
    auth = authorizer(super_users="User:admin;User:broker")
    assert can(auth, W, "orders", user("admin"))
    assert not can(auth, W, "orders")
    assert can(authorizer(allow_if_no_acl=True), W, "orders")
    # An ACL on the resource, even for someone else, ends "no ACL found".
    assert not can(
        authorizer(acl("orders", principal="User:bob"), allow_if_no_acl=True), W, "orders"
    )
    with pytest.raises(ValueError, match="not a principal"):
        parse_super_users("admin")


def test_literal_wildcard_and_prefixed_patterns() -> None:
    auth = authorizer(
        acl("orders"),
        acl("pay", pattern=PREFIXED),
        acl("*", principal="User:bob"),
    )
    assert can(auth, R, "orders") and not can(auth, R, "orders2")
    assert can(auth, R, "payments") and can(auth, R, "pay") and not can(auth, R, "pa")
    assert can(auth, R, "anything", BOB)
    assert not can(auth, W, "orders")  # another operation


def test_deny_wins_over_allow_and_all_covers_every_operation() -> None:
    auth = authorizer(
        acl("*", AclOperation.ALL),
        acl("secret", pattern=PREFIXED, permission=DENY),
    )
    assert can(auth, W, "orders") and can(auth, R, "orders")
    assert not can(auth, R, "secret-1")
    assert can(auth, W, "secret-1")  # the DENY is of READ only
    assert can(auth, D, "secret-1")  # a DENY of READ does not deny DESCRIBE


def test_read_write_delete_and_alter_imply_describe() -> None:
    for op in (R, W, AclOperation.DELETE, AclOperation.ALTER):
        assert can(authorizer(acl("t", op)), D, "t")
    assert not can(authorizer(acl("t", AclOperation.CREATE)), D, "t")
    auth = authorizer(acl("t", AclOperation.ALTER_CONFIGS))
    assert can(auth, AclOperation.DESCRIBE_CONFIGS, "t")
    assert not can(auth, D, "t")


def test_principals_and_hosts_must_match() -> None:
    auth = authorizer(acl("t", host="10.0.0.1"), acl("t", W, principal="User:*"))
    assert can(auth, R, "t", host="10.0.0.1") and not can(auth, R, "t", host="10.0.0.2")
    assert not can(auth, R, "t", BOB, host="10.0.0.1")
    assert can(auth, W, "t", BOB)  # User:* is everyone
    assert not can(auth, R, "t", resource_type=GROUP)  # a topic's ACLs are not a group's


def test_authorize_by_resource_type_finds_an_allow_that_no_deny_covers() -> None:
    def by_type(*acls: AclBinding) -> bool:
        return authorizer(*acls).authorize_by_resource_type(ALICE, "h", W, TOPIC)

    assert not by_type()
    assert by_type(acl("orders", W))
    assert by_type(acl("*", W))
    assert not by_type(acl("orders", W), acl("orders", W, DENY))
    assert not by_type(acl("orders", W), acl("ord", W, DENY, pattern=PREFIXED))
    assert by_type(acl("orders", W), acl("x", W, DENY, pattern=PREFIXED))
    assert not by_type(acl("orders", W), acl("*", W, DENY))
    assert authorizer(super_users="User:alice").authorize_by_resource_type(ALICE, "h", W, TOPIC)


def test_filters_match_as_describe_and_delete_acls_mean_them() -> None:
    acls = [acl("orders"), acl("*"), acl("ord", pattern=PREFIXED), acl("g", resource_type=GROUP)]
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    assert [a for a in acls if match.matches(a)] == acls[:3]
    assert [a for a in acls if AclBindingFilter().matches(a)] == acls
    literal = AclBindingFilter(TOPIC, "orders", PatternType.LITERAL)
    assert [a for a in acls if literal.matches(a)] == acls[:1]
    by_principal = AclBindingFilter(principal="User:bob")
    assert not [a for a in acls if by_principal.matches(a)]


@pytest.mark.parametrize(
    ("binding", "problem"),
    [
        (acl("t", pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl("t", AclOperation.ANY), "Invalid operation ANY"),
        (acl("t", permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl("t", resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl("other", resource_type=ResourceType.CLUSTER), "kafka-cluster"),
        (acl(""), "Invalid empty resource name"),
        (acl("t", principal="alice"), "Could not parse principal"),
    ],
)
def test_a_new_acl_is_checked_as_kafka_checks_it(binding: AclBinding, problem: str) -> None:
    assert problem in (binding_problem(binding) or "")
    assert binding_problem(acl("t")) is None
