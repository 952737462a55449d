"""``purgatory configs``: describe and change topic and broker configs, change group configs
(``--entity-type groups``: KIP-848 and KIP-932's consumer.* and share.*), SCRAM users'
credentials and client quotas (``client_quotas.py``), with kafka-configs' options and
output (and ``--json`` for scripts). Config changes are IncrementalAlterConfigs,
credentials AlterUserScramCredentials (the password salted here, as Kafka's admin client
does), quotas AlterClientQuotas: the active controller checks them and holds them in the
metadata log."""

from __future__ import annotations

import argparse
import re

from purgatory.clients.admin import scram_upsertion
from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.client_quotas import (
    QUOTA_KEYS,
    QuotaOptionError,
    alter_quotas,
    describe_quotas,
    print_quotas,
    quota_changes,
    quota_entity,
)
from purgatory.clients.cli.output import err, print_json
from purgatory.clients.cli.tools import _run
from purgatory.protocol import messages as m
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import ErrorCode, error_name
from purgatory.protocol.scram import (
    DEFAULT_ITERATIONS,
    MECHANISMS_BY_NAME,
    MECHANISMS_BY_TYPE,
    MIN_ITERATIONS,
)

ENTITY_TYPES = {
    "topics": m.TOPIC_RESOURCE,
    "brokers": m.BROKER_RESOURCE,
    "groups": m.GROUP_RESOURCE,
}
USERS = "users"
CLIENTS = "clients"
# kafka-configs' credential value: [iterations=N,]password=P
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)


class ConfigOptionError(ValueError):
    """Options kafka-configs would refuse; the message says which and why."""


def split_configs(text: str) -> list[str]:
    """``a=1,b=[x,y]`` -> ``["a=1", "b=[x,y]"]``: commas inside brackets belong to a LIST
    value, as kafka-configs reads --add-config."""
    items, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


def parse_add_config(text: str) -> dict[str, str]:
    """--add-config's ``k=v[,k=v]`` (a LIST value in brackets: ``k=[a,b]``)."""
    out: dict[str, str] = {}
    for item in split_configs(text):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigOptionError(
                f"--add-config takes name=value pairs separated by commas, got {item!r}"
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[name.strip()] = value
    return out


def _resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resource type, name, what the output calls it); raises ConfigOptionError."""
    if args.entity_type not in ENTITY_TYPES:
        raise ConfigOptionError("--entity-type must be topics, brokers, groups, users or clients")
    kind = ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if args.entity_name is not None:
            raise ConfigOptionError("give one of --entity-name and --entity-default")
        if kind != m.BROKER_RESOURCE:
            raise ConfigOptionError("--entity-default goes with --entity-type brokers")
        return kind, "", "default config for brokers in the cluster"
    if args.entity_name is None:
        raise ConfigOptionError("give --entity-name (or, for brokers, --entity-default)")
    if kind == m.BROKER_RESOURCE and not args.entity_name.isdigit():
        raise ConfigOptionError(f"--entity-name of a broker is its id, got {args.entity_name!r}")
    noun = {m.TOPIC_RESOURCE: "topic", m.GROUP_RESOURCE: "group"}.get(kind, "broker")
    return kind, args.entity_name, f"config for {noun} {args.entity_name}"


def configs_command(args: argparse.Namespace) -> int:
    try:
        if args.describe == args.alter:
            raise ConfigOptionError("give one of --describe and --alter")
        if args.entity_type == USERS:
            return _users_command(args)
        if args.entity_type == CLIENTS:
            return _clients_command(args)
        kind, name, what = _resource(args)
        if args.alter:
            added = parse_add_config(args.add_config or "")
            deleted = split_configs(args.delete_config or "")
            if not added and not deleted:
                raise ConfigOptionError("--alter needs --add-config or --delete-config")
            ops = [m.AlterableConfig(k, m.CONFIG_SET, v) for k, v in added.items()]
            ops += [m.AlterableConfig(k, m.CONFIG_DELETE, None) for k in deleted]
            return _run(_alter(args, m.AlterConfigsResource(kind, name, ops), what), "configs")
        if kind == m.GROUP_RESOURCE:
            raise ConfigOptionError(
                "--describe of groups is not served here yet: use kafka-configs "
                "--entity-type groups --describe (Kafka's DescribeConfigs)"
            )
        if kind != m.TOPIC_RESOURCE:
            raise ConfigOptionError(
                "--describe of brokers is not served here yet: use kafka-configs, or "
                "purgatory admin config (a broker's every config and its source)"
            )
        return _run(_describe(args, name), "configs", args.bootstrap)
    except (ConfigOptionError, QuotaOptionError) as exc:
        err.print(f"[red]purgatory configs: {exc}[/red]", soft_wrap=True)
        return 2


def _clients_command(args: argparse.Namespace) -> int:
    """``--entity-type clients``: client id quotas, as kafka-configs handles them."""
    if args.describe:
        return describe_quotas(args, quota_entity(args, naming=False))
    entity = quota_entity(args, naming=True)
    added = parse_add_config(args.add_config or "")
    deleted = split_configs(args.delete_config or "")
    if not added and not deleted:
        raise ConfigOptionError("--alter needs --add-config or --delete-config")
    return alter_quotas(args, entity, quota_changes(added, deleted))


async def _alter(args: argparse.Namespace, resource: m.AlterConfigsResource, what: str) -> int:
    async with admin_client(args) as admin:
        [result] = await admin.alter_configs([resource])
    if args.json:
        print_json(
            {
                "resource": resource.resource_name,
                "error": error_name(result.error_code) if result.error_code else None,
                "message": result.error_message,
            }
        )
    elif not result.error_code:
        print(f"Completed updating {what}.")
    if result.error_code:
        if not args.json:
            err.print(
                f"[red]purgatory configs: {error_name(result.error_code)}: "
                f"{result.error_message}[/red]",
                soft_wrap=True,
            )
        return 1
    return 0


async def _describe(args: argparse.Namespace, topic: str) -> int:
    """A topic's own configs, as kafka-configs --describe lists its dynamic ones."""
    async with admin_client(args) as admin:
        described = await admin.describe_topics([topic])
    found = next((t for t in described.topics if t.name == topic), None)
    if found is None or found.error_code:
        err.print(f"[red]purgatory configs: topic {topic!r} does not exist[/red]", soft_wrap=True)
        return 1
    configs = dict(sorted(found.configs.items()))
    if args.json:
        print_json({"topic": topic, "configs": configs})
        return 0
    print(f"Dynamic configs for topic {topic} are:")
    for name, value in configs.items():
        print(f"  {name}={value} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:{name}={value}}}")
    return 0


# -- users: SCRAM credentials -----------------------------------------------------------------


def _users_command(args: argparse.Namespace) -> int:
    """``--entity-type users``: SCRAM credentials and quotas, as kafka-configs handles
    them (one kind per command here)."""
    quotas = args.entity_default or args.client is not None or args.client_defaults
    if args.describe:
        if quotas:
            return describe_quotas(args, quota_entity(args, naming=False))
        users = None if args.entity_name is None else [args.entity_name]
        return _run(_describe_users(args, users), "configs", args.bootstrap)
    added = parse_add_config(args.add_config or "")
    deleted = split_configs(args.delete_config or "")
    if not added and not deleted:
        raise ConfigOptionError("--alter needs --add-config or --delete-config")
    if all(k in QUOTA_KEYS for k in [*added, *deleted]):
        return alter_quotas(args, quota_entity(args, naming=True), quota_changes(added, deleted))
    if args.entity_default:
        raise ConfigOptionError(
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server."
        )
    if not args.entity_name:
        raise ConfigOptionError("give --entity-name: the user whose credentials change")
    unknown = [k for k in [*added, *deleted] if k not in MECHANISMS_BY_NAME]
    if unknown:
        raise ConfigOptionError(
            "Give SCRAM credential configs (SCRAM-SHA-256, SCRAM-SHA-512) or quotas "
            f"({', '.join(QUOTA_KEYS)}), in separate commands. Unexpected config names: "
            f"{', '.join(unknown)}"
        )
    user = args.entity_name
    deletions = [sm.ScramCredentialDeletion(user, MECHANISMS_BY_NAME[k].type) for k in deleted]
    upsertions = [
        scram_upsertion(user, mechanism, password, iterations)
        for mechanism, (iterations, password) in (
            (k, _iterations_and_password(k, v)) for k, v in added.items()
        )
    ]
    return _run(_alter_users(args, user, deletions, upsertions), "configs", args.bootstrap)


def _iterations_and_password(mechanism: str, value: str) -> tuple[int, str]:
    """kafka-configs' ``[iterations=N,]password=P`` (N -1 or absent: 4096)."""
    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        raise ConfigOptionError(
            f"Invalid credential property {mechanism}={value}: give "
            f"'{mechanism}=[iterations=8192,password=SECRET]' (iterations optional)"
        )
    iterations_text, password = match.groups()
    iterations = DEFAULT_ITERATIONS
    if iterations_text not in (None, "", "-1"):
        iterations = int(iterations_text)
    elif iterations_text == "":
        raise ConfigOptionError(f"Invalid credential property {mechanism}={value}")
    if iterations < MIN_ITERATIONS:
        raise ConfigOptionError(
            f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
            f"{mechanism}"
        )
    return iterations, password


async def _alter_users(
    args: argparse.Namespace,
    user: str,
    deletions: list[sm.ScramCredentialDeletion],
    upsertions: list[sm.ScramCredentialUpsertion],
) -> int:
    async with admin_client(args) as admin:
        results = await admin.alter_user_scram_credentials(deletions, upsertions)
    failed = [r for r in results if r.error_code]
    if args.json:
        print_json(
            {
                "user": user,
                "error": error_name(failed[0].error_code) if failed else None,
                "message": failed[0].error_message if failed else None,
            }
        )
    elif not failed:
        print(f"Completed updating config for user {user}.")
    for result in failed if not args.json else ():
        err.print(
            f"[red]purgatory configs: {error_name(result.error_code)}: "
            f"{result.error_message}[/red]",
            soft_wrap=True,
        )
    return 1 if failed else 0


async def _describe_users(args: argparse.Namespace, users: list[str] | None) -> int:
    """Each user's quotas then credentials as kafka-configs prints them (a user without
    any: nothing, as kafka-configs prints nothing for it); --json: the credentials."""
    if not args.json:
        await print_quotas(args, {"user": users[0] if users else ""})
    async with admin_client(args) as admin:
        results = await admin.describe_user_scram_credentials(users)
    found = [r for r in results if r.error_code != ErrorCode.RESOURCE_NOT_FOUND]
    if args.json:
        print_json(
            {
                "users": {
                    r.user: {
                        MECHANISMS_BY_TYPE[c.mechanism].name: {"iterations": c.iterations}
                        for c in r.credential_infos
                        if c.mechanism in MECHANISMS_BY_TYPE
                    }
                    for r in found
                    if not r.error_code
                }
            }
        )
        return 1 if any(r.error_code for r in found) else 0
    for r in found:
        if r.error_code:
            print(
                f"Error retrieving SCRAM credential configs for user-principal '{r.user}': "
                f"{error_name(r.error_code)}: {r.error_message}"
            )
            continue
        described = ", ".join(
            f"{MECHANISMS_BY_TYPE[c.mechanism].name}=iterations={c.iterations}"
            for c in r.credential_infos
            if c.mechanism in MECHANISMS_BY_TYPE
        )
        print(f"SCRAM credential configs for user-principal '{r.user}' are {described}")
    return 1 if any(r.error_code for r in found) else 0
