"""``purgatory acls``: add, list and remove ACLs with kafka-acls.sh's options and output
(``--add --allow-principal User:alice --operation Read --topic T``, ``--list``,
``--remove``, ``--producer``/``--consumer`` conveniences, ``--resource-pattern-type``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from typing import Any

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.tools import _run
from purgatory.protocol.acl_messages import (
    Acl,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from purgatory.protocol.errors import KafkaError, error_name

CLUSTER_NAME = "kafka-cluster"
Resource = tuple[int, str, int]  # (resource type, name, pattern type)

# The operations each resource type supports, as kafka-acls checks them (Kafka's
# AclEntry.supportedOperations); ALL is valid everywhere.
SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
}


class AclsUsageError(ValueError):
    """Options that do not make an ACL command (kafka-acls' own messages)."""


def operation(text: str) -> AclOperation:
    """Kafka's CLI names, any case: Read, Write, ClusterAction, IdempotentWrite, All, ..."""
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).upper()
    if name not in AclOperation.__members__ or name in ("UNKNOWN", "ANY"):
        choices = ", ".join(_camel(o.name) for o in AclOperation if o > AclOperation.ANY)
        raise AclsUsageError(f"Invalid operation {text!r}: one of {choices}")
    return AclOperation[name]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not (sep and kind and name):
        raise AclsUsageError(f"principal {text!r} must be type:name, e.g. User:alice")
    return text


def resources(args: argparse.Namespace) -> list[Resource]:
    pattern = args.resource_pattern_type.upper()
    if pattern not in ("LITERAL", "PREFIXED", "ANY", "MATCH"):
        raise AclsUsageError(
            f"--resource-pattern-type {args.resource_pattern_type!r}: literal, prefixed, any "
            "or match"
        )
    if pattern in ("ANY", "MATCH") and args.add:
        raise AclsUsageError(
            f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls."
        )
    code = PatternType[pattern]
    out: list[Resource] = [(ResourceType.TOPIC, t, code) for t in args.topic or ()]
    out += [(ResourceType.GROUP, g, code) for g in args.group or ()]
    out += [(ResourceType.TRANSACTIONAL_ID, t, code) for t in args.transactional_id or ()]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def bindings(args: argparse.Namespace) -> dict[Resource, list[Acl]]:
    """The ACLs --add (or --remove) means, by resource (kafka-acls' AclCommand)."""
    targets = resources(args)
    if not targets:
        raise AclsUsageError(
            "You must specify one of: --topic, --cluster, --group, --transactional-id"
        )
    entries: list[tuple[str, str, int]] = []  # principal, host, permission
    for allowed, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in principals or ():
            for host in hosts or ["*"]:
                entries.append((_principal(principal), host, int(allowed)))
    if not entries:
        raise AclsUsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to "
            "add or remove ACLs."
        )
    operations = [operation(o) for o in args.operation or ()]
    out: dict[Resource, list[Acl]] = defaultdict(list)
    for kind, name, pattern in targets:
        ops = _operations(args, kind, operations)
        for principal, host, permission in entries:
            for op in ops:
                out[(kind, name, pattern)].append(
                    Acl(kind, name, pattern, principal, host, op, permission)
                )
        if args.consumer and kind == ResourceType.TOPIC:
            for group in args.group or ():
                for principal, host, permission in entries:
                    out[(ResourceType.GROUP, group, pattern)].append(
                        Acl(
                            ResourceType.GROUP,
                            group,
                            pattern,
                            principal,
                            host,
                            AclOperation.READ,
                            permission,
                        )
                    )
    return dict(out)


def _operations(
    args: argparse.Namespace, kind: int, asked: list[AclOperation]
) -> list[AclOperation]:
    if args.producer:
        if kind == ResourceType.TOPIC:
            return [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
        if kind == ResourceType.TRANSACTIONAL_ID:
            return [AclOperation.WRITE, AclOperation.DESCRIBE]
        if kind == ResourceType.CLUSTER and args.idempotent:
            return [AclOperation.IDEMPOTENT_WRITE]
        return []
    if args.consumer:
        return [AclOperation.READ, AclOperation.DESCRIBE] if kind == ResourceType.TOPIC else []
    ops = asked or [AclOperation.ALL]
    supported = SUPPORTED[ResourceType(kind)]
    for op in ops:
        if op != AclOperation.ALL and op not in supported:
            allowed = ",".join(sorted(_camel(o.name) for o in supported))
            raise AclsUsageError(
                f"ResourceType {_camel(ResourceType(kind).name)} only supports operations "
                f"{allowed},All"
            )
    return ops


def pattern_text(kind: int, name: str, pattern: int) -> str:
    return (
        f"ResourcePattern(resourceType={ResourceType(kind).name}, name={name}, "
        f"patternType={PatternType(pattern).name})"
    )


def entry_text(acl: Acl) -> str:
    return (
        f"(principal={acl.principal}, host={acl.host}, "
        f"operation={AclOperation(acl.operation).name}, "
        f"permissionType={AclPermissionType(acl.permission_type).name})"
    )


def print_acls(by_resource: dict[Resource, list[Acl]], heading: str) -> None:
    for (kind, name, pattern), acls in sorted(by_resource.items()):
        print(f"{heading} `{pattern_text(kind, name, pattern)}`: ")
        for acl in acls:
            print(f" \t{entry_text(acl)} ")
        print()


def acls_command(args: argparse.Namespace) -> int:
    try:
        if args.add or args.remove:
            wanted = bindings(args)
        else:
            wanted = {}
            targets = resources(args)
    except AclsUsageError as exc:
        print(f"purgatory acls: {exc}", file=sys.stderr)
        return 1
    if args.remove and not args.force and not _confirmed(wanted):
        print("purgatory acls: nothing removed", file=sys.stderr)
        return 1
    if args.list:
        return _run(_list(args, targets), "acls", args.bootstrap)
    return _run(_change(args, wanted), "acls", args.bootstrap)


def _confirmed(wanted: dict[Resource, list[Acl]]) -> bool:
    if not sys.stdin.isatty():
        print(
            "purgatory acls: --remove asks before removing; pass --force to remove without asking",
            file=sys.stderr,
        )
        return False
    for (kind, name, pattern), acls in wanted.items():
        listed = ", ".join(entry_text(a) for a in acls)
        answer = input(
            f"Are you sure you want to remove ACLs: {listed} from resource filter "
            f"`{pattern_text(kind, name, pattern)}`? (y/n) "
        )
        if answer.strip().lower() != "y":
            return False
    return True


async def _change(args: argparse.Namespace, wanted: dict[Resource, list[Acl]]) -> int:
    failed: list[tuple[Acl, Any]]
    async with admin_client(args) as admin:
        if args.add:
            print_acls(wanted, "Adding ACLs for resource")
            acls = [a for group in wanted.values() for a in group]
            results = await admin.create_acls(acls)
            failed = [(a, r) for a, r in zip(acls, results, strict=True) if r.error_code]
        else:
            filters = [a for group in wanted.values() for a in group]
            results_by_filter = await admin.delete_acls(filters)
            failed = [
                (a, r) for a, r in zip(filters, results_by_filter, strict=True) if r.error_code
            ]
        for acl, result in failed:
            print(
                f"Error while executing ACL command: {error_name(result.error_code)}: "
                f"{result.error_message or ''} ({entry_text(acl)})",
                file=sys.stderr,
            )
        if failed:
            return 1
        return await _show(admin, list(wanted))


async def _list(args: argparse.Namespace, targets: list[Resource]) -> int:
    async with admin_client(args) as admin:
        if args.principal:
            _principal(args.principal)
        return await _show(admin, targets, args.principal)


async def _show(admin: AdminClient, targets: list[Resource], principal: str | None = None) -> int:
    """kafka-acls' listing: the current ACLs of each resource asked (every ACL when none
    is), grouped by resource."""
    filters = [Acl(k, n, p, principal, None, 1, 1) for k, n, p in targets] or [
        Acl(ResourceType.ANY, None, PatternType.ANY, principal, None, 1, 1)
    ]
    found: dict[Resource, list[Acl]] = defaultdict(list)
    try:
        for acl_filter in filters:
            for acl in await admin.describe_acls(acl_filter):
                key = (acl.resource_type, acl.resource_name or "", acl.pattern_type)
                if acl not in found[key]:
                    found[key].append(acl)
    except KafkaError as exc:
        print(f"Error while executing ACL command: {exc}", file=sys.stderr)
        return 1
    print_acls(dict(found), "Current ACLs for resource")
    return 0
