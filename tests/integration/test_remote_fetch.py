"""Tiered topics against live in-process brokers: backfills through the RemoteFetch
purgatory, a remote store slower than remote.fetch.max.wait.ms, a full reader queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Connection, Consumer, Producer
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import decode_records
from tests.support import bootstrap, running_cluster, wait_until

TIERED = {
    "remote.log.storage.enable": "true",
    "segment.bytes": "2048",
    "local.retention.bytes": "0",  # every copied segment leaves the local tier
}
FAST_TIERING = {"remote.log.manager.task.interval.ms": 20, "remote.storage.latency.ms": 5}


@pytest.fixture
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[Broker]:
    overrides: dict[str, Any] = {**FAST_TIERING, **getattr(request, "param", {})}
    async with running_cluster(1, **overrides) as brokers:
        yield brokers[0]


async def tiered_topic(
    broker: Broker, topic: str, partitions: int, records: int, **configs: str
) -> None:
    """Create a tiered topic, fill each partition with ``records`` and wait until all but
    its active segment are in the remote tier only."""
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic(topic, partitions, configs={**TIERED, **configs})
    async with Producer(bootstrap([broker]), linger_ms=0, batch_size=512) as producer:
        for i in range(records):
            for p in range(partitions):
                await producer.send(topic, f"{p}-{i}".encode() * 8, partition=p)
        await producer.flush()

    def tiered_down() -> bool:
        rows = [r for r in broker.state().partitions if r.topic == topic]
        return len(rows) == partitions and all(
            r.local_log_start_offset > r.log_start_offset == 0 for r in rows
        )

    await wait_until(tiered_down, message=f"{topic} moved to the remote tier")


async def backfill(broker: Broker, topic: str, partitions: int, records: int) -> dict[int, list]:
    """Consume every partition from offset 0 to its end; the values by partition."""
    got: dict[int, list] = {p: [] for p in range(partitions)}
    async with Consumer(
        bootstrap([broker]), auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek((topic, p), 0)

        async def done() -> bool:
            for record in await consumer.poll(timeout_ms=200):
                got[record.partition].append((record.offset, record.value))
            return all(len(v) >= records for v in got.values())

        await wait_until(done, timeout=30, message="the backfill")
    return got


def counter(broker: Broker, name: str) -> float:
    for family in broker.metrics.registry.collect():
        if family.name == name:
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError(f"no metric {name}")


def purgatory_gauge(broker: Broker, name: str) -> float:
    for family in broker.metrics.registry.collect():
        if family.name == name:
            return sum(
                s.value for s in family.samples if s.labels.get("purgatory") == "RemoteFetch"
            )
    raise AssertionError(f"no metric {name}")


async def test_a_backfill_from_offset_zero_gets_every_record_in_order_across_tiers(
    broker: Broker,
) -> None:
    await tiered_topic(broker, "t", 3, 300)
    got = await backfill(broker, "t", 3, 300)
    for p, values in got.items():
        assert [o for o, _ in values] == list(range(300)), f"gaps or repeats in partition {p}"
        assert [v for _, v in values] == [f"{p}-{i}".encode() * 8 for i in range(300)]
    assert counter(broker, "purgatory_remote_fetch_requests") > 0
    assert counter(broker, "purgatory_remote_fetch_bytes") > 0
    assert counter(broker, "purgatory_remote_copy_requests") > 0
    assert counter(broker, "purgatory_remote_fetch_expirations") == 0
    # ListOffsets and fetch responses report the start of the whole log.
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        listed = await conn.send(
            ApiKey.LIST_OFFSETS,
            m.ListOffsetsRequest(
                -1, [m.ListOffsetsTopic("t", [m.ListOffsetsPartition(0, m.EARLIEST_TIMESTAMP)])]
            ),
        )
        assert listed.topics[0].partitions[0].offset == 0
        fetched = await conn.send(
            ApiKey.FETCH,
            m.FetchRequest(-1, 0, 1, 1 << 20, [m.FetchTopic("t", [m.FetchPartition(0, 0, 4096)])]),
        )
        part = fetched.responses[0].partitions[0]
        assert part.log_start_offset == 0 and decode_records(part.records)[0].offset == 0
        assert fetched.wait_time_ms >= 4  # it waited out a 5 ms remote read in RemoteFetch
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "broker",
    [{"remote.storage.latency.ms": 300, "remote.fetch.max.wait.ms": 60}],
    indirect=True,
)
async def test_a_slow_remote_store_expires_remote_fetches_until_the_timeout_is_raised(
    broker: Broker,
) -> None:
    await tiered_topic(broker, "t", 4, 200)
    consumer = Consumer(bootstrap([broker]), auto_offset_reset="earliest", fetch_max_wait_ms=100)
    async with consumer:
        consumer.assign([("t", p) for p in range(4)])
        for p in range(4):
            consumer.seek(("t", p), 0)
        # Every remote read outlasts the 60 ms timeout: fetches expire, come back empty, and
        # the consumer fetches again, getting nothing below the local log start.
        await consumer.poll(timeout_ms=10)
        await wait_until(
            lambda: counter(broker, "purgatory_remote_fetch_expirations") >= 8,
            message="remote fetches expiring",
        )
        assert all(consumer.position(("t", p)) == 0 for p in range(4))
        assert purgatory_gauge(broker, "purgatory_expirations") >= 8
        # Raise the timeout at run time, as an operator would: the backfill completes.
        await broker.change_config("remote.fetch.max.wait.ms", "5000")
        got: dict[int, int] = dict.fromkeys(range(4), 0)

        async def caught_up() -> bool:
            for record in await consumer.poll(timeout_ms=200):
                assert record.offset == got[record.partition]
                got[record.partition] += 1
            return all(n == 200 for n in got.values())

        await wait_until(caught_up, timeout=30, message="the backfill after the change")
    # The same backfill again, from scratch: not one expiration.
    before = counter(broker, "purgatory_remote_fetch_expirations")
    again = await backfill(broker, "t", 4, 200)
    assert all(len(v) == 200 for v in again.values())
    assert counter(broker, "purgatory_remote_fetch_expirations") == before


@pytest.mark.parametrize(
    "broker",
    [
        {
            "remote.storage.latency.ms": 60_000,
            "remote.log.reader.threads": 1,
            "remote.log.reader.max.pending.tasks": 1,
            "remote.fetch.max.wait.ms": 60_000,
        }
    ],
    indirect=True,
)
async def test_a_full_reader_queue_errors_that_partition_at_once_and_serves_the_rest(
    broker: Broker,
) -> None:
    # Tier the data down while reads are fast, then make the store hang.
    await broker.change_config("remote.storage.latency.ms", "1")
    await tiered_topic(broker, "cold", 3, 200)
    await broker.change_config("remote.storage.latency.ms", "60000")
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("hot", 1)
    async with Producer(bootstrap([broker]), linger_ms=0) as producer:
        await (await producer.send("hot", b"fresh", partition=0))

    def fetch(*partitions: tuple[str, int]) -> m.FetchRequest:
        topics: dict[str, list[m.FetchPartition]] = {}
        for topic, p in partitions:
            topics.setdefault(topic, []).append(m.FetchPartition(p, 0, 1 << 20))
        return m.FetchRequest(
            -1, 500, 1, 1 << 20, [m.FetchTopic(t, ps) for t, ps in topics.items()]
        )

    # Separate connections: responses on one connection come back in order.
    conns = [await Connection.open("127.0.0.1", broker.port) for _ in range(3)]
    try:
        running = asyncio.ensure_future(conns[0].send(ApiKey.FETCH, fetch(("cold", 0))))
        queued = asyncio.ensure_future(conns[1].send(ApiKey.FETCH, fetch(("cold", 1))))
        readers = broker.replica_manager.remote_log_manager.readers
        await wait_until(lambda: readers.running == 1 and readers.queue_size == 1)
        response = await asyncio.wait_for(
            conns[2].send(ApiKey.FETCH, fetch(("cold", 2), ("hot", 0))), 10
        )
        by_topic = {t.topic: t.partitions[0] for t in response.responses}
        assert by_topic["cold"].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert by_topic["hot"].error_code == ErrorCode.NONE
        assert [r.value for r in decode_records(by_topic["hot"].records)] == [b"fresh"]
        assert not running.done() and not queued.done()  # still waiting on the store
        assert counter(broker, "purgatory_remote_fetch_rejected") == 1
        assert purgatory_gauge(broker, "purgatory_delayed_operations") == 2
    finally:
        for conn in conns:
            await conn.close()
