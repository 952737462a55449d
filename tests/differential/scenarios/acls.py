"""Scenarios of CreateAcls (30), DescribeAcls (29) and DeleteAcls (31): on the secured
pair (the StandardAuthorizer) valid bindings of each resource and pattern type, each
binding Kafka refuses (with its message), DescribeAcls' grouping by resource and its
MATCH filter (literal, prefixed and wildcard bindings that apply to a name), DeleteAcls'
filters and what they match, and CLUSTER_AUTHORIZATION_FAILED for a user who is no super
user; on the plain pair (no authorizer) SECURITY_DISABLED.

Every binding names this scenario's own principal (``User:<scenario>``), so filters by
principal see only the scenario's bindings. Kafka lists resources, and a DeleteAcls
filter's matches, in hash order: they are compared sorted."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import scenario, secured_scenario
from tests.differential.scenarios.security import login
from tests.differential.scenarios.user_scram_credentials import with_messages

# Kafka's enums (org.apache.kafka.common.resource / acl).
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
MATCH, LITERAL, PREFIXED = 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 2, 3, 4, 5, 6, 7, 8, 9
IDEMPOTENT_WRITE = 12
DENY, ALLOW = 2, 3

VERSION = 3


def binding(
    principal: str,
    resource_type: int = TOPIC,
    name: str = "t",
    pattern: int = LITERAL,
    operation: int = READ,
    permission: int = ALLOW,
    host: str = "*",
) -> dict[str, Any]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


def acl_filter(
    principal: str | None,
    resource_type: int = ANY,
    name: str | None = None,
    pattern: int = ANY,
    operation: int = ANY,
    permission: int = ANY,
    host: str | None = None,
) -> dict[str, Any]:
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": operation,
        "permission_type": permission,
    }


def _sorted_view(response: Any) -> Any:
    """DescribeAcls or DeleteAcls as plain data, hash-ordered lists sorted."""
    plain = with_messages(response)
    for resource in plain.get("resources", []):
        resource["acls"] = sorted(resource["acls"], key=repr)
    if "resources" in plain:
        plain["resources"] = sorted(plain["resources"], key=repr)
    for result in plain.get("filter_results", []):
        result["matching_acls"] = sorted(result["matching_acls"], key=repr)
    return plain


async def create_acls(c: Client, label: str, *bindings: dict[str, Any]) -> Any:
    return await c.call(
        label, ApiKey.CREATE_ACLS, VERSION, view=with_messages, creations=list(bindings)
    )


async def describe_acls(c: Client, label: str, **filter_values: Any) -> Any:
    return await c.call(
        label, ApiKey.DESCRIBE_ACLS, VERSION, view=_sorted_view, **acl_filter(**filter_values)
    )


async def delete_acls(c: Client, label: str, *filters: dict[str, Any]) -> Any:
    return await c.call(
        label, ApiKey.DELETE_ACLS, VERSION, view=_sorted_view, filters=list(filters)
    )


async def settled(c: Client, principal: str, count: int) -> None:
    """Wait (unrecorded) until the broker describes ``count`` bindings of ``principal``:
    Kafka's brokers answer from their metadata image, which follows the controller's
    commit (that CreateAcls and DeleteAcls waited for) a moment later."""
    await c.until(
        ApiKey.DESCRIBE_ACLS,
        VERSION,
        lambda r: sum(len(resource.acls) for resource in r.resources) == count,
        **acl_filter(principal),
    )


def created(*responses: Any) -> int:
    """How many bindings CreateAcls answers created (a closed connection's: none)."""
    return sum(
        1
        for r in responses
        if r is not None
        for result in r.results
        if result.error_code.value == 0
    )


@secured_scenario
async def acls_created_described_deleted(c: Client) -> None:
    me = f"User:{c.prefix}"
    topic = c.topic()
    await create_acls(
        c,
        "create",
        binding(me, TOPIC, topic, LITERAL, READ),
        binding(me, TOPIC, topic, LITERAL, WRITE, DENY, host="10.0.0.1"),
        binding(me, TOPIC, c.prefix, PREFIXED, DESCRIBE),
        binding(me, TOPIC, "*", LITERAL, DESCRIBE),
        binding(me, GROUP, c.topic("group"), LITERAL, READ),
        binding(me, CLUSTER, "kafka-cluster", LITERAL, IDEMPOTENT_WRITE),
        binding(me, TRANSACTIONAL_ID, c.prefix, PREFIXED, WRITE),
        binding(me, TOPIC, topic, LITERAL, ALL),
    )
    await create_acls(c, "create_again", binding(me, TOPIC, topic, LITERAL, READ))
    await settled(c, me, 8)
    await describe_acls(c, "describe_mine", principal=me)
    await describe_acls(c, "describe_topic_literal", principal=me, resource_type=TOPIC, name=topic)
    await describe_acls(
        c, "describe_topic_match", principal=me, resource_type=TOPIC, name=topic, pattern=MATCH
    )
    await describe_acls(c, "describe_prefixed", principal=me, resource_type=ANY, pattern=PREFIXED)
    await describe_acls(c, "describe_deny_on_host", principal=me, permission=DENY, host="10.0.0.1")
    await describe_acls(c, "describe_read", principal=me, operation=READ)
    await describe_acls(c, "describe_cluster", principal=me, resource_type=CLUSTER)
    await describe_acls(c, "describe_nothing", principal=me, resource_type=USER)
    await delete_acls(
        c,
        "delete",
        acl_filter(me, TOPIC, topic, LITERAL, READ, ALLOW),
        acl_filter(me, TOPIC, topic, MATCH),
        acl_filter(me, GROUP),
        acl_filter(me, USER),
    )
    await settled(c, me, 2)  # the cluster's and the transactional ids' bindings
    await describe_acls(c, "describe_after_delete", principal=me)
    await delete_acls(c, "delete_rest", acl_filter(me))
    await settled(c, me, 0)
    await describe_acls(c, "describe_after_deleting_all", principal=me)


@secured_scenario
async def acls_refused(c: Client) -> None:
    me = f"User:{c.prefix}"
    refused = {
        "unknown_resource_type": binding(me, UNKNOWN),
        "any_resource_type": binding(me, ANY),
        "delegation_token": binding(me, DELEGATION_TOKEN, "token"),
        "user_resource": binding(me, USER, "bob", operation=DESCRIBE),
        "unknown_pattern": binding(me, pattern=UNKNOWN),
        "any_pattern": binding(me, pattern=ANY),
        "match_pattern": binding(me, pattern=MATCH),
        "unknown_operation": binding(me, operation=UNKNOWN),
        "any_operation": binding(me, operation=ANY),
        "unknown_permission": binding(me, permission=UNKNOWN),
        "any_permission": binding(me, permission=ANY),
        "no_principal_type": binding(c.prefix),
        "empty_principal": binding(""),
        "empty_host": binding(me, host=""),
        "empty_name": binding(me, name=""),
        "cluster_named_otherwise": binding(me, CLUSTER, "my-cluster", operation=ALTER),
        "prefixed_wildcard": binding(me, name="*", pattern=PREFIXED),
        "operation_not_for_topic": binding(me, operation=CLUSTER_ACTION),
        "operation_not_for_group": binding(me, GROUP, "g", operation=WRITE),
        "bad_host": binding(me, host="not an address"),
    }
    answers = []
    for label, refusal in refused.items():  # each on a connection of its own: Kafka
        answers.append(await create_acls(await c.connect(), label, refusal))  # closes some
    await settled(c, me, created(*answers))
    await describe_acls(c, "described", principal=me)
    # A good binding beside a refused one (another principal: not in the filters above).
    await create_acls(
        c, "any_beside_a_good_binding", binding(f"{me}-mixed", name=c.topic()), binding(me, ANY)
    )
    for label, values in {
        "describe_unknown_type": {"resource_type": UNKNOWN},
        "describe_unknown_pattern": {"pattern": UNKNOWN},
        "describe_unknown_operation": {"operation": UNKNOWN},
        "describe_unknown_permission": {"permission": UNKNOWN},
        "describe_bad_principal": {"principal": "no-type"},
        "describe_bad_host": {"host": "not an address"},
    }.items():
        await describe_acls(await c.connect(), label, **{"principal": me, **values})
    for label, refused_filter in {
        "delete_unknown_type": acl_filter(me, UNKNOWN),
        "delete_unknown_pattern": acl_filter(me, pattern=UNKNOWN),
        "delete_unknown_permission": acl_filter(me, permission=UNKNOWN),
        "delete_bad_principal": acl_filter("no-type"),
    }.items():
        await delete_acls(await c.connect(), label, refused_filter)
    await delete_acls(c, "delete_mine", acl_filter(me), acl_filter(f"{me}-mixed"))


@secured_scenario
async def acls_need_cluster_permissions(c: Client) -> None:
    me = f"User:{c.prefix}"
    alice = await login(c, "alice")
    await create_acls(alice, "create_as_alice", binding(me, name=c.topic()))
    await describe_acls(alice, "describe_as_alice", principal=me)
    await delete_acls(alice, "delete_as_alice", acl_filter(me))
    admin = await login(c, "admin")
    await create_acls(admin, "create_as_admin", binding(me, name=c.topic()))
    await delete_acls(admin, "delete_as_admin", acl_filter(me))


@scenario
async def acls_without_an_authorizer(c: Client) -> None:
    me = f"User:{c.prefix}"
    await create_acls(c, "create", binding(me, name=c.topic()))
    await describe_acls(c, "describe", principal=me)
    await delete_acls(c, "delete", acl_filter(me))
