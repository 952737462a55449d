"""The Dockerfile, its entrypoint and the compose files, checked without an engine (the
image is built and run with podman in tests/container)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from purgatory.broker.config.broker_config import load_config

ROOT = Path(__file__).parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "deploy/container/entrypoint.sh"
BRIDGE = ROOT / "docker-compose.yml"
HOST_NETWORK = ROOT / "deploy/compose-host-network.yml"
SECRET = {"PURGATORY_CLUSTER_SECRET": "s3cret"}


def interpolate(value: Any, environ: dict[str, str]) -> Any:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}."""
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if environ.get(name):
            return environ[name]
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return arg or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose(path: Path, environ: dict[str, str]) -> dict[str, Any]:
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return interpolate(node, environ)

    return walk(yaml.safe_load(path.read_text()))  # type: ignore[no-any-return]


def brokers(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in spec["services"].items() if name.startswith("broker-")}


def configs(spec: dict[str, Any]) -> list[Any]:
    return [
        load_config(environ={k: str(v) for k, v in s["environment"].items()})
        for s in brokers(spec).values()
    ]


@pytest.mark.parametrize("path", [BRIDGE, HOST_NETWORK], ids=["bridge", "host-network"])
def test_compose_runs_three_brokers_whose_environment_is_a_valid_config(path: Path) -> None:
    spec = compose(path, SECRET)
    cluster = configs(spec)
    assert sorted(c.broker_id for c in cluster) == [0, 1, 2]
    members = cluster[0].members()
    for config in cluster:
        assert config.members() == members
        # Each broker listens on the port its member entry gives the others.
        assert config.listener_config().broker_facing.port == members[config.broker_id][1]
        assert config["default.replication.factor"] == 3 and config["min.insync.replicas"] == 2
    # One cluster secret for all three, which the user must choose (no default to guess).
    with pytest.raises(KeyError, match="PURGATORY_CLUSTER_SECRET"):
        compose(path, {})


def test_on_the_bridge_brokers_meet_on_internal_names_and_clients_on_published_ports() -> None:
    environ = {**SECRET, "BROKER_1_PORT": "29093", "EXTERNAL_HOST": "h.example"}
    spec = compose(BRIDGE, environ)
    for (name, service), config in zip(brokers(spec).items(), configs(spec), strict=True):
        listeners = config.listener_config()
        assert listeners.broker_facing.name == "INTERNAL"
        assert config.members()[config.broker_id] == (name, 19092)
        published = {int(p.split(":")[1]): int(p.split(":")[0]) for p in service["ports"]}
        # EXTERNAL is advertised at the port the host publishes it on.
        assert advertised(config)["EXTERNAL"] == ("h.example", published[9092])
    assert compose(BRIDGE, environ)["services"]["broker-1"]["ports"][0] == "29093:9092"


def test_a_dead_broker_is_restarted_and_a_stopping_one_has_time_to_hand_over() -> None:
    for service in brokers(compose(BRIDGE, SECRET)).values():
        assert service["restart"] in ("unless-stopped", "always", "on-failure")
        grace = service["stop_grace_period"]
        assert grace.endswith("s") and int(grace[:-1]) >= 20


@pytest.mark.parametrize("path", [BRIDGE, HOST_NETWORK], ids=["bridge", "host-network"])
def test_prometheus_scrapes_every_broker_admin_port(path: Path) -> None:
    spec = compose(path, SECRET)
    prometheus = spec["services"]["prometheus"]
    mount = next(v for v in prometheus["volumes"] if "prometheus" in v)
    scrape = yaml.safe_load((path.parent / mount.split(":")[0]).read_text())
    targets = {
        t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    }
    if path == BRIDGE:  # by name on the compose network, at the port inside the container
        expected = {f"{name}:{configs(spec)[0].admin_listener()[1]}" for name in brokers(spec)}
    else:
        expected = {f"127.0.0.1:{c.admin_listener()[1]}" for c in configs(spec)}
    assert targets == expected


def advertised(config: Any) -> dict[str, tuple[str, int]]:
    listeners = config.listener_config()
    bound = {listener.name: listener.port for listener in listeners.listeners}
    return {name: (host, port) for name, host, port in listeners.advertised_endpoints(bound)}


def entrypoint(environ: dict[str, str], *args: str, tmp_path: Path) -> list[str]:
    """The command line the entrypoint would exec, and the configs it would see."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "purgatory").write_text(
        '#!/bin/sh\nenv | grep ^PURGATORY_ | sort\nfor a in "$@"; do echo "arg $a"; done\n'
    )
    (fake / "purgatory").chmod(0o755)
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", **environ},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_entrypoint_gives_a_single_broker_an_external_and_an_internal_listener(
    tmp_path: Path,
) -> None:
    out = entrypoint({}, "--admin-port", "9700", tmp_path=tmp_path)
    assert out[-3:] == ["arg broker", "arg --admin-port", "arg 9700"]
    environ = dict(line.split("=", 1) for line in out if line.startswith("PURGATORY_"))
    config = load_config(environ=environ)  # a valid config
    assert advertised(config) == {"PLAINTEXT": ("127.0.0.1", 9092), "BROKER": ("127.0.0.1", 9093)}
    # The tools inside (podman exec: the image's environment, not the entrypoint's) use BROKER.
    assert (
        "ENV PURGATORY_ADMIN_LISTENER=0.0.0.0:9644 \\\n    PURGATORY_BOOTSTRAP=127.0.0.1:9093"
        in DOCKERFILE
    )
    # Published on another port: the address clients use.
    moved = entrypoint({"PURGATORY_ADVERTISED_ADDRESS": "localhost:19092"}, tmp_path=tmp_path)
    environ = dict(line.split("=", 1) for line in moved if line.startswith("PURGATORY_"))
    assert advertised(load_config(environ=environ))["PLAINTEXT"] == ("localhost", 19092)
    # A user's own listeners are all theirs, as in Apache Kafka's image.
    own = entrypoint({"PURGATORY_LISTENERS": "PLAINTEXT://0.0.0.0:9095"}, tmp_path=tmp_path)
    assert "PURGATORY_LISTENERS=PLAINTEXT://0.0.0.0:9095" in own
    assert not any(line.startswith("PURGATORY_INTER_BROKER_LISTENER_NAME") for line in own)


def test_the_entrypoint_waits_for_its_config_and_takes_it_over_the_environment(
    tmp_path: Path,
) -> None:
    config = tmp_path / "purgatory.properties"
    config.write_text(
        "# told after the port was published\n\nadvertised.listeners=PLAINTEXT://h:41234\n"
    )
    out = entrypoint(
        {"PURGATORY_WAIT_FOR_CONFIG": str(config)}, "--log-level", "debug", tmp_path=tmp_path
    )
    args = [line.removeprefix("arg ") for line in out if line.startswith("arg ")]
    assert args == [
        "broker", "--set", "advertised.listeners=PLAINTEXT://h:41234", "--log-level", "debug",
    ]  # fmt: skip


def test_the_image_runs_a_broker_as_a_non_root_user_with_a_healthcheck() -> None:
    assert re.search(r"^FROM python:3\.11-slim-bookworm", DOCKERFILE, re.M)
    user = re.search(r"^USER (\S+)", DOCKERFILE, re.M)
    assert user and user.group(1) not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["purgatory-entrypoint"\]', DOCKERFILE, re.M)
    assert "COPY deploy/container/entrypoint.sh /usr/local/bin/purgatory-entrypoint" in DOCKERFILE
    assert "purgatory.broker.ops.container_health" in DOCKERFILE.split("HEALTHCHECK", 1)[1]
    for path in ("protocol/", "broker/", "clients/", "purgatory/"):
        assert f"COPY {path}" in DOCKERFILE
