"""Deleting a topic deletes its committed offsets in every group, with real clients: a
topic deleted and made again under one group.id is read from its start, also when the
group's coordinator fails after the deletion."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.server import Broker
from tests.integration.test_kafka_clients import create, in_thread
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
GROUP = "fixed-group"
FAST_GROUPS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **{"default.replication.factor": 3, **FAST_GROUPS}) as b:
        yield b


def produce(servers: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(20) == 0


def consume_in_group(servers: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    """Read ``count`` records in the group (from its committed offsets, else the earliest)
    and commit them."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got.append((message.offset(), message.value()))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


async def delete_topic(servers: str, brokers: list[Broker], topic: str) -> None:
    def delete() -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": servers})
        admin.delete_topics([topic])[topic].result(20)

    await in_thread(delete)
    await wait_until(
        lambda: all(topic not in b.metadata.topics for b in brokers), message=f"{topic} deleted"
    )


def committed(brokers: list[Broker], topic: str) -> list[Any]:
    """The group's offsets of ``topic`` wherever the group is coordinated."""
    return [
        tp
        for b in brokers
        for group in [b.group_coordinator.groups.get(GROUP)]
        if group is not None
        for tp in group.offsets
        if tp[0] == topic
    ]


async def read_by_the_group(brokers: list[Broker], topic: str) -> str:
    """A new topic of six records, read and committed by the group; the servers."""
    servers = bootstrap(brokers)
    await create(brokers, topic, 1)
    await in_thread(produce, servers, topic, [b"old%d" % i for i in range(6)])
    assert len(await in_thread(consume_in_group, servers, topic, 6)) == 6
    return servers


async def read_again_after_recreation(brokers: list[Broker], topic: str) -> None:
    """The topic made again with six new records: the group reads all six."""
    await create(brokers, topic, 1)
    new = [b"new%d" % i for i in range(6)]
    servers = bootstrap(brokers)
    await in_thread(produce, servers, topic, new)
    assert await in_thread(consume_in_group, servers, topic, 6) == list(enumerate(new))


async def test_a_topic_deleted_and_made_again_is_read_by_the_same_group_from_its_start(
    brokers: list[Broker],
) -> None:
    servers = await read_by_the_group(brokers, "recreated")
    assert committed(brokers, "recreated")
    old_id = brokers[0].metadata.topics["recreated"].topic_id
    await delete_topic(servers, brokers, "recreated")
    assert committed(brokers, "recreated") == []
    await read_again_after_recreation(brokers, "recreated")
    assert brokers[0].metadata.topics["recreated"].topic_id != old_id  # a new incarnation


async def test_the_deletion_of_offsets_outlives_the_groups_coordinator(
    brokers: list[Broker],
) -> None:
    """The tombstones are in ``__consumer_offsets``: the next coordinator loads them."""
    servers = await read_by_the_group(brokers, "recreated")
    coordinator = next(b for b in brokers if GROUP in b.group_coordinator.groups)
    index = coordinator.group_coordinator.manager.partition_for(GROUP)
    offsets_partition = coordinator.replica_manager.partitions[(OFFSETS_TOPIC, index)]
    end_before = offsets_partition.log.log_end_offset
    await delete_topic(servers, brokers, "recreated")
    await wait_until(
        lambda: offsets_partition.high_watermark > end_before,
        message="the tombstones committed in __consumer_offsets",
    )
    await coordinator.stop()
    brokers.remove(coordinator)
    await read_again_after_recreation(brokers, "recreated")
    successor = next(b for b in brokers if GROUP in b.group_coordinator.groups)
    assert successor is not coordinator
