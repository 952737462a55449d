"""KIP-848's online migration with confluent-kafka: classic members (cooperative-sticky,
and eager range) consuming in a group; a consumer-protocol member joins, the group becomes
a consumer group whose classic members carry on; it leaves, and the group is classic
again. Every record is consumed once throughout."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from purgatory.broker.coordinator.consumer_group import ConsumerGroup
from purgatory.broker.coordinator.group_metadata import GroupMetadata
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from tests.support import bootstrap, running_cluster, wait_until

FAST = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC, PARTITIONS = "mix", 6


class Member:
    """A confluent-kafka consumer polling in a thread, noting what it reads."""

    def __init__(self, servers: str, name: str, protocol: str, strategy: str) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": servers,
            "group.id": "migrating",
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "client.id": name,
        }
        if protocol == "classic":
            config["partition.assignment.strategy"] = strategy
            config["session.timeout.ms"] = 6000
            config["heartbeat.interval.ms"] = 500
        self.config = config
        self.read: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe([TOPIC])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    self.errors.append(str(message.error()))
                else:
                    self.read.append((message.partition(), message.offset()))
        finally:
            consumer.close()

    async def close(self) -> None:
        self.stop.set()
        await asyncio.to_thread(self.thread.join)


def _group(broker: Broker) -> Any:
    return broker.group_coordinator.groups.get("migrating")


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
async def test_a_classic_group_upgrades_to_a_consumer_group_and_back(strategy: str) -> None:
    async with running_cluster(1, **FAST) as brokers:
        broker = brokers[0]
        servers = bootstrap(brokers)
        async with AdminClient(servers) as admin:
            await admin.create_topic(TOPIC, PARTITIONS)
        producer = Producer({"bootstrap.servers": servers})
        sent = 0

        async def produce(n: int) -> None:
            nonlocal sent
            for i in range(n):
                producer.produce(TOPIC, b"v%d" % (sent + i), partition=(sent + i) % PARTITIONS)
            sent += n
            assert await asyncio.to_thread(producer.flush, 20) == 0

        members = [Member(servers, f"c{i}", "classic", strategy) for i in (1, 2)]
        everyone = list(members)

        def read() -> list[tuple[int, int]]:
            return [r for m in everyone for r in m.read]

        try:
            await produce(60)
            await wait_until(lambda: len(read()) == 60, timeout=30, message="60 records read")
            assert isinstance(_group(broker), GroupMetadata)

            newcomer = Member(servers, "k3", "consumer", strategy)
            members.append(newcomer)
            everyone.append(newcomer)
            await wait_until(
                lambda: (
                    isinstance(g := _group(broker), ConsumerGroup)
                    and g.state.value == "Stable"
                    and len(g.members) == 3
                    and all(m.assigned for m in g.members.values())
                ),
                timeout=30,
                message="a stable consumer group of three, each with partitions",
            )
            group = _group(broker)
            kinds = sorted(m.classic is not None for m in group.members.values())
            assert kinds == [False, True, True]  # the two classic members stayed classic
            owned = [p for m in group.members.values() for ps in m.assigned.values() for p in ps]
            assert sorted(owned) == list(range(PARTITIONS))  # each partition owned once
            await produce(60)
            await wait_until(lambda: len(read()) == 120, timeout=30, message="120 records read")
            assert newcomer.read, "the consumer-protocol member read nothing"

            members.remove(newcomer)
            await newcomer.close()
            await wait_until(
                lambda: (
                    isinstance(g := _group(broker), GroupMetadata)
                    and g.state.value == "Stable"
                    and len(g.members) == 2
                ),
                timeout=30,
                message="a stable classic group of two again",
            )
            await produce(60)
            await wait_until(lambda: len(read()) >= 180, timeout=30, message="180 records read")
            records = read()
            assert len(records) == len(set(records)) == 180  # none twice, none missing
            assert not [e for m in everyone for e in m.errors]
        finally:
            for m in members:
                await m.close()
