"""``purgatory configs``: describe and change topic and broker configs with kafka-configs'
options and output (and ``--json`` for scripts). Changes are IncrementalAlterConfigs: the
active controller checks them and holds them in the metadata log."""

from __future__ import annotations

import argparse

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.output import err, print_json
from purgatory.clients.cli.tools import _run
from purgatory.protocol import messages as m
from purgatory.protocol.errors import error_name

ENTITY_TYPES = {"topics": m.TOPIC_RESOURCE, "brokers": m.BROKER_RESOURCE}


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
        raise ConfigOptionError("--entity-type must be topics or brokers")
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
    noun = "topic" if kind == m.TOPIC_RESOURCE else "broker"
    return kind, args.entity_name, f"config for {noun} {args.entity_name}"


def configs_command(args: argparse.Namespace) -> int:
    try:
        if args.describe == args.alter:
            raise ConfigOptionError("give one of --describe and --alter")
        kind, name, what = _resource(args)
        if args.alter:
            added = parse_add_config(args.add_config or "")
            deleted = split_configs(args.delete_config or "")
            if not added and not deleted:
                raise ConfigOptionError("--alter needs --add-config or --delete-config")
            ops = [m.AlterableConfig(k, m.CONFIG_SET, v) for k, v in added.items()]
            ops += [m.AlterableConfig(k, m.CONFIG_DELETE, None) for k in deleted]
            return _run(_alter(args, m.AlterConfigsResource(kind, name, ops), what), "configs")
        if kind != m.TOPIC_RESOURCE:
            raise ConfigOptionError(
                "--describe of brokers is not served here yet: use kafka-configs, or "
                "purgatory admin config (a broker's every config and its source)"
            )
        return _run(_describe(args, name), "configs", args.bootstrap)
    except ConfigOptionError as exc:
        err.print(f"[red]purgatory configs: {exc}[/red]", soft_wrap=True)
        return 2


async def _alter(args: argparse.Namespace, resource: m.AlterConfigsResource, what: str) -> int:
    async with AdminClient(args.bootstrap) as admin:
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
    async with AdminClient(args.bootstrap) as admin:
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
