"""The simulation's clients: a topic, and one idempotent acks=all producer per partition
that sends one record at a time, each with a value of its own, and retries it (same
producer id and sequence, so the leader deduplicates) until it is acknowledged.

For each acknowledged record the workload keeps where it was acknowledged and which
replicas were in the leader's ISR at that moment, and which run of each the leader counted:
the record must survive as long as one of those runs is alive (it held the record: the
high watermark counted it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from purgatory.protocol import kafka_records
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, latest_version
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.simulation.cluster import SimCluster

CLIENT = 1000  # the clients' node id on the network
TOPIC = "events"

# Errors after which the same batch is sent again (to the leader Metadata names).
RETRY = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
# The leader does not know this producer's sequence (every replica that knew it lost its
# memory): the record starts again under a new producer id.
RESTART = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
    }
)


@dataclass(frozen=True)
class Ack:
    partition: int
    value: bytes
    offset: int
    isr: tuple[int, ...]  # the leader's ISR (maximal) when it answered
    # The run of each of those replicas whose copy the leader counted (its crash count
    # then; for a follower, the run its fetches came from: a fetch a run sent just before
    # it crashed can still arrive after, as in a real network).
    runs: tuple[int, ...]
    at: float  # simulated time of the answer


class Workload:
    def __init__(self, cluster: SimCluster, partitions: int = 2, interval_ms: int = 25) -> None:
        self.cluster = cluster
        self.sim = cluster.sim
        self.partitions = partitions
        self.interval_ms = interval_ms
        self.acks: list[Ack] = []
        self.abandoned = 0  # records not acknowledged when the workload stopped
        self.created = False
        self.stopping = False
        self._leaders: dict[int, int] = {}
        self._isr_at_answer: dict[int, tuple[tuple[int, ...], tuple[int, ...], float]] = {}
        self._next_pid = 1000
        cluster.net.on_answer = self._answered
        self.loop = self.sim.new_loop(CLIENT)
        cluster.net.attach(CLIENT, self._refuse)

    @staticmethod
    def _refuse(source: int, key: Any, version: int, request: Any) -> Any:
        raise AssertionError("nobody sends requests to the clients")

    def _answered(self, node: int, key: Any, request: Any, answer: Any) -> None:
        """A broker answered: for a produce it acknowledged, note its ISR right now."""
        if key != ApiKey.PRODUCE or not isinstance(answer, m.ProduceResponse):
            return
        part = answer.responses[0].partitions[0]
        broker = self.cluster.nodes[node].broker
        if part.error_code or broker is None:
            return
        replica = broker.replica_manager.partitions.get((TOPIC, part.index))
        if replica is None:
            return
        isr = tuple(replica.maximal_isr())
        runs = []
        for r in isr:
            replica_node = self.cluster.nodes[r]
            if r == node:
                runs.append(replica_node.crashes)
            else:
                follower = replica.followers.get(r)
                epoch = follower.broker_epoch if follower is not None else -1
                runs.append(replica_node.run_of_epoch.get(epoch, -1))
        self._isr_at_answer[id(request)] = (isr, tuple(runs), self.sim.now)

    def start(self, until: float) -> None:
        self.loop.call_soon(lambda: asyncio.ensure_future(self._run(until)))

    async def _run(self, until: float) -> None:
        await self._create_topic(until)
        await asyncio.gather(*(self._produce(p, until) for p in range(self.partitions)))

    async def _send(self, node: int, key: ApiKey, request: Any, timeout_ms: int = 500) -> Any:
        return await self.cluster.net.send(
            CLIENT, node, key, request, timeout_ms, latest_version(key)
        )

    def _any_node(self) -> int:
        return self.sim.rng.choice(sorted(self.cluster.nodes))

    async def _create_topic(self, until: float) -> None:
        request = m.CreateTopicsRequest([m.CreatableTopic(TOPIC, self.partitions, 3)], 2000)
        while self.sim.now < until:
            try:
                response = await self._send(self._any_node(), ApiKey.CREATE_TOPICS, request, 3000)
                code = response.topics[0].error_code
                if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    self.created = True
                    return
            except (ConnectionError, KafkaError):
                pass
            await asyncio.sleep(0.05)

    async def _refresh(self) -> None:
        try:
            response = await self._send(
                self._any_node(), ApiKey.METADATA, m.MetadataRequest([TOPIC])
            )
        except (ConnectionError, KafkaError):
            return
        for topic in response.topics:
            for p in topic.partitions:
                if p.leader_id >= 0:
                    self._leaders[p.partition_index] = p.leader_id
                else:
                    self._leaders.pop(p.partition_index, None)

    async def _produce(self, partition: int, until: float) -> None:
        pid, seq, n = self._pid(), 0, 0
        while self.sim.now < until and not self.stopping:
            value = f"{partition}/{pid}/{n}".encode()
            batch = kafka_records.encode(
                [(0, None, value, ())], producer_id=pid, producer_epoch=0, base_sequence=seq
            )
            outcome = await self._deliver(partition, batch, value, until)
            if outcome == "acked":
                seq += 1
                n += 1
                await asyncio.sleep(self.interval_ms / 1000)
            elif outcome == "restart":
                pid, seq = self._pid(), 0
            else:
                self.abandoned += 1
                return

    def _pid(self) -> int:
        self._next_pid += 1
        return self._next_pid

    async def _deliver(self, partition: int, batch: bytes, value: bytes, until: float) -> str:
        request = m.ProduceRequest(
            -1, 1000, [m.TopicProduceData(TOPIC, [m.PartitionProduceData(partition, batch)])]
        )
        while self.sim.now < until and not self.stopping:
            leader = self._leaders.get(partition)
            if leader is None:
                await self._refresh()
                if partition not in self._leaders:
                    await asyncio.sleep(0.05)
                continue
            try:
                response = await self._send(leader, ApiKey.PRODUCE, request, 1500)
            except (ConnectionError, KafkaError):
                self._leaders.pop(partition, None)
                await asyncio.sleep(0.02)
                continue
            part = response.responses[0].partitions[0]
            if part.error_code == ErrorCode.NONE:
                isr, runs, at = self._isr_at_answer.pop(id(request))
                self.acks.append(Ack(partition, value, part.base_offset, isr, runs, at))
                return "acked"
            if part.error_code in RESTART:
                return "restart"
            if part.error_code not in RETRY:
                raise AssertionError(f"produce answered {ErrorCode(part.error_code).name}")
            self._leaders.pop(partition, None)
            await asyncio.sleep(0.02)
        return "abandoned"
