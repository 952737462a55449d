from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from purgatory.broker.config.addresses import parse_members
from purgatory.broker.config.broker_config import (
    BoolConfig,
    FloatConfig,
    IntConfig,
    StrConfig,
    load_config,
    validate_topic_configs,
)
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.definitions import BY_NAME, DEFINITIONS, TOPIC_CONFIGS
from purgatory.broker.config.topic_configs import kafka_value

DOC = (Path(__file__).parents[2] / "docs" / "configs.md").read_text()


def test_defaults_are_kafkas() -> None:
    config = load_config(environ={})
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588


def test_file_then_environment_then_set_each_override_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('"num.partitions" = 2\n[log.retention]\nbytes = 1000\n[broker]\nid = 4\n')
    config = load_config(
        file=path,
        environ={"PURGATORY_NUM_PARTITIONS": "3"},
        overrides={"log.retention.bytes": "2000"},
    )
    assert config["num.partitions"] == 3
    assert config["log.retention.bytes"] == 2000
    assert config.broker_id == 4
    assert config.sources["num.partitions"] == "environment"


def test_an_unknown_name_fails_naming_the_key_and_a_suggestion() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown config 'num.partition' \(from --set\); did you mean 'num.partitions'",
    ):
        load_config(environ={}, overrides={"num.partition": "3"})


def test_an_unknown_environment_variable_is_named() -> None:
    with pytest.raises(ConfigError, match="PURGATORY_NO_SUCH_THING"):
        load_config(environ={"PURGATORY_NO_SUCH_THING": "1"})


def test_the_variables_of_the_tools_and_the_container_are_not_broker_configs() -> None:
    # A broker in a container with the command-line tools, or in a user's shell.
    config = load_config(
        environ={
            "PURGATORY_BOOTSTRAP": "h:9092",
            "PURGATORY_ADMIN": "h:9644",
            "PURGATORY_WAIT_FOR_CONFIG": "/tmp/advertise.toml",
            "PURGATORY_NUM_PARTITIONS": "3",
        }
    )
    assert config["num.partitions"] == 3


@pytest.mark.parametrize(
    ("name", "value", "complaint"),
    [
        ("socket.request.max.bytes", "lots", "expected an integer"),
        ("num.partitions", "0", "must be >= 1"),
        ("auto.create.topics.enable", "maybe", "expected true or false"),
        ("log.format", "xml", "not one of json, console"),
        ("cluster.members", "0@a:1,0@b:2", "appears twice"),
        ("listeners", "nohost", "expected host:port"),
    ],
)
def test_a_bad_value_fails_naming_the_key(name: str, value: str, complaint: str) -> None:
    with pytest.raises(
        ConfigError, match=re.escape(f"config {name!r}") + ".*" + re.escape(complaint)
    ):
        load_config(environ={}, overrides={name: value})


def test_retention_bytes_is_an_alias_of_the_broker_default() -> None:
    assert load_config(environ={}, overrides={"retention.bytes": "10"})["log.retention.bytes"] == 10


def test_topic_configs_are_checked() -> None:
    assert validate_topic_configs({"retention.bytes": "100"}) == {"retention.bytes": 100}
    with pytest.raises(ConfigError, match=r"^Unknown topic config name: retention\.byte$"):
        validate_topic_configs({"retention.byte": "1"})


def test_members_parse_and_reject_nonsense() -> None:
    assert parse_members("0@127.0.0.1:9092, 1@h:9093") == {0: ("127.0.0.1", 9092), 1: ("h", 9093)}
    with pytest.raises(ValueError, match="id@host:port"):
        parse_members("127.0.0.1:9092")


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_every_config_is_documented_with_its_default(definition) -> None:  # type: ignore[no-untyped-def]
    default = (
        str(definition.default).lower()
        if isinstance(definition.default, bool)
        else "(none)"
        if definition.default is None
        else str(definition.default)
    )
    row = re.search(rf"^\|\s*`{re.escape(definition.name)}`\s*\|([^|]*)\|([^|]*)\|", DOC, re.M)
    assert row, f"{definition.name} is not in docs/configs.md"
    assert row.group(2).strip().strip("`") == default, (
        f"{definition.name}: documented default differs"
    )


def test_settings_that_fight_each_other_are_refused_at_start() -> None:
    from purgatory.broker.server import Broker

    for overrides, name in (
        (
            {"replica.fetch.wait.max.ms": "500", "replica.lag.time.max.ms": "400"},
            "replica.fetch.wait.max.ms",
        ),
        (
            {"broker.heartbeat.interval.ms": "1000", "broker.session.timeout.ms": "1000"},
            "broker.heartbeat.interval.ms",
        ),
    ):
        with pytest.raises(ValueError, match=re.escape(name)):
            Broker(load_config(environ={}, overrides=overrides))


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_every_topic_config_is_documented_with_its_type_and_broker_default(name: str) -> None:
    topic_section = DOC[DOC.index("## Topic configs") :]
    row = re.search(rf"^\|\s*`{re.escape(name)}`\s*\|([^|]*)\|([^|]*)\|(.*)$", topic_section, re.M)
    assert row, f"topic config {name} is not in docs/configs.md"
    topic = TOPIC_CONFIGS[name]
    assert row.group(1).strip() == topic.type
    expected = (
        f"`{topic.broker}`"
        if topic.broker is not None
        else f"(none; default `{kafka_value(topic.default)}`)"
    )
    assert row.group(2).strip() == expected
    if topic.effect:  # a config that changes nothing here says so
        assert f"Here: {topic.effect}" in row.group(3)


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_every_topic_config_defaults_from_a_broker_config_that_names_it(name: str) -> None:
    broker = TOPIC_CONFIGS[name].broker
    assert broker is None or BY_NAME[broker].topic_name == name


def test_local_retention_may_not_exceed_the_whole_logs_of_a_tiered_topic() -> None:
    defaults = load_config(environ={}).topic_defaults()
    tiered = {"remote.storage.enable": "true"}
    with pytest.raises(
        ConfigError,
        match=r"^Invalid value 2000 for configuration local\.retention\.bytes: Value must not "
        r"be more than retention\.bytes property value: 1000$",
    ):
        validate_topic_configs(
            {**tiered, "local.retention.bytes": "2000", "retention.bytes": "1000"}, defaults
        )
    with pytest.raises(ConfigError, match=r"Value must not be -1 as retention\.ms value is set"):
        validate_topic_configs({**tiered, "local.retention.ms": "-1"}, defaults)
    # Not tiered: Kafka does not compare them.
    validate_topic_configs({"local.retention.bytes": "2000", "retention.bytes": "1000"}, defaults)
    ok = validate_topic_configs(
        {"remote.log.storage.enable": "true", "local.retention.bytes": "100"}, defaults
    )
    assert ok == {"remote.storage.enable": True, "local.retention.bytes": 100}


def test_a_log_normal_remote_latency_needs_a_p99_above_its_median() -> None:
    from purgatory.broker.server import Broker

    with pytest.raises(ValueError, match=r"remote\.storage\.latency\.p99\.ms"):
        Broker(
            load_config(
                environ={},
                overrides={
                    "remote.storage.latency.distribution": "lognormal",
                    "remote.storage.latency.ms": "50",
                    "remote.storage.latency.p99.ms": "10",
                },
            )
        )


def test_the_typed_names_are_every_config_by_its_type() -> None:
    """``config[name]`` is typed by Literal name lists; they must be DEFINITIONS exactly."""
    typed = {
        int: get_args(IntConfig),
        float: get_args(FloatConfig),
        bool: get_args(BoolConfig),
        str: get_args(StrConfig),
    }
    for kind, names in typed.items():
        assert set(names) == {d.name for d in DEFINITIONS if d.type is kind}, kind
    assert sum(len(names) for names in typed.values()) == len(DEFINITIONS)


def test_mypy_rejects_a_misspelt_or_mistyped_config_read(tmp_path: Path) -> None:
    from mypy import api

    probe = tmp_path / "probe.py"
    probe.write_text(
        "from broker.config.broker_config import load_config\n"
        "config = load_config()\n"
        "port: str = config['queued.max.requests']\n"  # an int, not a str
        "config['queued.max.request']\n"  # misspelt
        "ok: int = config['queued.max.requests']\n"
    )
    out, _, status = api.run([str(probe), "--strict", "--no-incremental", "--cache-dir=/dev/null"])
    assert status == 1, out
    assert 'probe.py:3: error: Incompatible types in assignment (expression has type "int"' in out
    assert "probe.py:4: error: No overload variant" in out
    assert "probe.py:5" not in out


def _listener_scoped(variable: str) -> bool:
    """A listener's own config (PURGATORY_LISTENER_NAME_<LISTENER>_<CONFIG>)."""
    from purgatory.broker.config.definitions import ENV_PREFIX, LISTENER_SCOPED
    from purgatory.broker.config.security_configs import split_listener_config

    name = variable[len(ENV_PREFIX) :].lower().replace("_", ".")
    try:
        split_listener_config(name, LISTENER_SCOPED)
    except ValueError:
        return False
    return name.startswith("listener.name.")


def test_every_purgatory_variable_in_the_repository_is_a_config_or_known_not_to_be() -> None:
    # A broker refuses an unknown PURGATORY_ variable; one that a tool, a test or a container
    # reads must be listed in NOT_CONFIGS, or a broker started beside it would not start.
    from purgatory.broker.config.definitions import BY_NAME, ENV_PREFIX, NOT_CONFIGS

    root = Path(__file__).parents[2]
    configs = {ENV_PREFIX + name.upper().replace(".", "_") for name in BY_NAME}
    strays = set()
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if (
            not path.is_file()
            or parts[0] in (".git", ".venv", "build", "out")
            or (
                "node_modules" in parts
                or path.suffix not in (".py", ".js", ".go", ".sh", ".md", ".yml", "")
            )
        ):
            continue
        for name in re.findall(
            r"\bPURGATORY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")
        ):
            if (
                name not in configs
                and name not in NOT_CONFIGS
                and name != "PURGATORY_NO_SUCH_THING"
                and not _listener_scoped(name)
            ):
                strays.add(f"{name} ({path.relative_to(root)})")
    assert sorted(strays) == []
