"""One broker in a container, as a test suite on the host uses it: published on a random
port, told that port before it starts, reached by confluent-kafka; stopped by SIGTERM;
its healthcheck and command-line tools."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from purgatory.experiments.processes import free_ports
from tests.container.engine import Podman, until

pytestmark = pytest.mark.cluster
QUIET = {"log_level": 3, "logger": lambda *_: None}  # librdkafka: no retry chatter on stderr


@pytest.fixture
def broker(podman: Podman, image: str) -> Iterator[tuple[str, tuple[str, int]]]:
    """A broker published on random host ports, advertising the one clients use: it waits
    for its config (PURGATORY_WAIT_FOR_CONFIG) until the engine has chosen the port."""
    container = podman.start(
        "-p", "127.0.0.1::9092", "-p", "127.0.0.1::9644",
        "-e", "PURGATORY_WAIT_FOR_CONFIG=/tmp/purgatory.properties",
        image,
    )  # fmt: skip
    try:
        host, port = podman.host_port(container, 9092)
        podman.run(
            "exec", container, "sh", "-c",
            f"echo advertised.listeners=PLAINTEXT://{host}:{port} > /tmp/purgatory.part"
            " && mv /tmp/purgatory.part /tmp/purgatory.properties",
        )  # fmt: skip
        until(lambda: podman.healthy(container), timeout=60, what="the broker's healthcheck")
        yield container, (host, port)
    finally:
        podman.remove(container)


def test_a_client_on_the_host_reaches_the_broker_through_its_random_port(
    podman: Podman, broker: tuple[str, tuple[str, int]]
) -> None:
    container, (host, port) = broker
    bootstrap = f"{host}:{port}"
    assert port != 9092 or host != "127.0.0.1"  # what would hide a wrong advertised address
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET})
    metadata = producer.list_topics(timeout=15)
    # Metadata sends the client back to the port it came through, not the container's.
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(host, port)]
    for i in range(20):
        producer.produce("orders", key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    consumer.subscribe(["orders"])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))
    consumer.commit(asynchronous=False)
    [committed] = consumer.committed([TopicPartition("orders", 0)], timeout=15)
    consumer.close()
    assert committed.offset == 20

    # The image carries the command-line tools, aimed at the broker inside.
    listed = podman.run("exec", container, "purgatory", "topics", "list")
    assert "orders" in listed.stdout
    groups = podman.run(
        "exec", container, "purgatory", "consumer-groups", "--describe", "--group", "billing"
    )
    assert "orders" in groups.stdout


def test_sigterm_is_a_controlled_shutdown_that_exits_0_within_the_grace_period(
    podman: Podman, broker: tuple[str, tuple[str, int]]
) -> None:
    container, _ = broker
    started = time.monotonic()
    podman.run("stop", "-t", "30", container, timeout=60)  # SIGTERM; SIGKILL after 30 s
    stopped_in = time.monotonic() - started
    state = podman.state(container)
    assert state["ExitCode"] == 0, podman.logs(container)[-3000:]
    assert stopped_in < 30
    # Alone, it has nobody to hand leaderships to (the compose test's brokers do): it stops
    # its quorum and listeners in order, and says so.
    assert '"event": "broker_stopped"' in podman.logs(container)


def test_the_healthcheck_follows_an_admin_port_set_by_flags(podman: Podman, image: str) -> None:
    container = podman.start("-p", "127.0.0.1::9700", image, "--admin-port", "9700")
    try:
        until(lambda: podman.healthy(container), timeout=60, what="the healthcheck on :9700")
        podman.run("stop", "-t", "30", container, timeout=60)
        assert not podman.healthy(container)
    finally:
        podman.remove(container)


def test_a_known_host_port_is_advertised_from_one_variable(podman: Podman, image: str) -> None:
    [port] = free_ports(1)
    container = podman.start(
        "-p", f"127.0.0.1:{port}:9092",
        "-e", f"PURGATORY_ADVERTISED_ADDRESS=localhost:{port}",
        image,
    )  # fmt: skip
    try:
        until(lambda: podman.healthy(container), timeout=60, what="the broker's healthcheck")
        metadata = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **QUIET}).list_topics(
            timeout=15
        )
        assert [(b.host, b.port) for b in metadata.brokers.values()] == [("localhost", port)]
    finally:
        podman.remove(container)
