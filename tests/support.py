"""Helpers for tests: free ports, in-process brokers, waiting on conditions with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.server import Broker, start_broker
from purgatory.experiments.processes import free_ports

PURGATORY = [sys.executable, "-m", "purgatory"]  # the command, as a user runs it


def purgatory_cli(
    *args: str, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``purgatory *args`` in a child process; its output comes back as text."""
    return subprocess.run(
        [*PURGATORY, *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    timeout: float = 10.0,
    interval: float = 0.01,
    message: str = "condition",
) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], bool], *, timeout: float = 10.0, message: str = "condition"
) -> None:
    """``wait_until`` for tests without an event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(0.02)


def broker_config(broker_id: int = 0, *, members: str = "", port: int = 0, **overrides: Any) -> Any:
    values = {
        "broker.id": broker_id,
        "listeners": f"127.0.0.1:{port}",
        "admin.listener": "127.0.0.1:0",
        "cluster.members": members,
        "cluster.secret": "tests-cluster-secret",
        "broker.registration.backoff.ms": 20,
        # Elections in a fraction of a second: tests wait for them.
        "controller.quorum.election.timeout.ms": 300,
        "controller.quorum.fetch.timeout.ms": 800,
        "log.level": "WARNING",
    }
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return load_config(environ={}, overrides=values)


@contextlib.asynccontextmanager
async def running_cluster(
    n: int,
    listeners: Callable[[int], tuple[int, dict[str, Any]]] | None = None,
    **overrides: Any,
) -> AsyncIterator[list[Broker]]:
    """``n`` in-process brokers on ephemeral ports, all holding the controller's metadata.
    ``listeners``: broker index -> (its member port, its listener settings); default: one
    listener on a free port."""
    if listeners is None:
        ports = free_ports(n)

        def listeners(i: int) -> tuple[int, dict[str, Any]]:
            return ports[i], {"listeners": f"127.0.0.1:{ports[i]}"}

    layout = [listeners(i) for i in range(n)]
    members = ",".join(f"{i}@127.0.0.1:{port}" for i, (port, _) in enumerate(layout))
    brokers: list[Broker] = []
    disks = tempfile.TemporaryDirectory(prefix="purgatory-test-")
    try:
        for i, (_, settings) in enumerate(layout):
            config = broker_config(
                i,
                members=members if n > 1 else "",
                metadata_log_dir=f"{disks.name}/broker-{i}",
                **settings,
                **overrides,
            )
            brokers.append(await start_broker(config))
        await wait_until(
            lambda: all(b.health_problem() is None for b in brokers), message="every broker healthy"
        )
        yield brokers
    finally:
        for b in reversed(brokers):
            await b.stop()
        disks.cleanup()


def bootstrap(brokers: list[Broker]) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in brokers)


# The topic configs Kafka Streams asks for (StreamsConfig's defaults): a changelog is
# compacted, a repartition topic deletes with unlimited time retention and 50 MiB
# segments; both are CreateTime.
STREAMS_CHANGELOG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "CreateTime",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
    "segment.ms": "604800000",
}
STREAMS_REPARTITION = {
    "cleanup.policy": "delete",
    "segment.bytes": "52428800",
    "retention.ms": "-1",
    "message.timestamp.type": "CreateTime",
}
