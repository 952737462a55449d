"""SimCluster: simulated broker processes running the real ``Broker`` (everything but its
sockets and admin HTTP: the metadata quorum, the controller, registration and fencing,
replication, the purgatories) on the simulated network, each with a disk (its metadata
log's store) that outlives its crashes, as ``metadata.log.dir`` does.

A crash drops a process with all it held in memory (its partition logs); a restart is a
new run on the same disk; a pause stops a process dead until it resumes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from purgatory.broker.api.results import Deferred
from purgatory.broker.config.broker_config import load_config
from purgatory.broker.metadata.records import PartitionChangeRecord, PartitionRecord, decode_record
from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.log_store import MemoryLogStore
from purgatory.broker.server import Broker
from purgatory.protocol.api import ApiKey, latest_version
from tests.simulation.network import SimNetwork
from tests.simulation.sim_loop import SimScheduler, Simulation, SimulationError

# Kafka's timings scaled down about tenfold: a simulated second holds many elections.
SIM_CONFIG: dict[str, Any] = {
    "controller.quorum.election.timeout.ms": 150,
    "controller.quorum.fetch.timeout.ms": 300,
    "controller.quorum.election.backoff.max.ms": 150,
    "controller.quorum.request.timeout.ms": 300,
    "controller.quorum.retry.backoff.ms": 20,
    "broker.session.timeout.ms": 600,
    "broker.heartbeat.interval.ms": 100,
    "broker.registration.backoff.ms": 30,
    "replica.lag.time.max.ms": 500,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 50,
    "replica.socket.timeout.ms": 1000,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "auto.create.topics.enable": False,
    "leader.imbalance.check.interval.seconds": 1,
    "metadata.log.max.record.bytes.between.snapshots": 3000,
    "log.level": "ERROR",
}


class SimChannels:
    """A node's requests to other nodes (the quorum's and the controller's), over the
    simulated network."""

    def __init__(self, net: SimNetwork, node_id: int) -> None:
        self.net = net
        self.node_id = node_id

    async def send(self, destination: int, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        return await self.net.send(
            self.node_id, destination, key, request, timeout_ms, latest_version(key)
        )


class SimLeaderTransport:
    """A follower's requests to one partition leader, over the simulated network."""

    def __init__(self, net: SimNetwork, node_id: int, leader: int) -> None:
        self.net = net
        self.node_id = node_id
        self.leader = leader

    async def send(self, key: ApiKey, request: Any, version: int, timeout_ms: int) -> Any:
        return await self.net.send(self.node_id, self.leader, key, request, timeout_ms, version)

    async def close(self) -> None:
        pass


class SimNode:
    def __init__(self, cluster: SimCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.disk = MemoryLogStore()  # survives crashes, as a metadata.log.dir does
        self.broker: Broker | None = None
        self.crashes = 0  # runs lost: what this node held in memory before each is gone
        self.up = False
        self.run_of_epoch: dict[int, int] = {}  # broker epoch -> the run (crash count) it had

    def start(self) -> None:
        """A new run of the process, on the same disk."""
        cluster, sim = self.cluster, self.cluster.sim
        loop = sim.new_loop(self.node_id)
        seed = sim.rng.getrandbits(64)
        net = cluster.net

        def boot() -> None:
            broker = Broker(
                cluster.config(self.node_id),
                scheduler=SimScheduler(loop),
                rng=random.Random(seed),
                channels=SimChannels(net, self.node_id),
                leader_transport=lambda leader: SimLeaderTransport(net, self.node_id, leader),
                store=self.disk,
            )
            self.broker = broker
            applied = broker.loader.handle_commit

            def handle_commit(entries: Any) -> None:
                applied(entries)
                cluster.committed(entries)

            broker.loader.handle_commit = handle_commit  # type: ignore[method-assign]
            broker.start_node()
            net.attach(self.node_id, self._handle)

        loop.call_soon(boot)
        self.up = True

    def _handle(self, source: int, key: Any, version: int, request: Any) -> Any:
        broker = self.broker
        if broker is None:
            raise SimulationError(f"node {self.node_id} got a request before it booted")
        result = broker.apis.handlers[key](request, version)
        if isinstance(result, Deferred):
            return _resolve(result)
        return result

    def crash(self) -> None:
        """kill -9: the process and all its memory are gone."""
        if not self.up:
            return
        broker = self.broker
        if broker is not None:
            self.cluster.retired.append(broker)
        self.cluster.timeline.append((self.cluster.sim.now, "crash", (self.node_id, self.crashes)))
        self.cluster.net.detach(self.node_id)
        self.cluster.sim.drop_loop(self.node_id)
        self.broker = None
        self.crashes += 1
        self.up = False

    def pause(self) -> None:
        if self.up:
            self.cluster.sim.paused.add(self.node_id)

    def resume(self) -> None:
        self.cluster.sim.paused.discard(self.node_id)

    @property
    def paused(self) -> bool:
        return self.node_id in self.cluster.sim.paused


async def _resolve(deferred: Deferred[Any]) -> Any:
    return deferred.to_response(await deferred.future)


class SimCluster:
    def __init__(self, sim: Simulation, size: int = 3, **overrides: Any) -> None:
        self.sim = sim
        self.net = SimNetwork(sim)
        self.members = ",".join(f"{i}@sim-{i}:{9092 + i}" for i in range(size))
        self.settings = {**SIM_CONFIG, **overrides}
        self.nodes = {i: SimNode(self, i) for i in range(size)}
        self.retired: list[Broker] = []  # brokers of runs that crashed (their counters)
        self.leaders: dict[int, int] = {}  # quorum epoch -> the node that led it
        self.violations: list[str] = []
        self._reported: set[tuple[int, int, int]] = set()
        # What the durability check replays (simulated time, kind, what): a run that
        # crashed ("crash", (node, run)), a partition's ISR as committed ("isr",
        # (partition, ((node, its run then), ...)))).
        self.timeline: list[tuple[float, str, Any]] = []
        self._observed = 0  # the next metadata offset to put on the timeline
        sim.after_step = self._observe

    def config(self, node_id: int) -> Any:
        values = {
            **self.settings,
            "broker.id": node_id,
            "cluster.members": self.members,
            "listeners": f"sim-{node_id}:{9092 + node_id}",
            "admin.listener": "127.0.0.1:0",
        }
        return load_config(environ={}, overrides=values)

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()

    def brokers(self) -> list[Broker]:
        return [n.broker for n in self.nodes.values() if n.up and n.broker is not None]

    def _observe(self, node_id: int) -> None:
        """After every step of a process: no two leaders in one quorum epoch, ever."""
        node = self.nodes.get(node_id)
        if node is None or node.broker is None:
            return
        epoch = node.broker.lifecycle.broker_epoch
        if epoch >= 0:
            node.run_of_epoch.setdefault(epoch, node.crashes)
        state = node.broker.raft.quorum.state
        if isinstance(state, LeaderState):
            seen = self.leaders.setdefault(state.epoch, node_id)
            if seen != node_id and (seen, node_id, state.epoch) not in self._reported:
                self._reported.add((seen, node_id, state.epoch))
                self.violations.append(
                    f"t={self.sim.now:.3f}: nodes {seen} and {node_id} both led quorum epoch "
                    f"{state.epoch}"
                )

    def committed(self, entries: list[Any]) -> None:
        """A node applied committed metadata: the first to apply an offset (the quorum
        leader, as it commits it) puts the ISR changes in it on the timeline."""
        for entry in entries:
            if entry.offset < self._observed:
                continue
            self._observed = entry.offset + 1
            record = decode_record(entry.data)
            if isinstance(record, PartitionRecord | PartitionChangeRecord):
                runs = tuple((m, self.nodes[m].crashes) for m in record.isr)
                self.timeline.append((self.sim.now, "isr", (record.partition_id, runs)))

    def active_controller(self) -> Broker | None:
        for broker in self.brokers():
            if broker.controller is not None:
                return broker
        return None

    def wait_for(self, condition: Callable[[], bool], within_s: float) -> bool:
        """Run the world until ``condition`` holds (True) or ``within_s`` passes (False)."""
        self.sim.run_until(self.sim.now + within_s, condition)
        return condition()
