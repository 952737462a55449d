"""Real broker processes for fault tests: start, kill, freeze, read their state."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from clients import AdminClient, Producer
from tests.support import free_ports, metric_samples, wait_until

SETTINGS = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "50",
    "broker.heartbeat.interval.ms": "100",
    "broker.session.timeout.ms": "1500",
}


class ProcessCluster:
    def __init__(self, size: int = 3, **settings: str) -> None:
        self.settings = {**SETTINGS, **settings}
        ports = free_ports(2 * size)
        self.ports, self.admin_ports = ports[:size], ports[size:]
        self.members = ",".join(f"{i}@127.0.0.1:{p}" for i, p in enumerate(self.ports))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, broker_id: int) -> None:
        cmd = [
            sys.executable,
            "-m",
            "purgatory",
            "broker",
            "--id",
            str(broker_id),
            "--port",
            str(self.ports[broker_id]),
            "--admin-port",
            str(self.admin_ports[broker_id]),
            "--cluster",
            self.members,
            "--log-level",
            "WARNING",
        ]
        for name, value in self.settings.items():
            cmd += ["--set", f"{name}={value}"]
        # BROKER_TEST_LOGS=<dir> keeps each broker's log there (to debug a failure).
        log_dir = os.environ.get("BROKER_TEST_LOGS")
        out = open(f"{log_dir}/broker-{broker_id}.log", "ab") if log_dir else subprocess.DEVNULL  # noqa: SIM115
        self.procs[broker_id] = subprocess.Popen(cmd, stdout=out, stderr=out)

    def kill(self, broker_id: int) -> None:
        self.procs[broker_id].kill()
        self.procs[broker_id].wait(10)

    def state(self, broker_id: int) -> dict[str, Any]:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.admin_ports[broker_id]}/v1/state", timeout=2
        ) as r:
            return json.load(r)  # type: ignore[no-any-return]

    def metrics(self, broker_id: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.admin_ports[broker_id]}/metrics", timeout=2
        ) as r:
            return metric_samples(r.read().decode())

    def healthy(self, broker_id: int) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.admin_ports[broker_id]}/healthz", timeout=1
            ) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def partition_state(self, broker_id: int, topic: str) -> dict[str, Any]:
        return next(p for p in self.state(broker_id)["partitions"] if p["topic"] == topic)

    def stop_all(self) -> None:
        """SIGKILL every broker: a test's teardown needs no handover (tests of controlled
        shutdown send SIGTERM themselves)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(10)


@pytest.fixture
def processes() -> Iterator[ProcessCluster]:
    cluster = ProcessCluster()
    for i in range(3):
        cluster.start(i)
    try:
        yield cluster
    finally:
        cluster.stop_all()


async def ready(cluster: ProcessCluster) -> None:
    await wait_until(
        lambda: all(cluster.healthy(i) for i in range(3)), timeout=30, message="3 healthy brokers"
    )


async def create(cluster: ProcessCluster, topic: str, min_isr: int) -> tuple[int, int]:
    """Create an RF=3 topic; return (leader, a follower that is not the controller)."""
    async with AdminClient(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 3, {"min.insync.replicas": str(min_isr)})
        meta = await admin.describe_topics([topic])
    leader = meta.topics[0].partitions[0].leader_id
    victim = next(b for b in (1, 2) if b != leader)  # broker 0 is the controller
    return leader, victim


def isr(cluster: ProcessCluster, leader: int, topic: str) -> list[int]:
    return sorted(cluster.partition_state(leader, topic)["isr"])


@contextlib.asynccontextmanager
async def running(**settings: str) -> AsyncIterator[ProcessCluster]:
    """Three healthy broker processes (``settings`` on top of SETTINGS), stopped after."""
    cluster = ProcessCluster(**settings)
    try:
        for i in range(3):
            cluster.start(i)
        await ready(cluster)
        yield cluster
    finally:
        cluster.stop_all()


async def produce_while(
    producer: Producer, topic: str, partition: int, action: Callable[[], None], at: int = 500
) -> tuple[dict[int, bytes], int]:
    """Send 1500 records, in round trips of 50, doing ``action`` after record ``at``;
    return the acknowledged ones by offset and how many failed."""
    futures = []
    for i in range(1500):
        futures.append(await producer.send(topic, f"record-{i}".encode(), partition=partition))
        if i == at:
            action()
        if i % 50 == 0:
            await producer.flush()  # spread the load over round trips, not one burst
    await producer.flush()
    acked: dict[int, bytes] = {}
    failed = 0
    for i, future in enumerate(futures):
        if future.exception() is None:
            acked[future.result().offset] = f"record-{i}".encode()
        else:
            failed += 1
    return acked, failed
