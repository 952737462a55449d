"""docker-compose.yml brought up with podman-compose, as a user runs it: three brokers on
a bridge network meeting on INTERNAL names, clients on the host on EXTERNAL published
ports, Prometheus scraping every broker by name, a broker stopped by SIGTERM."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from purgatory.experiments.processes import free_ports
from tests.container.engine import ROOT, Podman, until

pytestmark = pytest.mark.cluster
QUIET = {"log_level": 3, "logger": lambda *_: None}  # librdkafka: no retry chatter on stderr
PROMETHEUS_IMAGE = "localhost/prometheus:debian"


@dataclass
class Stack:
    podman: Podman
    project: str
    env: dict[str, str]
    ports: list[int]  # EXTERNAL, published, broker i
    prometheus: int

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{port}" for port in self.ports)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman-compose", "-p", self.project, "-f", str(ROOT / "docker-compose.yml"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=ROOT,
        )

    def prometheus_api(self, path: str, **query: str) -> dict:
        url = f"http://127.0.0.1:{self.prometheus}/api/v1/{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def stack(podman: Podman, image: str) -> Iterator[Stack]:
    if shutil.which("podman-compose") is None:
        pytest.skip("podman-compose is not installed (make system-packages installs it)")
    podman.run(
        "build", "--network", "host", "-f", "deploy/container/prometheus.Containerfile",
        "-t", PROMETHEUS_IMAGE, "deploy/container", cwd=ROOT, timeout=600,
    )  # fmt: skip
    ports = free_ports(7)
    stack = Stack(
        podman=podman,
        project=f"purgatory-test-{secrets.token_hex(3)}",
        env={
            **podman.env,
            "BROKER_IMAGE": image,
            "PROMETHEUS_IMAGE": PROMETHEUS_IMAGE,
            "PURGATORY_CLUSTER_SECRET": secrets.token_hex(16),
            "PURGATORY_ADMIN_TOKEN": secrets.token_hex(16),
            **{f"BROKER_{i}_PORT": str(ports[i]) for i in range(3)},
            **{f"BROKER_{i}_ADMIN_PORT": str(ports[3 + i]) for i in range(3)},
            "PROMETHEUS_PORT": str(ports[6]),
        },
        ports=ports[:3],
        prometheus=ports[6],
    )
    try:
        up = stack.compose("up", "-d", "--no-build")
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        for i in range(3):
            name = stack.container(f"broker-{i}")
            until(lambda name=name: podman.healthy(name), timeout=90, what=f"{name} healthy")
        yield stack
    finally:
        # podman-compose 1.0's `down -v` leaves anonymous volumes and the network behind.
        listed = podman.run(
            "ps", "-a", "-q", "--filter", f"label=io.podman.compose.project={stack.project}"
        )
        podman.remove(*listed.stdout.split())
        stack.compose("down", "-v", "-t", "0", timeout=120)
        podman.run("network", "rm", "-f", f"{stack.project}_default", check=False)


def test_clients_on_the_host_reach_brokers_that_replicate_on_the_bridge(stack: Stack) -> None:
    admin = AdminClient({"bootstrap.servers": stack.bootstrap, **QUIET})
    metadata = admin.list_topics(timeout=30)
    # Each broker is advertised to the host at the port the host publishes it on.
    assert sorted((b.id, b.host, b.port) for b in metadata.brokers.values()) == [
        (i, "localhost", port) for i, port in enumerate(stack.ports)
    ]
    [created] = admin.create_topics([NewTopic("orders", 3, 3)]).values()
    created.result(30)

    producer = Producer({"bootstrap.servers": stack.bootstrap, "acks": "all", **QUIET})
    for i in range(30):
        producer.produce("orders", key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(60) == 0
    # Followers fetch over INTERNAL, as proven brokers: every replica in sync.
    topic = admin.list_topics("orders", timeout=30).topics["orders"]
    assert all(sorted(p.isrs) == [0, 1, 2] for p in topic.partitions.values())

    consumer = Consumer({
        "bootstrap.servers": stack.bootstrap,
        "group.id": "billing",
        "auto.offset.reset": "earliest",
        **QUIET,
    })  # fmt: skip
    consumer.subscribe(["orders"])
    values = set()
    deadline = time.monotonic() + 90
    while len(values) < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.add(message.value())
    consumer.close()
    assert values == {f"v{i}".encode() for i in range(30)}

    # The tools inside a broker's container start from its INTERNAL listener.
    described = stack.podman.run(
        "exec", stack.container("broker-2"), "purgatory", "topics", "describe", "orders"
    )
    assert "orders" in described.stdout


def test_prometheus_scrapes_every_broker_by_its_name_on_the_network(stack: Stack) -> None:
    def all_up() -> bool:
        try:
            targets = stack.prometheus_api("targets")["activeTargets"]
        except OSError:
            return False
        return sorted((t["labels"]["broker_id"], t["health"]) for t in targets) == [
            ("0", "up"), ("1", "up"), ("2", "up"),
        ]  # fmt: skip

    until(all_up, timeout=60, what="Prometheus scraping three brokers")
    result = stack.prometheus_api(
        "query", query="count by (broker_id) (process_start_time_seconds)"
    )
    assert sorted(r["metric"]["broker_id"] for r in result["result"]) == ["0", "1", "2"]


def test_sigterm_hands_leaderships_over_and_exits_0(stack: Stack) -> None:
    name = stack.container("broker-1")
    started = time.monotonic()
    stack.podman.run("stop", "-t", "30", name, timeout=60)
    assert time.monotonic() - started < 30
    assert stack.podman.state(name)["ExitCode"] == 0
    assert '"event": "controlled_shutdown_done"' in stack.podman.logs(name)
    # Two of three in sync: acks=all still succeeds on the other brokers.
    bootstrap = ",".join(f"localhost:{p}" for i, p in enumerate(stack.ports) if i != 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
    producer.produce("orders", b"after", partition=0)
    assert producer.flush(60) == 0
