"""What `purgatory cluster` passes to its brokers."""

from __future__ import annotations

import argparse
from pathlib import Path

from purgatory.broker.local_cluster import broker_commands, replication_defaults


def args(
    brokers: int = 3, sets: list[str] | None = None, config: str | None = None
) -> argparse.Namespace:
    return argparse.Namespace(
        brokers=brokers,
        host="127.0.0.1",
        base_port=9092,
        admin_base_port=9644,
        set=sets or [],
        config=config,
        log_format=None,
        log_level=None,
    )


def test_a_local_cluster_is_replicated_by_default() -> None:
    assert replication_defaults(args(3), {}) == [
        "default.replication.factor=3",
        "min.insync.replicas=2",
    ]
    assert replication_defaults(args(2), {}) == ["default.replication.factor=2"]
    assert replication_defaults(args(1), {}) == ["default.replication.factor=1"]


def test_whatever_the_user_set_wins(tmp_path: Path) -> None:
    assert replication_defaults(args(3, ["min.insync.replicas=1"]), {}) == [
        "default.replication.factor=3"
    ]
    assert replication_defaults(args(3), {"PURGATORY_DEFAULT_REPLICATION_FACTOR": "1"}) == [
        "min.insync.replicas=2"
    ]
    config = tmp_path / "b.toml"
    config.write_text('"default.replication.factor" = 2\n"min.insync.replicas" = 1\n')
    assert replication_defaults(args(3, config=str(config)), {}) == []


def test_every_broker_gets_the_same_members_and_settings() -> None:
    commands = broker_commands(args(3, ["num.partitions=4"]), environ={})
    assert len(commands) == 3
    for i, cmd in enumerate(commands):
        assert cmd[cmd.index("--id") + 1] == str(i)
        assert (
            cmd[cmd.index("--cluster") + 1] == "0@127.0.0.1:9092,1@127.0.0.1:9093,2@127.0.0.1:9094"
        )
        settings = [cmd[j + 1] for j, arg in enumerate(cmd) if arg == "--set"]
        # the user's own --set comes last, so it would win over a default
        assert settings == [
            "default.replication.factor=3",
            "min.insync.replicas=2",
            "num.partitions=4",
        ]


def test_log_levels_are_taken_in_any_case() -> None:
    from purgatory.cli import build_parser

    for command in (["broker"], ["cluster"]):
        parsed = build_parser().parse_args([*command, "--log-level", "warning"])
        assert parsed.log_level == "WARNING"
