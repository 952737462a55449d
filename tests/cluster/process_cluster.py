"""Real broker processes for fault tests: start, kill, freeze, read their state."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.local_cluster import broker_commands, cluster_environment
from purgatory.broker.ops.supervisor import Supervisor
from purgatory.clients import AdminClient, Producer
from purgatory.experiments.processes import free_port_range
from purgatory.testing.cluster import metric_samples
from tests.support import wait_until

SETTINGS = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "50",
    "broker.heartbeat.interval.ms": "100",
    "broker.session.timeout.ms": "1500",
    # The broker defaults, not `purgatory cluster`'s replicated ones: tests say what they use.
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}


class ProcessCluster:
    """``size`` brokers as `purgatory cluster` starts them (its command lines and its
    Supervisor), on free ports, logging at WARNING to BROKER_TEST_LOGS=<dir> if set (to
    debug a failure), else to a temporary directory."""

    def __init__(self, size: int = 3, **settings: str) -> None:
        self.settings = {**SETTINGS, **settings}
        base = free_port_range(2 * size)
        self.ports = [base + i for i in range(size)]
        self.admin_ports = [base + size + i for i in range(size)]
        commands = broker_commands(
            argparse.Namespace(
                brokers=size,
                host="127.0.0.1",
                base_port=base,
                admin_base_port=base + size,
                set=[f"{name}={value}" for name, value in self.settings.items()],
                config=None,
                log_format=None,
                log_level="WARNING",
            ),
            environ={},
        )
        kept = os.environ.get("BROKER_TEST_LOGS")
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        if kept:
            log_dir = Path(kept)
        else:
            self._scratch = tempfile.TemporaryDirectory(prefix="broker-logs-")
            log_dir = Path(self._scratch.name)
        self.supervisor = Supervisor(
            commands,
            [f"http://127.0.0.1:{p}" for p in self.admin_ports],
            log_dir,
            environ=cluster_environment({}),
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def procs(self) -> dict[int, subprocess.Popen[bytes]]:
        return self.supervisor.procs

    def start(self, broker_id: int) -> None:
        self.supervisor.start(broker_id)

    def kill(self, broker_id: int) -> None:
        self.supervisor.kill(broker_id)

    def healthy(self, broker_id: int) -> bool:
        return self.supervisor.healthy(broker_id)

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

    def controller(self, timeout: float = 20.0, among: list[int] | None = None) -> int:
        """The active controller: the broker (of ``among``, else any) that says it is,
        waiting while an election is under way; a broker that does not answer (frozen,
        killed) is skipped."""
        deadline = time.monotonic() + timeout
        while True:
            for i in among if among is not None else list(self.supervisor.ids):
                with contextlib.suppress(OSError, ValueError):
                    if self.supervisor.running(i) and self.state(i)["is_controller"]:
                        return i
            if time.monotonic() > deadline:
                raise AssertionError(f"no active controller after {timeout} s")
            time.sleep(0.05)

    def partition_state(self, broker_id: int, topic: str) -> dict[str, Any]:
        return next(p for p in self.state(broker_id)["partitions"] if p["topic"] == topic)

    def stop_all(self) -> None:
        """SIGKILL every broker: a test's teardown needs no handover (tests of controlled
        shutdown send SIGTERM themselves)."""
        for broker_id in self.supervisor.ids:
            if self.supervisor.running(broker_id):
                self.supervisor.kill(broker_id)
        self.supervisor.close()
        if self._scratch is not None:
            self._scratch.cleanup()


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
    """Create an RF=3 topic; return (leader, a follower that is not the active
    controller)."""
    async with AdminClient(cluster.bootstrap) as admin:
        await admin.create_topic(topic, 1, 3, {"min.insync.replicas": str(min_isr)})
        meta = await admin.describe_topics([topic])
    leader = meta.topics[0].partitions[0].leader_id
    controller = cluster.controller()
    victim = next(b for b in range(3) if b not in (leader, controller))
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
