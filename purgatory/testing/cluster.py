"""`Cluster`: a Purgatory cluster for someone else's test suite, started and steered from
Python, synchronously or with ``async with``.

``mode="thread"`` runs every broker in this process, on one event loop of its own thread
(fast to start; ``kill`` drops a broker's sockets and memory at once, as a crash would).
``mode="process"`` runs each broker as a `purgatory broker` process, as `purgatory
cluster` does (``kill`` is SIGKILL). Either way the brokers bind 127.0.0.1 on free ports
and everything is stopped when the block ends, however it ends.

Steering and observing go through what a user of the brokers has: the Kafka/our-protocol
port (topics, records) and each broker's admin HTTP API (state, metrics, faults, config).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# A cluster for tests: quick to notice a dead broker, and no wait before a group's first
# generation (Kafka's 3 s group.initial.rebalance.delay.ms would slow every group test).
TEST_DEFAULTS = {
    "broker.heartbeat.interval.ms": "100",
    "broker.session.timeout.ms": "1500",
    "broker.registration.backoff.ms": "20",
    "replica.fetch.wait.max.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "log.level": "WARNING",
}


class ClusterError(RuntimeError):
    """A cluster that could not start, or a request it refused (with the broker's reason)."""


class Cluster:
    def __init__(
        self,
        brokers: int = 3,
        config: dict[str, Any] | None = None,
        mode: Literal["thread", "process"] = "thread",
        startup_timeout: float = 30.0,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least 1 broker")
        if mode not in ("thread", "process"):
            raise ValueError(f"mode must be 'thread' or 'process', got {mode!r}")
        self.size = brokers
        self.mode = mode
        self.config = {**TEST_DEFAULTS, **{k: str(v) for k, v in (config or {}).items()}}
        self.startup_timeout = startup_timeout
        self.ports: list[int] = []
        self.admin_ports: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._brokers: dict[int, Any] = {}  # thread mode: broker id -> Broker
        self._supervisor: Any = None  # process mode
        self._logs: tempfile.TemporaryDirectory[str] | None = None

    # -- addresses ---------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's port; each speaks Kafka's protocol and ours."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def admin_url(self, broker: int) -> str:
        return f"http://127.0.0.1:{self.admin_ports[broker]}"

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Cluster:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)

    def start(self) -> None:
        """Start every broker and wait until all are healthy and share the metadata."""
        from purgatory.experiments.processes import free_port_range

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="purgatory-cluster", daemon=True
        )
        self._thread.start()
        base = free_port_range(2 * self.size)
        self.ports = [base + i for i in range(self.size)]
        self.admin_ports = [base + self.size + i for i in range(self.size)]
        try:
            if self.mode == "thread":
                for i in range(self.size):
                    self._run(self._start_broker(i))
            else:
                self._start_processes()
            self.wait_for(self._healthy, self.startup_timeout, "every broker healthy")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every broker (nothing is left running or bound), then the loop."""
        try:
            if self._supervisor is not None:
                for i in self._supervisor.ids:
                    if self._supervisor.running(i):
                        self._supervisor.kill(i)
                self._supervisor.close_logs()
                self._supervisor = None
            for i in sorted(self._brokers, reverse=True):
                self._run(self._brokers.pop(i).stop())
        finally:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=10)
                self._loop.close()
                self._loop = None
            if self._logs is not None:
                self._logs.cleanup()
                self._logs = None

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        if self._loop is None:
            coro.close()
            raise ClusterError("the cluster is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _members(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in enumerate(self.ports))

    async def _start_broker(self, broker: int) -> None:
        from purgatory.broker.config.broker_config import load_config
        from purgatory.broker.server import start_broker

        values = {
            **self.config,
            "broker.id": broker,
            "listeners": f"127.0.0.1:{self.ports[broker]}",
            "admin.listener": f"127.0.0.1:{self.admin_ports[broker]}",
            "cluster.members": self._members() if self.size > 1 else "",
        }
        self._brokers[broker] = await start_broker(load_config(environ={}, overrides=values))

    def _start_processes(self) -> None:
        from purgatory.broker.local_cluster import broker_commands
        from purgatory.broker.ops.supervisor import Supervisor

        commands = broker_commands(
            argparse.Namespace(
                brokers=self.size,
                host="127.0.0.1",
                base_port=self.ports[0],
                admin_base_port=self.admin_ports[0],
                set=[f"{k}={v}" for k, v in self.config.items() if k != "log.level"],
                config=None,
                log_format=None,
                log_level=self.config.get("log.level", "WARNING"),
            ),
            environ={},
        )
        self._logs = tempfile.TemporaryDirectory(prefix="purgatory-cluster-")
        self._supervisor = Supervisor(
            commands,
            [self.admin_url(i) for i in range(self.size)],
            Path(self._logs.name),
            self.startup_timeout,
        )
        self._supervisor.start_all()

    def _healthy(self) -> bool:
        return all(self.healthy(i) for i in range(self.size) if self.alive(i))

    # -- steering ----------------------------------------------------------------------

    def alive(self, broker: int) -> bool:
        if self.mode == "thread":
            return broker in self._brokers
        return bool(self._supervisor is not None and self._supervisor.running(broker))

    def healthy(self, broker: int) -> bool:
        from purgatory.broker.ops.supervisor import healthy

        return healthy(self.admin_url(broker))

    def kill(self, broker: int) -> None:
        """The broker dies at once: no controlled shutdown, its in-memory logs are gone.
        The controller (broker 0) has no stand-in: while it is dead, leaders are not
        re-elected."""
        if self.mode == "process":
            self._supervisor.kill(broker)
            return
        victim = self._brokers.pop(broker)
        self._run(victim.stop())

    def restart(self, broker: int, timeout: float = 30.0) -> None:
        """Start a killed (or running) broker again, empty, on its port; wait until healthy."""
        if self.alive(broker):
            self.kill(broker)
        if self.mode == "process":
            self._supervisor.start(broker)
        else:
            self._run(self._start_broker(broker))
        self.wait_for(lambda: self.healthy(broker), timeout, f"broker {broker} healthy again")

    def add_fault(self, broker: int, **spec: Any) -> dict[str, Any]:
        """A fault as `purgatory admin fault add` takes it: ``name``, ``kind`` (latency,
        error, pause, disconnect) and its fields (``delay_ms``, ``api``, ``error_code``,
        ``peers`` for a scope of broker or client ids, ``times``, ``duration_ms``, ...)."""
        return self._admin(broker, "POST", "/v1/faults", spec)  # type: ignore[no-any-return]

    def clear_faults(self, broker: int | None = None) -> None:
        for i in self._targets(broker):
            self._admin(i, "POST", "/v1/faults/reset", {})

    def set_config(self, name: str, value: Any, broker: int | None = None) -> None:
        """Change a dynamic config on one broker, or on every live one."""
        for i in self._targets(broker):
            self._admin(i, "PUT", f"/v1/config/{name}", {"value": str(value)})

    def _targets(self, broker: int | None) -> list[int]:
        return [broker] if broker is not None else [i for i in range(self.size) if self.alive(i)]

    # -- topics and records ------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        """Create a topic (replication factor: the cluster's size, at most 3) and wait
        until every partition has a leader."""
        rf = replication_factor if replication_factor is not None else min(self.size, 3)
        self._run(
            self._create(name, partitions, rf, {k: str(v) for k, v in (config or {}).items()})
        )

    async def _create(self, name: str, partitions: int, rf: int, config: dict[str, str]) -> None:
        from purgatory.clients import AdminClient

        async with AdminClient(self.bootstrap_servers) as admin:
            await admin.create_topic(name, partitions, rf, config)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                (topic,) = (await admin.describe_topics([name])).topics
                if len(topic.partitions) == partitions and all(
                    p.leader_id >= 0 for p in topic.partitions
                ):
                    return
                await asyncio.sleep(0.01)
            raise ClusterError(f"{name} has partitions without a leader after 10 s")

    def delete_topic(self, name: str) -> None:
        self._run(self._delete(name))

    async def _delete(self, name: str) -> None:
        from purgatory.clients import AdminClient

        async with AdminClient(self.bootstrap_servers) as admin:
            await admin.delete_topic(name)

    def records(
        self, topic: str, partition: int = 0
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record the partition holds, up to its high
        watermark, read without a consumer group."""
        return self._run(self._records(topic, partition))

    async def _records(
        self, topic: str, partition: int
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        from purgatory.clients import AdminClient, Consumer

        async with AdminClient(self.bootstrap_servers) as admin:
            end = (await admin.offsets_at([(topic, partition)], "latest"))[(topic, partition)]
        found: list[tuple[int, bytes | None, bytes | None]] = []
        async with Consumer(
            self.bootstrap_servers, auto_offset_reset="earliest", fetch_max_wait_ms=50
        ) as consumer:
            consumer.assign([(topic, partition)])
            while (not found or found[-1][0] < end - 1) and end > 0:
                batch = await consumer.poll(timeout_ms=5000)
                if not batch:
                    raise ClusterError(f"{topic}-{partition}: no record below {end} in 5 s")
                found += [(r.offset, r.key, r.value) for r in batch if r.offset < end]
        return found

    # -- observing ---------------------------------------------------------------------

    def state(self, broker: int | None = None) -> dict[str, Any]:
        """A broker's ``/v1/state`` document (broker None: the controller's)."""
        return self._admin(self.controller() if broker is None else broker, "GET", "/v1/state")  # type: ignore[no-any-return]

    def controller(self) -> int:
        for i in range(self.size):
            if self.alive(i):
                with contextlib.suppress(ClusterError):
                    return int(self._admin(i, "GET", "/v1/state")["controller_id"])
        raise ClusterError("no live broker to ask for the controller")

    def partition(self, topic: str, partition: int = 0) -> dict[str, Any]:
        """The partition as its leader describes it (leader, ISR, offsets)."""
        for i in range(self.size):
            if not self.alive(i):
                continue
            for p in self._admin(i, "GET", "/v1/state")["partitions"]:
                if p["topic"] == topic and p["partition"] == partition and p["role"] == "leader":
                    return p  # type: ignore[no-any-return]
        raise ClusterError(f"no live broker leads {topic}-{partition}")

    def metrics(self, broker: int) -> Samples:
        """The broker's Prometheus samples: {(sample name, sorted labels): value}."""
        with urllib.request.urlopen(f"{self.admin_url(broker)}/metrics", timeout=5) as r:
            return metric_samples(r.read().decode())

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition"
    ) -> None:
        """Poll ``predicate`` until it is true; ClusterError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if predicate():
                    return
            except ClusterError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout} s waiting for {message}")
            time.sleep(0.01)

    def _admin(self, broker: int, method: str, path: str, body: Any = None) -> Any:
        from purgatory.common.admin_request import admin_request

        try:
            status, payload = admin_request(method, f"{self.admin_url(broker)}{path}", body)
        except (urllib.error.URLError, OSError) as exc:
            raise ClusterError(f"broker {broker} does not answer: {exc}") from None
        if status >= 400:
            raise ClusterError(f"broker {broker}: {method} {path}: {payload.get('error', payload)}")
        return payload


def metric_samples(text: str) -> Samples:
    """Prometheus text as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
