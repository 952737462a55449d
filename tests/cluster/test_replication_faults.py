"""Replication faults with real broker processes: killed, frozen and restarted followers."""

from __future__ import annotations

import os
import signal

import pytest

from purgatory.clients import AdminClient, Connection, Consumer, Producer
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import encode_batch
from tests.cluster.process_cluster import (
    ProcessCluster,
    create,
    isr,
    processes,
    produce_while,
    ready,
)
from tests.support import wait_until

pytestmark = pytest.mark.cluster
__all__ = ["processes"]  # the fixture


async def test_producing_goes_on_when_a_follower_dies_and_every_acked_record_survives(
    processes: ProcessCluster,
) -> None:
    await ready(processes)
    leader, victim = await create(processes, "load", min_isr=2)
    async with Producer(
        processes.bootstrap,
        acks=-1,
        linger_ms=1,
        request_timeout_ms=5000,
        delivery_timeout_ms=20_000,
        retry_backoff_ms=50,
    ) as producer:
        acked, failed = await produce_while(producer, "load", 0, lambda: processes.kill(victim))
    assert len(acked) >= 1400 and failed <= 100
    assert victim not in isr(processes, leader, "load")
    # Every acknowledged record is there, at its offset, once.
    async with Consumer(
        processes.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as consumer:
        consumer.assign([("load", 0)])
        seen: dict[int, bytes] = {}
        while len(seen) < max(acked) + 1:
            batch = await consumer.poll(timeout_ms=2000)
            assert batch, "the log ends before every acknowledged offset"
            for record in batch:
                assert record.offset not in seen
                seen[record.offset] = record.value or b""
    assert list(seen) == sorted(seen)
    assert all(seen[offset] == value for offset, value in acked.items())
    # The follower comes back empty, catches up and rejoins the ISR.
    processes.start(victim)
    end = processes.partition_state(leader, "load")["log_end_offset"]
    await wait_until(lambda: processes.healthy(victim), timeout=30, message="victim healthy")
    await wait_until(
        lambda: victim in isr(processes, leader, "load"),
        timeout=30,
        message="victim back in the ISR",
    )
    assert processes.partition_state(victim, "load")["log_end_offset"] >= end


async def test_too_few_replicas_alive_refuses_acks_all(processes: ProcessCluster) -> None:
    await ready(processes)
    leader, victim = await create(processes, "strict", min_isr=3)
    processes.kill(victim)
    await wait_until(
        lambda: len(isr(processes, leader, "strict")) == 2, timeout=20, message="ISR to shrink"
    )
    conn = await Connection.open("127.0.0.1", processes.ports[leader])
    batch = encode_batch([(None, b"must not be acknowledged")])
    request = m.ProduceRequest(
        -1, 5000, [m.TopicProduceData("strict", [m.PartitionProduceData(0, batch)])]
    )
    response = await conn.send(ApiKey.PRODUCE, request)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    await conn.close()
    assert processes.partition_state(leader, "strict")["log_end_offset"] == 0
    with pytest.raises(KafkaError, match="NOT_ENOUGH_REPLICAS"):
        async with Producer(
            processes.bootstrap, acks=-1, delivery_timeout_ms=1500, retry_backoff_ms=100
        ) as p:
            await p.send_and_wait("strict", b"nor this", partition=0)


async def test_a_frozen_follower_leaves_the_isr_and_returns_after_it_catches_up(
    processes: ProcessCluster,
) -> None:
    await ready(processes)
    leader, victim = await create(processes, "slow", min_isr=1)
    os.kill(processes.procs[victim].pid, signal.SIGSTOP)  # a hung, not dead, follower
    async with Producer(
        processes.bootstrap, acks=-1, linger_ms=0, request_timeout_ms=5000
    ) as producer:
        for i in range(20):
            await producer.send_and_wait("slow", f"while frozen {i}".encode(), partition=0)
    assert victim not in isr(processes, leader, "slow")
    os.kill(processes.procs[victim].pid, signal.SIGCONT)
    await wait_until(
        lambda: victim in isr(processes, leader, "slow"), timeout=30, message="back in the ISR"
    )
    assert processes.partition_state(victim, "slow")["log_end_offset"] == 20


async def test_a_killed_controller_is_replaced_and_topics_can_still_be_created(
    processes: ProcessCluster,
) -> None:
    await ready(processes)
    await create(processes, "before", min_isr=1)
    old = processes.controller()
    processes.kill(old)
    others = [b for b in range(3) if b != old]
    heir = processes.controller(among=others)  # the two left are a majority: one is elected
    async with AdminClient(",".join(f"127.0.0.1:{processes.ports[b]}" for b in others)) as admin:
        await admin.create_topic("after", 1, 2)

        async def both_listed() -> bool:
            return {"before", "after"} <= set(await admin.list_topics())

        await wait_until(both_listed, timeout=20, message="both topics listed")
    await wait_until(
        lambda: all(processes.state(b)["controller_id"] == heir for b in others),
        timeout=20,
        message="both follow the new controller",
    )
    follower = next(b for b in others if b != heir)
    conn = await Connection.open("127.0.0.1", processes.ports[follower])
    response = await conn.send(ApiKey.METADATA, m.MetadataRequest(["after"]))
    await conn.close()
    assert response.topics[0].error_code == 0 and response.controller_id == heir
