"""``purgatory consumer-groups``: list, describe, reset and delete consumer groups, with
kafka-consumer-groups.sh's options and columns (and ``--json`` for scripts)."""

from __future__ import annotations

import argparse
from typing import Any

from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.output import err, print_json, print_table, table
from purgatory.clients.cli.tools import _run
from purgatory.protocol import group_messages as g
from purgatory.protocol.consumer_protocol import ConsumerProtocolError, decode_assignment
from purgatory.protocol.errors import ErrorCode, KafkaError, error_name

TopicPartition = tuple[str, int]


def consumer_groups_command(args: argparse.Namespace) -> int:
    actions = [a for a in ("list", "describe", "reset_offsets", "delete") if getattr(args, a)]
    if len(actions) != 1:
        args.command_parser.error("give one of --list, --describe, --reset-offsets, --delete")
    if not args.list and args.group is None:
        args.command_parser.error("--group is needed")
    if args.reset_offsets:
        targets = [args.to_earliest, args.to_latest, args.to_offset is not None]
        targets.append(args.shift_by is not None)
        if sum(targets) != 1:
            args.command_parser.error(
                "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --shift-by"
            )
    work = {
        "list": _list,
        "describe": _describe,
        "reset_offsets": _reset_offsets,
        "delete": _delete,
    }[actions[0]]
    return _run(work(args), "consumer-groups", args.bootstrap)


def print_rows(
    args: argparse.Namespace, rows: list[dict[str, Any]], title: str, empty: str
) -> None:
    """``rows`` as a table (its columns the keys, as Kafka's tools head them: CONSUMER-ID),
    ``empty`` on stderr if there are none, or as JSON with ``--json``."""
    if args.json:
        print_json(rows)
        return
    if not rows:
        err.print(empty)
        return
    columns = [column.upper().replace("_", "-") for column in rows[0]]
    print_table(table(title, columns, [list(row.values()) for row in rows]))


# Group states as kafka-consumer-groups.sh --describe reports them on stderr (the classic
# protocol's, and KIP-848's).
REBALANCING_STATES = frozenset(
    {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}
)


def report_state(group_id: str, state: str, kind: str = "Consumer") -> bool:
    """Say on stderr what kafka-consumer-groups.sh (``kind`` "Share": kafka-share-groups.sh)
    says of a group in this state; False if the group does not exist (Dead)."""
    if state == "Dead":
        err.print(f"[red]Error: {kind} group '{group_id}' does not exist.[/red]")
        return False
    if state == "Empty":
        err.print(f"{kind} group '{group_id}' has no active members.")
    elif state in REBALANCING_STATES:
        err.print(f"[yellow]Warning: {kind} group '{group_id}' is rebalancing.[/yellow]")
    return True


async def _list(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        groups = await admin.list_groups(args.state or None)
    rows = [
        {
            "group": x.group_id,
            "type": x.group_type,
            "state": x.state,
            "protocol_type": x.protocol_type,
        }
        for x in groups
        # Share groups are kafka-share-groups.sh's (purgatory share-groups): Kafka 4.3.1's
        # kafka-consumer-groups.sh lists consumer groups only and refuses --type share.
        if x.group_type != "share" and (not args.type or x.group_type in args.type)
    ]
    if args.json or rows:
        print_rows(args, rows, "consumer groups", "")
    else:
        err.print("no consumer groups")
    return 0


def member_partitions(member: g.DescribedGroupMember) -> dict[str, list[int]]:
    """The partitions a described member holds, by topic (none if its assignment is not
    the consumer protocol's: another protocol type's, or not given yet)."""
    try:
        return decode_assignment(member.assignment).partitions
    except ConsumerProtocolError:
        return {}


def _assigned(group: g.DescribedGroup) -> dict[TopicPartition, g.DescribedGroupMember]:
    """Which member holds each partition (known while the group is Stable)."""
    out: dict[TopicPartition, g.DescribedGroupMember] = {}
    for member in group.members:
        parts = member_partitions(member)
        for topic, indexes in parts.items():
            for index in indexes:
                out[(topic, index)] = member
    return out


async def _describe(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        (group,) = await admin.describe_groups([args.group])
        if group.error_code:
            raise KafkaError(group.error_code, f"group {args.group!r}")
        # A share group is no consumer group to kafka-consumer-groups.sh: it does not exist.
        state = "Dead" if group.group_type == "share" else group.state
        if not report_state(args.group, state):
            if args.json:
                print_json([])
            return 1
        if args.members:
            return _describe_members(args, group)
        owners = _assigned(group)
        committed = await admin.group_offsets(args.group)
        partitions = sorted(set(committed) | set(owners))
        if args.topic:
            partitions = [tp for tp in partitions if tp[0] in args.topic]
        errors: dict[TopicPartition, KafkaError] = {}
        ends = await admin.log_end_offsets(partitions, errors) if partitions else {}
    rows = []
    for tp in partitions:
        offset, metadata = committed.get(tp, (None, None))
        end = ends.get(tp)
        member = owners.get(tp)
        rows.append(
            {
                "group": args.group,
                "topic": tp[0],
                "partition": tp[1],
                "offset": offset,
                "log_end_offset": end,
                "lag": None if offset is None or end is None else max(end - offset, 0),
                "consumer_id": member.member_id if member else None,
                "host": member.client_host if member else None,
                "client_id": member.client_id if member else None,
                "owner": metadata or None,
                "error": error_name(errors[tp].code) if tp in errors else None,
            }
        )
    if errors:
        err.print(
            f"[yellow]{len(errors)} partition(s) unavailable now: "
            + ", ".join(f"{t}-{p}" for t, p in sorted(errors))
            + f" ({next(iter(errors.values()))})[/yellow]",
            soft_wrap=True,
        )
    if not args.json:
        epoch = "group epoch" if group.group_type == "consumer" else "generation"
        err.print(
            f"group {args.group}: {group.group_type}, {group.state}, "
            f"{len(group.members)} member(s), {epoch} {group.generation_id}"
            + (f", assignor {group.protocol}" if group.protocol else "")
        )
    print_rows(
        args,
        rows,
        f"consumer group {args.group}",
        f"group {args.group!r} has no committed offsets and no assigned partitions",
    )
    return 0


def _describe_members(args: argparse.Namespace, group: g.DescribedGroup) -> int:
    rows = []
    for member in group.members:
        parts = member_partitions(member)
        rows.append(
            {
                "group": args.group,
                "consumer_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "host": member.client_host,
                "client_id": member.client_id,
                "partitions": sum(len(v) for v in parts.values()),
                "assignment": ",".join(
                    f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(parts.items())
                ),
            }
        )
    print_rows(
        args,
        rows,
        f"members of {args.group} ({group.state})",
        f"group {args.group!r} has no members",
    )
    return 0


async def _reset_offsets(args: argparse.Namespace) -> int:
    """As kafka-consumer-groups.sh: only for a group without members; a dry run shows the
    new offsets unless ``--execute``."""
    async with admin_client(args) as admin:
        (group,) = await admin.describe_groups([args.group])
        if group.state not in ("Empty", "Dead"):
            raise KafkaError(
                ErrorCode.NON_EMPTY_GROUP,
                f"offsets of group {args.group!r} can only be reset while it has no members; "
                f"it is {group.state}: stop its consumers first",
            )
        topics = args.topic
        if not topics:
            args.command_parser.error("--reset-offsets needs --topic (repeatable)")
        await admin.cluster.ensure_topics(topics, auto_create=False)
        partitions = [
            (t, p.partition_index) for t in topics for p in admin.cluster.partitions_for(t) or []
        ]
        earliest = await admin.offsets_at(partitions, "earliest")
        latest = await admin.offsets_at(partitions, "latest")
        committed = await admin.group_offsets(args.group, partitions)
        targets: dict[TopicPartition, int] = {}
        for tp in partitions:
            if args.to_earliest:
                target = earliest[tp]
            elif args.to_latest:
                target = latest[tp]
            elif args.to_offset is not None:
                target = args.to_offset
            else:
                current = committed[tp][0] if tp in committed else latest[tp]
                target = current + args.shift_by
            targets[tp] = min(max(target, earliest[tp]), latest[tp])  # as Kafka's tool clamps
        errors = await admin.alter_group_offsets(args.group, targets) if args.execute else {}
    failed = {tp: code for tp, code in errors.items() if code}
    rows = [
        {
            "group": args.group,
            "topic": t,
            "partition": p,
            "new_offset": targets[(t, p)],
            "error": error_name(failed[(t, p)]) if (t, p) in failed else None,
        }
        for t, p in partitions
    ]
    print_rows(args, rows, f"offsets of {args.group}", "no partitions")
    if not args.execute and not args.json:
        err.print("dry run: nothing changed (add --execute to commit these offsets)")
    return 1 if failed else 0


async def _delete(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        results = await admin.delete_groups([args.group])
    code = results.get(args.group, ErrorCode.NONE)
    if code:
        raise KafkaError(code, f"group {args.group!r} not deleted")
    err.print(f"deleted group {args.group} and its committed offsets")
    return 0
