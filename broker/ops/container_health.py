"""The container image's HEALTHCHECK: is the broker that runs as this container's first
process healthy? Its admin address is resolved as that broker resolved it, from its own
command line and environment (/proc/1), so flags (`--admin-port 9700`, `--set
admin.listener=...`) and the variables of `docker run -e` are all followed.

    python -m purgatory.broker.ops.container_health      (exit 0: healthy; 1: not)
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from pathlib import Path

from purgatory.broker.config.config_def import ConfigError

WILDCARDS = ("", "0.0.0.0", "::")


def broker_command(proc: Path) -> tuple[list[str], dict[str, str]]:
    """The arguments after `broker` on the process's command line, and its environment."""
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    if "broker" not in argv:
        raise ConfigError(f"process {proc.name} is not `purgatory broker`: {' '.join(argv)}")
    environ = {}
    for entry in (proc / "environ").read_bytes().split(b"\0"):
        name, sep, value = entry.decode(errors="replace").partition("=")
        if sep:
            environ[name] = value
    return argv[argv.index("broker") + 1 :], environ


def admin_url(proc: Path) -> str:
    from purgatory.broker import commands
    from purgatory.broker.main import resolve_config

    args, environ = broker_command(proc)
    parser = argparse.ArgumentParser(prog="purgatory")
    commands.add_commands(parser.add_subparsers())
    config = resolve_config(parser.parse_args(["broker", *args]), environ)
    host, port = config.admin_listener()
    host = "127.0.0.1" if host in WILDCARDS else host
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/healthz"


def main(proc: Path = Path("/proc/1")) -> int:
    try:
        url = admin_url(proc)
    except (OSError, ConfigError) as exc:
        print(f"unhealthy: cannot tell the broker's admin address: {exc}", file=sys.stderr)
        return 1
    except SystemExit:  # its arguments did not parse (argparse said why): 2 is reserved
        return 1
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            print(f"{url}: {response.status}")
            return 0
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {url} answered {exc.code}", file=sys.stderr)
    except OSError as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
