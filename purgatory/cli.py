"""`purgatory ...`: one command whose subcommands belong to the packages that implement them.

Each package's `commands` module only declares arguments; the code behind a command is
imported when that command runs, so `purgatory --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from purgatory import __version__


def build_parser() -> argparse.ArgumentParser:
    from broker import commands as broker_commands
    from clients import commands as client_commands
    from experiments import commands as experiment_commands

    parser = argparse.ArgumentParser(
        prog="purgatory",
        description="A Kafka-flavoured mock broker with a real request purgatory.",
    )
    parser.add_argument("--version", action="version", version=f"purgatory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker_commands.add_commands(sub)
    client_commands.add_commands(sub)
    client_commands.add_admin_commands(sub)
    experiment_commands.add_commands(sub)
    perf = sub.add_parser("perf", help="benchmarks, printing JSON with --json")
    perf_sub = perf.add_subparsers(dest="perf_command", metavar="BENCHMARK", required=True)
    broker_commands.add_perf_commands(perf_sub)
    client_commands.add_perf_commands(perf_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
