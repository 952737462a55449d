"""The Dockerfile and compose file (no Docker engine here: check what can be checked)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from purgatory.broker.config.broker_config import load_config

ROOT = Path(__file__).parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def broker_services() -> dict[str, dict]:
    return {name: s for name, s in COMPOSE["services"].items() if name.startswith("broker-")}


def test_compose_runs_three_brokers_whose_environment_is_a_valid_config() -> None:
    services = broker_services()
    assert len(services) == 3
    configs = [
        load_config(environ={k: str(v) for k, v in s["environment"].items()})
        for s in services.values()
    ]
    assert sorted(c.broker_id for c in configs) == [0, 1, 2]
    members = configs[0].members()
    for config in configs:
        assert config.members() == members
        # Each broker listens on the port its member entry gives the others and clients.
        assert config.listener_config().broker_facing.port == members[config.broker_id][1]
    assert len({c.admin_listener()[1] for c in configs}) == 3
    assert all(
        c["default.replication.factor"] == 3 and c["min.insync.replicas"] == 2 for c in configs
    )
    # One cluster secret for all three, which the user must choose (no default to guess).
    for service in services.values():
        assert service["environment"]["PURGATORY_CLUSTER_SECRET"].startswith(
            "${PURGATORY_CLUSTER_SECRET:?"
        )


def test_a_dead_broker_is_restarted_and_a_stopping_one_has_time_to_hand_over() -> None:
    for service in broker_services().values():
        assert service["restart"] in ("unless-stopped", "always", "on-failure")
        grace = service["stop_grace_period"]
        assert grace.endswith("s") and int(grace[:-1]) >= 20


def test_prometheus_scrapes_every_broker_admin_port() -> None:
    prometheus = COMPOSE["services"]["prometheus"]
    mount = next(v for v in prometheus["volumes"] if "prometheus.yml" in v)
    scrape = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    targets = {
        t for job in scrape["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    }
    ports = {int(t.rsplit(":", 1)[1]) for t in targets}
    admin_ports = {
        load_config(environ={k: str(v) for k, v in s["environment"].items()}).admin_listener()[1]
        for s in broker_services().values()
    }
    assert ports == admin_ports


def test_the_image_runs_a_broker_as_a_non_root_user_with_a_healthcheck() -> None:
    assert re.search(r"^FROM python:3\.11-slim", DOCKERFILE, re.M)
    user = re.search(r"^USER (\S+)", DOCKERFILE, re.M)
    assert user and user.group(1) not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["purgatory", "broker"\]', DOCKERFILE, re.M)
    assert "/healthz" in DOCKERFILE.split("HEALTHCHECK", 1)[1]
    instructions = "\n".join(
        line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")
    )
    env = dict(re.findall(r"(PURGATORY_[A-Z_]+)=(\S+)", instructions))
    config = load_config(environ=env)  # the image's defaults are valid configs
    listener = config.listener_config().broker_facing
    assert (listener.name, listener.host, listener.port) == ("PLAINTEXT", "0.0.0.0", 9092)
    for path in ("protocol/", "broker/", "clients/", "purgatory/"):
        assert f"COPY {path}" in DOCKERFILE
