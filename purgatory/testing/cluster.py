"""`Cluster`: a Purgatory cluster for someone else's test suite, started and steered from
Python, synchronously or with ``async with``.

``mode="thread"`` runs every broker in this process, each on an event loop of its own
thread (fast to start; ``kill`` drops a broker's sockets and memory at once, as a crash
would; ``pause`` blocks its thread, so nothing of it runs until ``resume``).
``mode="process"`` runs each broker as a `purgatory broker` process, as `purgatory
cluster` does (``kill`` is SIGKILL, ``pause`` SIGSTOP). Either way the brokers bind
127.0.0.1 on free ports and everything is stopped when the block ends, however it ends;
broker processes also exit by themselves when this process dies, even by SIGKILL (the
supervisor's lifeline).

Steering and observing go through what a user of the brokers has: the Kafka/our-protocol
port (topics, records) and each broker's admin HTTP API (state, metrics, faults, config).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import msgspec

from purgatory.clients.cluster_auth import SECRET_ENV
from purgatory.common.broker_state import BrokerState, ReplicaInfo
from purgatory.testing.loop_thread import LoopThread

T = TypeVar("T")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# A cluster for tests: quick to notice a dead broker or controller, and no wait before a
# group's first generation (Kafka's 3 s group.initial.rebalance.delay.ms would slow every
# group test).
TEST_DEFAULTS = {
    "broker.heartbeat.interval.ms": "100",
    "broker.session.timeout.ms": "1500",
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "800",
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
        add_scram: list[str] | None = None,
    ) -> None:
        """``add_scram``: SCRAM users the cluster starts with, as `purgatory broker
        --add-scram` takes them (``SCRAM-SHA-512=[name=alice,password=alice-secret]``):
        ``bootstrap.scram.credentials``."""
        if brokers < 1:
            raise ValueError("a cluster needs at least 1 broker")
        if mode not in ("thread", "process"):
            raise ValueError(f"mode must be 'thread' or 'process', got {mode!r}")
        self.size = brokers
        self.mode = mode
        self.config = {**TEST_DEFAULTS, **{k: str(v) for k, v in (config or {}).items()}}
        if add_scram:
            self.config["bootstrap.scram.credentials"] = " ".join(a.strip() for a in add_scram)
        # The brokers prove it to each other (cluster.secret); one per cluster.
        self.config.setdefault("cluster.secret", secrets.token_hex(16))
        self.startup_timeout = startup_timeout
        self.ports: list[int] = []
        self.admin_ports: list[int] = []
        self._clients: LoopThread | None = None  # admin clients and consumers of the helpers
        self._loops: dict[int, LoopThread] = {}  # thread mode: broker id -> its loop
        self._brokers: dict[int, Any] = {}  # thread mode: broker id -> Broker
        self._supervisor: Any = None  # process mode
        self._logs: tempfile.TemporaryDirectory[str] | None = None
        # Thread mode: each broker's metadata.log.dir (its quorum state survives a restart).
        self._disks: tempfile.TemporaryDirectory[str] | None = None

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

        self._clients = LoopThread("purgatory-cluster-clients")
        base = free_port_range(2 * self.size)
        self.ports = [base + i for i in range(self.size)]
        self.admin_ports = [base + self.size + i for i in range(self.size)]
        try:
            if self.mode == "thread":
                self._configure_logging()
                for i in range(self.size):
                    self._start_broker(i)
                self.wait_for(self._healthy, self.startup_timeout, "every broker healthy")
            else:
                self._start_processes()
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
                self._supervisor.close()
                self._supervisor = None
            for i in sorted(self._loops, reverse=True):
                self._stop_broker(i)
        finally:
            for loop in self._loops.values():
                loop.close()
            self._loops.clear()
            self._brokers.clear()
            if self._clients is not None:
                self._clients.close()
                self._clients = None
            for scratch in (self._logs, self._disks):
                if scratch is not None:
                    scratch.cleanup()
            self._logs = self._disks = None

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Run a client-side helper on the clients' loop."""
        if self._clients is None:
            coro.close()
            raise ClusterError("the cluster is not running")
        return self._clients.run(coro, timeout)

    def _members(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in enumerate(self.ports))

    def _start_broker(self, broker: int) -> None:
        """Thread mode: start ``broker`` on a new loop thread of its own."""
        from purgatory.broker.config.broker_config import load_config
        from purgatory.broker.server import start_broker

        if self._disks is None:
            self._disks = tempfile.TemporaryDirectory(prefix="purgatory-metadata-")
        values = {
            "metadata.log.dir": f"{self._disks.name}/broker-{broker}",
            **self.config,
            "broker.id": broker,
            "listeners": f"127.0.0.1:{self.ports[broker]}",
            "admin.listener": f"127.0.0.1:{self.admin_ports[broker]}",
            "cluster.members": self._members() if self.size > 1 else "",
        }
        loop = self._loops[broker] = LoopThread(f"purgatory-broker-{broker}")
        config = load_config(environ={}, overrides=values)
        self._brokers[broker] = loop.run(start_broker(config), self.startup_timeout)

    def _configure_logging(self) -> None:
        """Thread mode: brokers log with this process's structlog set-up. Without one,
        they get the broker's (``log.level``, to stderr, latest events kept for
        ``logs()``); one the test suite made is left as it is."""
        import structlog

        from purgatory.broker.ops.structured_logging import configure_logging

        if not structlog.is_configured():
            configure_logging("console", self.config.get("log.level", "WARNING"))

    def _stop_broker(self, broker: int) -> None:
        """Thread mode: stop ``broker`` (thawed first if paused) and its loop."""
        loop = self._loops.pop(broker)
        victim = self._brokers.pop(broker, None)
        try:
            loop.thaw()
            if victim is not None:
                loop.run(victim.stop())
        finally:
            loop.close()

    def _start_processes(self) -> None:
        from purgatory.broker.local_cluster import broker_commands
        from purgatory.broker.ops.supervisor import Supervisor, SupervisorError

        commands = broker_commands(
            argparse.Namespace(
                brokers=self.size,
                host="127.0.0.1",
                base_port=self.ports[0],
                admin_base_port=self.admin_ports[0],
                set=[
                    f"{k}={v}"
                    for k, v in self.config.items()
                    if k not in ("log.level", "cluster.secret")  # the secret: not in argv
                ],
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
            {SECRET_ENV: self.config["cluster.secret"]},
        )
        self._supervisor.start_all()
        try:
            self._supervisor.wait_healthy(list(range(self.size)))
        except SupervisorError as exc:
            logs = Path(self._logs.name)
            tail = "".join(
                f"\nbroker {i}: {(logs / f'broker-{i}.log').read_text()[-500:]}"
                for i in range(self.size)
            )
            raise ClusterError(f"{exc}{tail}") from None

    def _healthy(self) -> bool:
        return all(self.healthy(i) for i in range(self.size))

    # -- steering ----------------------------------------------------------------------

    def alive(self, broker: int) -> bool:
        """Started and not killed (a paused broker is alive)."""
        if self.mode == "thread":
            return broker in self._brokers
        return bool(self._supervisor is not None and self._supervisor.running(broker))

    def pid(self, broker: int) -> int:
        """The broker's process id (in thread mode, this process's)."""
        self._check(broker)
        if self.mode == "process":
            return int(self._supervisor.procs[broker].pid)
        return os.getpid()

    def healthy(self, broker: int) -> bool:
        from purgatory.broker.ops.supervisor import healthy

        return healthy(self.admin_url(broker))

    def kill(self, broker: int) -> None:
        """The broker dies at once: no controlled shutdown, its in-memory logs are gone.
        The controller (broker 0) has no stand-in: while it is dead, leaders are not
        re-elected."""
        self._check(broker)
        if self.mode == "process":
            self._supervisor.kill(broker)
        else:
            self._stop_broker(broker)

    def stop(self, broker: int, timeout: float = 30.0) -> None:
        """Stop the broker as SIGTERM stops it in production: it first hands its
        leaderships to other in-sync replicas (Kafka's controlled shutdown), so clients
        are told NOT_LEADER_OR_FOLLOWER and find the new leader at once, then it exits.
        Its in-memory logs are gone; ``restart`` brings it back empty. A paused broker is
        resumed first. ClusterError if it has not stopped cleanly within ``timeout``
        seconds (it is stopped at once then)."""
        self._check(broker)
        if self.mode == "process":
            proc = self._supervisor.procs[broker]
            self._supervisor.stop(broker, timeout)
            if proc.returncode != 0:
                raise ClusterError(
                    f"broker {broker} did not stop cleanly within {timeout:g} s "
                    f"(exit status {proc.returncode})"
                )
            return
        loop = self._loops[broker]
        loop.thaw()
        try:
            loop.run(self._brokers[broker].controlled_shutdown(), timeout)
        except TimeoutError:
            raise ClusterError(
                f"broker {broker} did not hand its leaderships over within {timeout:g} s"
            ) from None
        finally:
            self._stop_broker(broker)

    def pause(self, broker: int) -> None:
        """Freeze the broker (a long GC pause, a stalled VM): its sockets stay open but
        nothing of it runs, no answers, no heartbeats to the controller, no replication,
        until ``resume``; after ``broker.session.timeout.ms`` the controller fences it."""
        self._check(broker)
        if self.mode == "process":
            self._supervisor.pause(broker)
        else:
            self._loops[broker].freeze()

    def resume(self, broker: int) -> None:
        """Let a paused broker run on from where it stopped (its timers fire late)."""
        self._check(broker)
        if self.mode == "process":
            self._supervisor.resume(broker)
        else:
            self._loops[broker].thaw()

    def paused(self, broker: int) -> bool:
        if self.mode == "process":
            return self._supervisor is not None and broker in self._supervisor.paused
        return broker in self._loops and self._loops[broker].frozen

    def _check(self, broker: int) -> None:
        if not 0 <= broker < self.size:
            raise ClusterError(f"no broker {broker}: the cluster has brokers 0-{self.size - 1}")
        if not self.alive(broker):
            raise ClusterError(f"broker {broker} is not running (killed; restart it first)")

    def restart(self, broker: int, timeout: float = 30.0) -> None:
        """Start a killed (or running) broker again, empty, on its port; wait until healthy."""
        if not 0 <= broker < self.size:
            raise ClusterError(f"no broker {broker}: the cluster has brokers 0-{self.size - 1}")
        if self.alive(broker):
            self.kill(broker)
        if self.mode == "process":
            self._supervisor.start(broker)
        else:
            self._start_broker(broker)
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
        return [broker] if broker is not None else self._answering()

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
        watermark, read without a consumer group (transaction markers, which hold no
        record, left out)."""
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
            tp = (topic, partition)
            # Until the fetches pass the end and every record fetched is handed out: the
            # last offsets may hold no record (a transaction marker, a batch the cleaner
            # emptied), so no record at end - 1 need come.
            deadline = time.monotonic() + 5
            while end > 0:
                fetched = (consumer.fetch_position(tp) or 0) >= end
                batch = await consumer.poll(timeout_ms=100)
                found += [(r.offset, r.key, r.value) for r in batch if r.offset < end]
                if batch:
                    deadline = time.monotonic() + 5
                elif fetched:
                    break
                elif time.monotonic() > deadline:
                    raise ClusterError(f"{topic}-{partition}: no record below {end} in 5 s")
        return found

    # -- observing ---------------------------------------------------------------------

    def state(self, broker: int | None = None) -> BrokerState:
        """A broker's ``/v1/state`` document, typed (broker None: the controller's)."""
        target = self.controller() if broker is None else broker
        return msgspec.convert(self._admin(target, "GET", "/v1/state"), BrokerState)

    def controller(self, timeout: float = 15.0) -> int:
        """The active controller (the metadata quorum's leader): the broker that says it
        is, waiting up to ``timeout`` seconds while an election is under way."""
        deadline = time.monotonic() + timeout
        while True:
            for i in self._answering():
                with contextlib.suppress(ClusterError):
                    if self.state(i).is_controller:
                        return i
            if time.monotonic() > deadline:
                raise ClusterError(f"no active controller after {timeout:g} s (no quorum?)")
            time.sleep(0.02)

    def partition(self, topic: str, partition: int = 0) -> ReplicaInfo:
        """The partition as its leader describes it (leader, ISR, offsets)."""
        for i in self._answering():
            replica = self.state(i).replica(topic, partition)
            if replica is not None and replica.role == "leader":
                return replica
        raise ClusterError(f"no running broker leads {topic}-{partition}")

    def elect_leader(self, topic: str, partition: int, broker: int, timeout: float = 10) -> None:
        """Make ``broker`` lead ``topic``-``partition``: it becomes the preferred (first)
        replica and is elected, as a reassignment that reorders the replicas and a
        preferred election would do in Kafka; it must be a live in-sync replica. Returns
        once the broker leads."""
        self._admin(
            self.controller(),
            "POST",
            f"/v1/partitions/{topic}/{partition}/leader",
            {"broker_id": broker},
        )
        self.wait_for(
            lambda: self.partition(topic, partition).leader == broker,
            timeout,
            f"broker {broker} to lead {topic}-{partition}",
        )

    def logs(self, broker: int, limit: int = 100) -> list[dict[str, Any]]:
        """The broker's latest log events (INFO and above), oldest first: ``timestamp``,
        ``level``, ``event`` and the event's fields."""
        events = self._admin(broker, "GET", f"/v1/logs?limit={limit}")["events"]
        return list(events)

    def _answering(self) -> list[int]:
        """Brokers that can answer now: running and not paused."""
        return [i for i in range(self.size) if self.alive(i) and not self.paused(i)]

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
