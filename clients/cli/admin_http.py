"""The code behind `purgatory admin config|fault|broker`: a broker's admin HTTP API, and a
local cluster's control endpoint, from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from purgatory.clients.cli.output import print_json, print_table, table
from purgatory.common.admin_request import admin_request


def config_command(args: argparse.Namespace) -> int:
    base = args.admin.rstrip("/")
    try:
        if args.config_command == "set":
            status, payload = admin_request(
                "PUT", f"{base}/v1/config/{args.name}", {"value": args.value}, token=args.token
            )
            if status != 200:
                print(
                    f"purgatory admin config set: {payload.get('error', payload)}", file=sys.stderr
                )
                return 1
            if args.json:
                print_json({k: payload[k] for k in ("name", "old", "new")})
            else:
                print(f"{payload['name']}: {payload['old']} -> {payload['new']}")
            return 0
        status, payload = admin_request("GET", f"{base}/v1/config", token=args.token)
    except (urllib.error.URLError, OSError) as exc:
        print(f"purgatory admin: cannot reach {base}: {exc}", file=sys.stderr)
        return 1
    configs = payload["configs"]
    if args.name:
        configs = [c for c in configs if c["name"] == args.name]
        if not configs:
            print(f"purgatory admin config get: unknown config {args.name!r}", file=sys.stderr)
            return 1
    if args.json:
        print_json(configs)
        return 0
    rows = [
        (c["name"], c["value"], c["default"], c["source"], "yes" if c["dynamic"] else "")
        for c in configs
    ]
    columns = ("name", "value", "default", "source", "dynamic")
    print_table(table(f"broker {payload['broker_id']} configs", columns, rows))
    return 0


def fault_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON fault spec of `purgatory admin fault add` (the broker validates it)."""
    spec: dict[str, Any] = {"name": args.name, "kind": args.kind}
    for field in ("delay_ms", "jitter_ms", "api", "times", "probability", "duration_ms"):
        value = getattr(args, field)
        if value is not None:
            spec[field] = value
    if args.error_code is not None:
        spec["error_code"] = (
            int(args.error_code) if args.error_code.lstrip("-").isdigit() else args.error_code
        )
    if args.peers:
        spec["peers"] = [int(p) if p.isdigit() else p for p in args.peers]
    return spec


def fault_command(args: argparse.Namespace) -> int:
    base = args.admin.rstrip("/")
    action = args.fault_command
    try:
        if action == "add":
            status, payload = admin_request(
                "POST", f"{base}/v1/faults", fault_spec(args), token=args.token
            )
        elif action in ("rm", "remove"):
            status, payload = admin_request(
                "DELETE", f"{base}/v1/faults/{args.name}", token=args.token
            )
        elif action == "reset":
            status, payload = admin_request("POST", f"{base}/v1/faults/reset", {}, token=args.token)
        else:
            status, payload = admin_request("GET", f"{base}/v1/faults", token=args.token)
    except (urllib.error.URLError, OSError) as exc:
        print(f"purgatory admin: cannot reach {base}: {exc}", file=sys.stderr)
        return 1
    if status >= 400:
        print(f"purgatory admin fault {action}: {payload.get('error', payload)}", file=sys.stderr)
        return 1
    if args.json or action != "list":
        print_json(payload)
        return 0
    rows = [
        (
            f["name"],
            f["kind"],
            json.dumps({k: v for k, v in f.items() if k not in FAULT_FIELDS_SHOWN}),
            f["applied"],
        )
        for f in payload["faults"]
    ]
    columns = ("name", "kind", "settings", "applied")
    print_table(table(f"broker {payload['broker_id']} faults", columns, rows))
    return 0


FAULT_FIELDS_SHOWN = ("name", "kind", "applied", "created_ms")  # not among the settings


def broker_command(args: argparse.Namespace) -> int:
    base = args.control.rstrip("/")
    action = args.action
    if action != "list" and args.id is None:
        print(f"purgatory admin broker {action}: which broker? give its id", file=sys.stderr)
        return 2
    try:
        if action == "list":
            status, payload = admin_request("GET", f"{base}/v1/brokers")
        else:
            # stop may wait out a controlled shutdown, start and restart the broker's health.
            status, payload = admin_request(
                "POST", f"{base}/v1/brokers/{args.id}/{action}", {}, 90, token=args.token
            )
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"purgatory admin broker: cannot reach the cluster's control endpoint {base}: {exc}",
            file=sys.stderr,
        )
        return 1
    if status >= 400:
        print(f"purgatory admin broker {action}: {payload.get('error', payload)}", file=sys.stderr)
        return 1
    brokers = payload["brokers"] if action == "list" else [payload]
    if args.json:
        print_json(payload)
        return 0
    rows = [
        (
            b["broker"],
            b["state"],
            b["pid"] or "",
            "" if b["exit_code"] is None else b["exit_code"],
            b["admin"],
        )
        for b in brokers
    ]
    title = "brokers" if action == "list" else f"broker {args.id}: {action}"
    print_table(table(title, ("broker", "state", "pid", "exit code", "admin"), rows))
    return 0
