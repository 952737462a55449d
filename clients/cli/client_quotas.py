"""``purgatory configs`` for client quotas, as kafka-configs handles them: ``--entity-type
users`` or ``clients``, ``--entity-name N`` or ``--entity-default`` (``--client C`` or
``--client-defaults`` beside a user: that user's client), ``--alter --add-config
'producer_byte_rate=1048576,consumer_byte_rate=2097152'`` or ``--delete-config K[,K]``
(AlterClientQuotas), ``--describe`` (DescribeClientQuotas, only the entities of exactly
those types: kafka-configs' ``containsOnly`` filter; without a name, every entity of the
type)."""

from __future__ import annotations

import argparse

from purgatory.clients.admin import quota_alteration
from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.output import err, print_json
from purgatory.clients.cli.tools import _run
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.errors import error_name

USER = "user"
CLIENT_ID = "client-id"
# kafka-configs' quota keys of users and clients (DynamicConfig.User and .Client).
QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
_TYPES = {"users": USER, "clients": CLIENT_ID}
_DESCRIBED = {USER: "user-principal", CLIENT_ID: "client-id", "ip": "ip"}


class QuotaOptionError(ValueError):
    """Options kafka-configs would refuse; the message says which and why."""


def quota_entity(args: argparse.Namespace, *, naming: bool) -> dict[str, str | None]:
    """The entity the options name, by type (None: the default entity); with ``naming``
    False (``--describe``) a type without a name stands for every entity of it
    (returned as the empty string)."""
    kind = _TYPES[args.entity_type]
    entity: dict[str, str | None] = {}
    if args.entity_default:
        if args.entity_name is not None:
            raise QuotaOptionError("give one of --entity-name and --entity-default")
        entity[kind] = None
    elif args.entity_name is not None:
        entity[kind] = args.entity_name
    elif naming:
        raise QuotaOptionError("give --entity-name or --entity-default")
    else:
        entity[kind] = ""
    client = getattr(args, "client", None)
    if client is not None or getattr(args, "client_defaults", False):
        if kind != USER:
            raise QuotaOptionError("--client and --client-defaults go with --entity-type users")
        entity[CLIENT_ID] = client
    return entity


def quota_changes(added: dict[str, str], deleted: list[str]) -> dict[str, float | None]:
    """The quotas to set (a number each) and to remove."""
    unknown = [k for k in [*added, *deleted] if k not in QUOTA_KEYS]
    if unknown:
        raise QuotaOptionError(
            f"Invalid config(s): {', '.join(unknown)} (quotas: {', '.join(QUOTA_KEYS)})"
        )
    changes: dict[str, float | None] = {}
    for key, value in added.items():
        try:
            changes[key] = float(value)
        except ValueError:
            raise QuotaOptionError(f"Invalid value {value!r} of {key}: a number") from None
    for key in deleted:
        changes[key] = None
    return changes


def alter_quotas(
    args: argparse.Namespace, entity: dict[str, str | None], changes: dict[str, float | None]
) -> int:
    return _run(_alter(args, entity, changes), "configs", args.bootstrap)


async def _alter(
    args: argparse.Namespace, entity: dict[str, str | None], changes: dict[str, float | None]
) -> int:
    async with admin_client(args) as admin:
        [result] = await admin.alter_client_quotas([quota_alteration(entity, changes)])
    error = error_name(result.error_code) if result.error_code else None
    if args.json:
        print_json({"entity": entity, "error": error, "message": result.error_message})
    elif error is not None:
        err.print(f"[red]purgatory configs: {error}: {result.error_message}[/red]", soft_wrap=True)
    elif args.entity_name is not None:
        print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")
    else:
        print(f"Completed updating default config for {args.entity_type} in the cluster.")
    return 1 if error is not None else 0


def describe_quotas(args: argparse.Namespace, entity: dict[str, str | None]) -> int:
    return _run(_describe(args, entity), "configs", args.bootstrap)


async def _describe(args: argparse.Namespace, entity: dict[str, str | None]) -> int:
    await print_quotas(args, entity)
    return 0


async def print_quotas(args: argparse.Namespace, entity: dict[str, str | None]) -> None:
    """Each matching entity's quotas as kafka-configs prints them: "Quota configs for
    user-principal 'alice', client-id 'c1' are producer_byte_rate=1024.0"."""
    components = [
        qm.ComponentData(kind, qm.MATCH_TYPE_SPECIFIED, None)
        if name == ""
        else qm.ComponentData(kind, qm.MATCH_TYPE_DEFAULT, None)
        if name is None
        else qm.ComponentData(kind, qm.MATCH_TYPE_EXACT, name)
        for kind, name in entity.items()
    ]
    async with admin_client(args) as admin:
        entries = await admin.describe_client_quotas(components, strict=True)
    if args.json:
        print_json(
            {
                "quotas": [
                    {
                        "entity": {c.entity_type: c.entity_name for c in e.entity},
                        "quotas": {v.key: v.value for v in e.values},
                    }
                    for e in entries
                ]
            }
        )
        return
    for e in entries:
        names = {c.entity_type: c.entity_name for c in e.entity}
        described = ", ".join(
            f"{_DESCRIBED[kind]} '{names[kind]}'"
            if names[kind] is not None
            else f"the default {_DESCRIBED[kind]}"
            for kind in (USER, CLIENT_ID, "ip")
            if kind in names
        )
        values = ", ".join(f"{v.key}={java_double(v.value)}" for v in e.values)
        print(f"Quota configs for {described} are {values}")


def java_double(value: float) -> str:
    """As Java's Double.toString (kafka-configs prints quotas so): 1024.0, 1.0E7."""
    if value != 0 and not 1e-3 <= abs(value) < 1e7:
        mantissa, exponent = f"{value:.16e}".split("e")
        digits = mantissa.rstrip("0")
        if digits.endswith("."):
            digits += "0"
        return f"{digits}E{int(exponent)}"
    text = repr(float(value))
    return text if "e" not in text else f"{value:f}".rstrip("0")
