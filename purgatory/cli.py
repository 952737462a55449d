"""`purgatory ...`: one command whose subcommands belong to the packages that implement them.

Each package's `commands` module only declares arguments; the code behind a command is
imported when that command runs, so `purgatory --help` stays fast. Every option's help
shows its default (tests/unit/test_cli_help.py walks the tree to hold them to it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from purgatory import __version__


def build_parser() -> argparse.ArgumentParser:
    from purgatory.broker import commands as broker_commands
    from purgatory.clients.cli import commands as client_commands
    from purgatory.testing import commands as testing_commands

    experiment_commands: ModuleType | None
    try:
        from purgatory.experiments import commands as experiment_commands
    except ModuleNotFoundError:  # a broker-only install (the container image)
        experiment_commands = None

    parser = argparse.ArgumentParser(
        prog="purgatory",
        description="A Kafka-flavoured mock broker with a real request purgatory.",
    )
    parser.add_argument("--version", action="version", version=f"purgatory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker_commands.add_commands(sub)
    client_commands.add_commands(sub)
    client_commands.add_admin_commands(sub)
    testing_commands.add_commands(sub)
    if experiment_commands is not None:
        experiment_commands.add_commands(sub)
    perf = sub.add_parser("perf", help="benchmarks, printing JSON with --json")
    perf_sub = perf.add_subparsers(dest="perf_command", metavar="BENCHMARK", required=True)
    broker_commands.add_perf_commands(perf_sub)
    client_commands.add_perf_commands(perf_sub)
    testing_commands.add_perf_commands(perf_sub)
    _remember_parsers(parser)
    return parser


class HelpFormatter(argparse.HelpFormatter):
    """Ends an option's help with its default, as ``(default: VALUE)``, unless the help
    says it already (a default that depends on something, such as a broker config or an
    environment variable, is written out where the option is declared)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is None or text == argparse.SUPPRESS or "default" in text.lower():
            return text
        if action.default in (None, False, [], argparse.SUPPRESS):
            return text
        if not action.option_strings and action.nargs not in ("?", "*"):
            return text  # a required positional argument has no default to show
        return f"{text} (default: %(default)s)"


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command's namespace its own parser as ``command_parser``, so errors
    found after parsing show that command's usage, not the top-level one; and every
    parser the help formatter that shows defaults."""
    parser.set_defaults(command_parser=parser)
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _remember_parsers(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `purgatory consume ... | head`: the reader left. Point stdout at /dev/null so the
        # interpreter's final flush does not fail again, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
