"""``purgatory share-groups``: list, describe and delete KIP-932 share groups, with
kafka-share-groups.sh's options, columns and messages (and ``--json`` for scripts).

A share group has no committed offsets: Kafka's default ``--describe`` (each partition's
share-partition start offset) reads the share coordinator's state, which Purgatory does not
keep, so ``--describe`` shows the members and what each is assigned, as ``--members``."""

from __future__ import annotations

import argparse
from typing import Any

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.consumer_groups import member_partitions, print_rows, report_state
from purgatory.clients.cli.output import err, print_json, print_table, table
from purgatory.clients.cli.tools import _run
from purgatory.protocol import group_messages as g
from purgatory.protocol.errors import ErrorCode, KafkaError, error_name

SHARE = "share"

# kafka-share-groups.sh's --list --state values (a share group is never rebalancing).
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")


class NotAShareGroup(Exception):
    """The group exists with another type (classic or consumer): not this tool's."""


def share_groups_command(args: argparse.Namespace) -> int:
    actions = [a for a in ("list", "describe", "delete") if getattr(args, a)]
    if len(actions) != 1:
        args.command_parser.error("give one of --list, --describe, --delete")
    if not args.list and args.group is None:
        args.command_parser.error("--group is needed")
    if args.list and args.members:
        args.command_parser.error("--members goes with --describe")
    if not args.list and any(args.state or ()):
        args.command_parser.error("--state takes states only with --list")
    work = {"list": _list, "describe": _describe, "delete": _delete}[actions[0]]
    return _run(work(args), "share-groups", args.bootstrap)


def _states(args: argparse.Namespace) -> list[str]:
    """``--state stable,empty`` (repeatable) as the states' names, checked."""
    by_lower = {s.lower(): s for s in SHARE_GROUP_STATES}
    states = []
    for value in args.state or []:
        for name in filter(None, (v.strip() for v in value.split(","))):
            if name.lower() not in by_lower:
                args.command_parser.error(
                    f"--state {name!r}: a share group is {', '.join(SHARE_GROUP_STATES)}"
                )
            states.append(by_lower[name.lower()])
    return states


async def _list(args: argparse.Namespace) -> int:
    """Every share group (``--state``: with its state; ``--state S``: only those in S)."""
    states = _states(args)
    async with admin_client(args) as admin:
        groups = await admin.list_groups(states or None)
    shares = [x for x in groups if x.group_type == SHARE]
    if args.json:
        print_json([{"group": x.group_id, "state": x.state} for x in shares])
    elif args.state is None:  # as Kafka's tool: the names alone, one a line
        for x in shares:
            print(x.group_id)
        if not shares:
            err.print("no share groups")
    else:
        rows = [{"group": x.group_id, "state": x.state} for x in shares]
        print_rows(args, rows, "share groups", "no share groups")
    return 0


async def _described_share_group(admin: AdminClient, group_id: str) -> g.DescribedGroup:
    """The group as its coordinator describes it; NotAShareGroup if it is another kind (a
    group that does not exist is described Dead)."""
    (group,) = await admin.describe_groups([group_id])
    if group.error_code and group.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        raise KafkaError(group.error_code, f"group {group_id!r}")
    if group.error_code or group.state == "Dead":
        return g.DescribedGroup(ErrorCode.NONE, group_id, "Dead", "", "", [], -1, SHARE)
    if group.group_type != SHARE:
        raise NotAShareGroup(group_id)
    return group


def _not_a_share_group(args: argparse.Namespace) -> int:
    err.print(f"[red]Error: Group '{args.group}' is not a share group.[/red]")
    if args.json:
        print_json([])
    return 1


async def _describe(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        try:
            group = await _described_share_group(admin, args.group)
        except NotAShareGroup:
            return _not_a_share_group(args)
        coordinator = await admin.find_coordinator(args.group) if group.state != "Dead" else -1
        address = admin.cluster.brokers.get(coordinator)
    if not report_state(args.group, group.state, "Share"):
        if args.json:
            print_json([])
        return 1
    if args.state is not None:
        _print_state(args, group, coordinator, address)
        return 0
    rows = [_member_row(args.group, member) for member in group.members]
    if not args.members and not args.json:
        err.print(
            f"share group {args.group}: {group.state}, {len(group.members)} member(s), "
            f"group epoch {group.generation_id}, assignor {group.protocol} "
            "(no start offsets: Purgatory keeps no share-group state to describe)"
        )
    if rows or args.json:
        print_rows(args, rows, f"members of share group {args.group}", "")
    return 0


def _print_state(
    args: argparse.Namespace,
    group: g.DescribedGroup,
    coordinator: int,
    address: tuple[str, int] | None,
) -> None:
    """kafka-share-groups.sh --describe --state: the group's coordinator, state and member
    count (``--verbose``: and its group epoch)."""
    host = f"{address[0]}:{address[1]}" if address else "?"
    if args.json:
        print_json(
            {
                "group": args.group,
                "coordinator": coordinator,
                "coordinator_host": host,
                "state": group.state,
                "group_epoch": group.generation_id,
                "members": len(group.members),
            }
        )
        return
    columns = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row: list[object] = [args.group, f"{host} ({coordinator})", group.state]
    if args.verbose:
        columns.append("GROUP-EPOCH")
        row.append(group.generation_id)
    columns.append("#MEMBERS")
    row.append(len(group.members))
    print_table(table(f"share group {args.group}", columns, [row]))


def _member_row(group_id: str, member: g.DescribedGroupMember) -> dict[str, Any]:
    """One member as kafka-share-groups.sh --describe --members prints it."""
    parts = member_partitions(member)
    return {
        "group": group_id,
        "consumer_id": member.member_id,
        "host": member.client_host,
        "client_id": member.client_id,
        "#partitions": sum(len(indexes) for indexes in parts.values()),
        # Kafka's: topic:0,1,2 with ';' between topics.
        "assignment": ";".join(
            f"{topic}:{','.join(map(str, sorted(indexes)))}"
            for topic, indexes in sorted(parts.items())
        ),
    }


async def _delete(args: argparse.Namespace) -> int:
    """Delete an empty share group, refusing a group of another kind as Kafka's tool does
    (it is not a share group) so that this never deletes a consumer group."""
    async with admin_client(args) as admin:
        try:
            group = await _described_share_group(admin, args.group)
        except NotAShareGroup:
            return _not_a_share_group(args)
        if group.state == "Dead":
            report_state(args.group, group.state, "Share")
            return 1
        code = (await admin.delete_groups([args.group])).get(args.group, ErrorCode.NONE)
    if code == ErrorCode.NON_EMPTY_GROUP:
        err.print(
            f"[red]Error: Deletion of some share groups failed:\n* Group '{args.group}' could "
            f"not be deleted due to: Share group '{args.group}' is not EMPTY "
            f"({len(group.members)} member(s)): stop its consumers first.[/red]",
            soft_wrap=True,
        )
        return 1
    if code:
        raise KafkaError(code, f"share group {args.group!r} not deleted ({error_name(code)})")
    print(f"Deletion of requested share groups ('{args.group}') was successful.")
    return 0
