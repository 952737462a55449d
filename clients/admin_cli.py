"""The code behind `purgatory admin ...`: a broker's admin HTTP API from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from rich.console import Console
from rich.table import Table


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def config_command(args: argparse.Namespace) -> int:
    base = args.admin.rstrip("/")
    try:
        if args.config_command == "set":
            status, payload = _call("PUT", f"{base}/v1/config/{args.name}", {"value": args.value})
            if status != 200:
                print(
                    f"purgatory admin config set: {payload.get('error', payload)}", file=sys.stderr
                )
                return 1
            print(f"{payload['name']}: {payload['old']} -> {payload['new']}")
            return 0
        status, payload = _call("GET", f"{base}/v1/config")
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
        print(json.dumps(configs, indent=2))
        return 0
    table = Table(title=f"broker {payload['broker_id']} configs")
    for column in ("name", "value", "default", "source", "dynamic"):
        table.add_column(column)
    for c in configs:
        table.add_row(
            c["name"],
            str(c["value"]),
            str(c["default"]),
            c["source"],
            "yes" if c["dynamic"] else "",
        )
    Console().print(table)
    return 0
