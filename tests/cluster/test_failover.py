"""Leader failover with real broker processes: a killed leader is replaced from the ISR,
and a broker that restarts (its in-memory logs gone) never leads or truncates records that
were acknowledged."""

from __future__ import annotations

import pytest

from clients import AdminClient, Consumer, Producer
from tests.cluster.process_cluster import ProcessCluster, ready
from tests.support import wait_until

pytestmark = pytest.mark.cluster


async def read_all(bootstrap: str, topic: str, partition: int, end: int) -> dict[int, bytes]:
    """Every record of a partition below ``end``, by offset; fails on a gap or a repeat."""
    seen: dict[int, bytes] = {}
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([(topic, partition)])
        while len(seen) < end:
            batch = await c.poll(timeout_ms=5000)
            assert batch, f"{topic}-{partition} ends at {len(seen)}, before offset {end}"
            for record in batch:
                assert record.offset not in seen
                seen[record.offset] = record.value or b""
    assert list(seen) == list(range(end))
    return seen


async def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    async with AdminClient(bootstrap) as admin:
        meta = await admin.describe_topics([topic])
    return {p.partition_index: p.leader_id for p in meta.topics[0].partitions}


@pytest.mark.parametrize("victim", [0, 1], ids=["the-controller", "another-broker"])
async def test_a_restarted_leader_never_leads_again_nor_makes_acknowledged_records_vanish(
    victim: int,
) -> None:
    """The case from the issue: RF 3, min ISR 2, records acknowledged with acks=all, their
    leader killed and restarted at once (within the session timeout). It comes back
    empty: it must not lead, and the followers must keep every acknowledged record."""
    cluster = ProcessCluster()
    try:
        for i in range(3):
            cluster.start(i)
        await ready(cluster)
        async with AdminClient(cluster.bootstrap) as admin:
            await admin.create_topic("acked", 3, 3, {"min.insync.replicas": "2"})
        acked: dict[int, dict[int, bytes]] = {p: {} for p in range(3)}
        async with Producer(cluster.bootstrap, acks=-1, linger_ms=0) as producer:
            for p in range(3):
                for i in range(5):
                    value = f"p{p}-{i}".encode()
                    acked[p][(await producer.send_and_wait("acked", value, partition=p)).offset] = (
                        value
                    )
        led = [
            p
            for p, leader in (await leaders(cluster.bootstrap, "acked")).items()
            if leader == victim
        ]
        assert led
        cluster.kill(victim)
        cluster.start(victim)
        await wait_until(lambda: cluster.healthy(victim), timeout=30, message="restarted")
        await wait_until(
            lambda: all(p["role"] == "follower" for p in cluster.state(victim)["partitions"]),
            timeout=30,
            message="the restarted broker leads nothing",
        )
        bootstrap = cluster.bootstrap
        async with Producer(
            bootstrap, acks=-1, linger_ms=0, delivery_timeout_ms=30_000
        ) as producer:
            for p in range(3):
                after = await producer.send_and_wait("acked", b"after", partition=p)
                assert after.offset == 5, "an offset was reused"
        for p in range(3):
            seen = await read_all(bootstrap, "acked", p, 6)
            assert all(seen[offset] == value for offset, value in acked[p].items())
        # The restarted broker catches up from the new leaders and rejoins every ISR.
        await wait_until(
            lambda: all(
                victim in p["isr"] and p["log_end_offset"] == 6
                for p in cluster.state(victim)["partitions"]
            ),
            timeout=30,
            message="the restarted broker back in every ISR with every record",
        )
    finally:
        cluster.stop_all()


async def test_killing_a_leader_under_acks_all_load_loses_nothing() -> None:
    cluster = ProcessCluster()
    try:
        for i in range(3):
            cluster.start(i)
        await ready(cluster)
        async with AdminClient(cluster.bootstrap) as admin:
            await admin.create_topic("load", 3, 3, {"min.insync.replicas": "2"})
        # A partition led by another broker than the controller (broker 0).
        partition, leader = next(
            (p, b) for p, b in (await leaders(cluster.bootstrap, "load")).items() if b != 0
        )
        acked: dict[int, bytes] = {}
        async with Producer(
            cluster.bootstrap,
            acks=-1,
            linger_ms=1,
            request_timeout_ms=3000,
            delivery_timeout_ms=30_000,
            retry_backoff_ms=50,
        ) as producer:
            futures = []
            for i in range(1500):
                futures.append(
                    await producer.send("load", f"record-{i}".encode(), partition=partition)
                )
                if i == 500:
                    cluster.kill(leader)
                if i % 50 == 0:
                    await producer.flush()
            await producer.flush()
            failed = 0
            for i, future in enumerate(futures):
                if future.exception() is None:
                    acked[future.result().offset] = f"record-{i}".encode()
                else:
                    failed += 1
        assert failed == 0, f"{failed} records not delivered (retriable errors are retried)"
        new_leader = (await leaders(cluster.bootstrap, "load"))[partition]
        assert new_leader not in (-1, leader)
        seen = await read_all(cluster.bootstrap, "load", partition, max(acked) + 1)
        assert all(seen[offset] == value for offset, value in acked.items())
    finally:
        cluster.stop_all()
