"""One broker of three is dead: clients work with the partitions that have a leader, retry
the others, and say so once per change (not at every retry)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import structlog

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Consumer, Producer
from purgatory.protocol.errors import ErrorCode
from tests.integration.test_console_producer import cli
from tests.support import bootstrap, running_cluster, wait_until

FAST_FENCING = {"broker_heartbeat_interval_ms": 50, "broker_session_timeout_ms": 600}
RECORDS = 5


def led_by(brokers: list[Broker], topic: str, broker_id: int) -> int:
    state = brokers[0].metadata.topics[topic]
    return next(p.partition_index for p in state.partitions if p.leader_id == broker_id)


@pytest.fixture
async def one_dead() -> AsyncIterator[tuple[list[Broker], int, int]]:
    """Three brokers, topic `orders` (3 partitions, one replica each) with records and
    group `g`'s commits on every partition; then broker 2 dies. Yields the live brokers,
    a partition led by a live broker and the dead broker's partition."""
    async with running_cluster(3, **FAST_FENCING) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("orders", 3, 1)
        async with Producer(bootstrap(brokers), linger_ms=0) as producer:
            for p in range(3):
                for i in range(RECORDS):
                    await producer.send_and_wait("orders", b"p%d-%d" % (p, i), partition=p)
        async with Consumer(bootstrap(brokers), group_id="g") as consumer:
            await consumer.commit({("orders", p): 2 for p in range(3)})
        alive, dead = led_by(brokers, "orders", 0), led_by(brokers, "orders", 2)
        await brokers[2].stop()
        await wait_until(
            lambda: 2 not in brokers[0].metadata.live_brokers, message="broker 2 seen as dead"
        )
        yield brokers[:2], alive, dead


async def test_consume_one_partition_whose_leader_lives(
    one_dead: tuple[list[Broker], int, int],
) -> None:
    brokers, alive, _ = one_dead
    code, out, err = await cli(
        "consume", "orders", "--partition", str(alive), "--from-beginning",
        "--max-records", str(RECORDS), "--bootstrap", bootstrap(brokers),
    )  # fmt: skip
    assert code == 0, err
    assert out.split() == [f"p{alive}-{i}" for i in range(RECORDS)]


async def test_a_running_consumer_keeps_reading_and_reports_a_dead_partition_once(
    one_dead: tuple[list[Broker], int, int],
) -> None:
    brokers, _, dead = one_dead
    async with Consumer(
        bootstrap(brokers), auto_offset_reset="earliest", retry_backoff_ms=20
    ) as consumer:
        with structlog.testing.capture_logs() as logs:
            await consumer.assign_topics(["orders"])
            values: list[bytes] = []
            for _ in range(60):  # 60 polls: many retries of the dead partition
                values += [r.value or b"" for r in await consumer.poll(timeout_ms=50)]
            assert ("orders", dead) in consumer.unavailable()
    assert len(values) == 2 * RECORDS
    assert not any(v.startswith(b"p%d-" % dead) for v in values)
    reports = [e for e in logs if e["event"] == "partition_unavailable"]
    assert [e["partition"] for e in reports] == [f"orders-{dead}"], reports


async def test_consumer_groups_describe_shows_the_partitions_it_can(
    one_dead: tuple[list[Broker], int, int],
) -> None:
    brokers, alive, dead = one_dead
    code, out, err = await cli(
        "consumer-groups", "--describe", "--group", "g", "--topic", "orders", "--json",
        "--bootstrap", bootstrap(brokers),
    )  # fmt: skip
    assert code == 0, err
    import json

    rows = {r["partition"]: r for r in json.loads(out)}
    assert rows[alive]["offset"] == 2 and rows[alive]["lag"] == RECORDS - 2
    # The commit lives with the group's coordinator; the log end is what cannot be read.
    assert rows[dead]["error"] == "LEADER_NOT_AVAILABLE" and rows[dead]["offset"] == 2
    assert rows[dead]["lag"] is None
    assert f"orders-{dead}" in err


async def test_keyless_records_go_to_partitions_that_have_a_leader(
    one_dead: tuple[list[Broker], int, int],
) -> None:
    brokers, _, dead = one_dead
    async with Producer(bootstrap(brokers), linger_ms=0, batch_size=100) as producer:
        await producer.cluster.refresh(["orders"])
        metadata = [await producer.send_and_wait("orders", b"x" * 60) for _ in range(20)]
    assert {r.partition for r in metadata} == {0, 1, 2} - {dead}


async def test_the_offsets_topic_waits_for_the_whole_cluster_rather_than_fewer_replicas() -> None:
    """A group looked up first while one broker of three is away gets no coordinator (as
    from Kafka, whose controller refuses a replication factor above the live brokers)
    rather than an `__consumer_offsets` with two replicas for ever."""
    async with running_cluster(3, **FAST_FENCING) as brokers:
        await brokers[2].stop()
        live = brokers[:2]
        await wait_until(
            lambda: 2 not in live[0].metadata.live_brokers, message="broker 2 seen as dead"
        )
        coordinator, forwarding = live[0].group_coordinator, live[0].forwarding
        assert coordinator.find_coordinator("g") == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        await wait_until(lambda: not forwarding._auto_creating, message="the creation's answer")
        assert coordinator.find_coordinator("g") == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        await wait_until(lambda: not forwarding._auto_creating, message="the creation's answer")
        assert OFFSETS_TOPIC not in live[0].metadata.topics
