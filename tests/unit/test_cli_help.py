"""The `purgatory` command's declarations: every option explains itself and shows its
default, addresses come from the environment unless a flag is given, and the pieces the
console tools share (producer configs, record lines, tables in a pipe, signals) behave as
Kafka's console tools do."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterator

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.config.definitions import NOT_CONFIGS
from purgatory.cli import HelpFormatter, build_parser
from purgatory.clients.cli.commands import (
    ADMIN_ENV,
    BOOTSTRAP_ENV,
    CONTROL_ENV,
    DEFAULT_BOOTSTRAP,
)
from purgatory.clients.cli.console_producer import producer_settings
from purgatory.clients.cli.consumer_groups import report_state
from purgatory.clients.cli.interrupts import Interrupts
from purgatory.clients.cli.output import print_table, table
from purgatory.clients.cli.tools import record_line


def options(
    parser: argparse.ArgumentParser, path: str = "purgatory"
) -> Iterator[tuple[str, argparse.Action]]:
    """(command path, action) for every argument of every (sub)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in {id(p): (n, p) for n, p in action.choices.items()}.values():
                yield from options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield path, action


def named(path: str, action: argparse.Action) -> str:
    return f"{path} {action.option_strings[0] if action.option_strings else action.dest}"


def test_every_option_has_help_and_every_default_is_shown() -> None:
    parser = build_parser()
    without_help: list[str] = []
    default_unshown = []
    for path, action in options(parser):
        if action.help == argparse.SUPPRESS:
            continue  # an alias shown elsewhere (e.g. --topic beside TOPIC)
        if not action.help:
            without_help.append(named(path, action))
            continue
        shown = HelpFormatter(path)._get_help_string(action) or ""
        trivial = action.default in (None, False, [])
        if not trivial and "default" not in shown.lower():
            default_unshown.append(named(path, action))
    assert without_help == []
    assert default_unshown == []


def test_help_names_the_defaults_newcomers_asked_about() -> None:
    def help_of(*argv: str) -> str:
        parser = build_parser()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices[argv[0]]
                break
        for name in argv[1:]:
            sub = next(
                a for a in sub._actions if isinstance(a, argparse._SubParsersAction)
            ).choices[name]
        return " ".join(sub.format_help().split())

    assert "(default: 9092)" in help_of("cluster")  # --base-port, declared without it
    produce = help_of("produce")
    assert "--request-required-acks" in produce and "default: -1" in produce
    assert "--from-beginning" in help_of("consume") and "earliest offset" in help_of("consume")
    assert "--shift-by N with --reset-offsets" in help_of("consumer-groups")


def test_addresses_come_from_the_environment_and_a_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PURGATORY_BOOTSTRAP", "10.0.0.1:9092")
    monkeypatch.setenv("PURGATORY_ADMIN", "http://10.0.0.1:9644")
    monkeypatch.setenv("PURGATORY_CONTROL", "http://10.0.0.1:9640")
    parser = build_parser()
    assert parser.parse_args(["topics", "list"]).bootstrap == "10.0.0.1:9092"
    assert parser.parse_args(["perf", "consume"]).bootstrap == "10.0.0.1:9092"
    flag = parser.parse_args(["consume", "t", "--bootstrap-server", "10.0.0.2:9092"])
    assert flag.bootstrap == "10.0.0.2:9092"
    assert parser.parse_args(["admin", "config", "get"]).admin == "http://10.0.0.1:9644"
    assert parser.parse_args(["admin", "fault", "list"]).admin == "http://10.0.0.1:9644"
    assert parser.parse_args(["admin", "broker", "list"]).control == "http://10.0.0.1:9640"
    monkeypatch.setenv("PURGATORY_BOOTSTRAP", "")  # set but empty: as if unset
    assert build_parser().parse_args(["topics", "list"]).bootstrap == DEFAULT_BOOTSTRAP


def test_the_tools_variables_are_not_broker_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers read PURGATORY_* variables as configs: one started in a shell that exports
    the tools' addresses must not refuse to start over them."""
    for variable in (BOOTSTRAP_ENV, ADMIN_ENV, CONTROL_ENV):
        assert variable in NOT_CONFIGS
        monkeypatch.setenv(variable, "127.0.0.1:1")
    load_config()


def settings_of(*argv: str) -> dict[str, object]:
    return producer_settings(build_parser().parse_args(["produce", "t", *argv]))


def test_producer_configs_flag_over_property_over_default() -> None:
    default = settings_of()
    assert (default["acks"], default["linger_ms"], default["max_request_size"]) == (
        "-1",
        5,
        1048576,
    )
    assert default["delivery_timeout_ms"] == default["max_block_ms"] == 30000
    prop = settings_of("--producer-property", "acks=1", "--producer-property", "batch.size=64")
    assert (prop["acks"], prop["batch_size"]) == ("1", 64)
    both = settings_of("--acks", "0", "--producer-property", "acks=1")
    assert both["acks"] == "0"  # the flag wins, as in kafka-console-producer
    timeout = settings_of("--producer-property", "delivery.timeout.ms=5000")
    assert timeout["delivery_timeout_ms"] == timeout["max_block_ms"] == 5000


@pytest.mark.parametrize(
    ("pair", "problem"),
    [
        ("acks", "expects NAME=VALUE"),
        ("compression.codec=gzip", "'compression.codec' is not a producer config this tool sets"),
        ("linger.ms=soon", "linger.ms: 'soon' is not a number"),
        ("enable.idempotence=yes", "'yes' is not true or false"),
    ],
)
def test_a_bad_producer_property_is_named(pair: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        settings_of("--producer-property", pair)


def test_a_missing_key_or_value_prints_null() -> None:
    assert record_line(None, b"v", b"", print_key=True) == b"null\tv\n"
    assert record_line(b"k", None, b"0:7\t", print_key=True) == b"0:7\tk\tnull\n"
    assert record_line(b"", b"", b"", print_key=True) == b"\t\n"  # empty is not null
    assert record_line(None, b"v", b"", print_key=False) == b"v\n"


def test_a_table_in_a_pipe_is_never_cut_or_folded(capsys: pytest.CaptureFixture[str]) -> None:
    name = "remote.storage.latency.distribution." + "x" * 70
    rows = [(name, "[remote] " + "v" * 90, "DYNAMIC_BROKER_CONFIG"), ("short", None, "[b]")]
    print_table(table("broker 0 configs", ("name", "value", "source"), rows))
    out = capsys.readouterr().out
    assert name in out and "[remote] " + "v" * 90 in out and "[b]" in out
    assert "…" not in out
    body = [line for line in out.splitlines() if name in line]
    assert len(body) == 1  # one line per row: nothing wrapped


@pytest.mark.parametrize(
    ("state", "said", "exists"),
    [
        ("PreparingRebalance", "Warning: Consumer group 'g' is rebalancing.", True),
        ("CompletingRebalance", "Warning: Consumer group 'g' is rebalancing.", True),
        ("Empty", "Consumer group 'g' has no active members.", True),
        ("Dead", "Error: Consumer group 'g' does not exist.", False),
        ("Stable", "", True),
    ],
)
def test_group_states_are_reported_as_kafka_consumer_groups_does(
    capsys: pytest.CaptureFixture[str], state: str, said: str, exists: bool
) -> None:
    assert report_state("g", state) is exists
    assert capsys.readouterr().err.strip() == said


def test_one_signal_is_counted_once_and_the_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    heard: list[tuple[str, int]] = []
    with Interrupts(lambda name, count: heard.append((name, count))) as interrupts:
        os.kill(os.getpid(), signal.SIGINT)  # handled before kill returns, in this thread
        assert (interrupts.count, heard) == (1, [("SIGINT", 1)])
        os.kill(os.getpid(), signal.SIGTERM)
        assert (interrupts.count, heard[-1]) == (2, ("SIGTERM", 2))
    assert signal.getsignal(signal.SIGINT) is before
