"""The classic consumer's fetcher semantics: chunk queue, MaxLag vs the offset checker's lag."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Consumer, Producer
from tests.support import bootstrap, free_ports, wait_until

DOC = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
RECORDS_PER_BATCH = 10


async def fill(broker: Broker, topic: str, batches: int) -> None:
    async with Producer(bootstrap([broker]), linger_ms=0, batch_size=1 << 20) as producer:
        for b in range(batches):
            futures = [
                await producer.send(topic, b"v" * 50, partition=0) for _ in range(RECORDS_PER_BATCH)
            ]
            await producer.flush()
            assert all(f.result().offset >= 0 for f in futures), b


async def checker_lag(broker: Broker, group: str, topic: str) -> int:
    """The offset checker's figure: log end - committed offset."""
    async with AdminClient(bootstrap([broker])) as admin:
        committed = await admin.group_offsets(group, [(topic, 0)])
        end = (await admin.log_end_offsets([(topic, 0)]))[(topic, 0)]
    return end - committed[(topic, 0)][0]


async def consume_slowly(consumer: Consumer, polls: int) -> None:
    for _ in range(polls):
        batch = await consumer.poll(timeout_ms=2000, max_records=RECORDS_PER_BATCH)
        assert len(batch) == RECORDS_PER_BATCH
        await consumer.commit()


async def test_a_large_queue_hides_a_slow_application_from_maxlag(broker: Broker) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await fill(broker, "t", 100)
    async with Consumer(
        bootstrap([broker]),
        group_id="slow",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        queued_max_message_chunks=1000,
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign([("t", 0)])
        await consume_slowly(consumer, 3)
        # The fetcher has everything: MaxLag says "caught up" ...
        await wait_until(lambda: consumer.max_lag() == 0, message="the fetcher at the HW")
        # ... while the application has consumed 30 of 1000, which the checker sees.
        assert await checker_lag(broker, "slow", "t") == 970
        assert consumer.consumer_lag(("t", 0)) == 970
        await fill(broker, "t", 50)  # the backlog grows; MaxLag stays near zero
        await wait_until(
            lambda: consumer.highwater(("t", 0)) == 1500 and consumer.max_lag() == 0,
            message="the fetcher at the new HW",
        )
        assert await checker_lag(broker, "slow", "t") == 1470


async def test_small_chunks_and_a_queue_of_two_make_maxlag_track_the_application(
    broker: Broker,
) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await fill(broker, "t", 100)
    bound = 2
    async with Consumer(
        bootstrap([broker]),
        group_id="tight",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        queued_max_message_chunks=bound,
        fetch_message_max_bytes=700,  # one 10-record batch per chunk
        fetch_max_wait_ms=50,
    ) as consumer:
        consumer.assign([("t", 0)])
        for _ in range(5):
            await consume_slowly(consumer, 2)
            await wait_until(lambda: consumer.queued_chunks() == bound, message="a full queue")
            checker, fetcher = await checker_lag(broker, "tight", "t"), consumer.max_lag()
            # Between them: the queued chunks, and the one blocked in put once the fetcher has
            # it (its position moves before the put, as in Kafka's fetcher). Nothing more.
            assert bound * RECORDS_PER_BATCH <= checker - fetcher <= (bound + 1) * RECORDS_PER_BATCH
            assert checker >= 800
        assert consumer.queue_high_water <= bound  # the queue never held more


async def test_auto_commit_commits_what_was_consumed(broker: Broker) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await fill(broker, "t", 3)
    async with Consumer(
        bootstrap([broker]),
        group_id="auto",
        auto_offset_reset="earliest",
        auto_commit_interval_ms=20,
        fetch_max_wait_ms=20,
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await consumer.poll(timeout_ms=2000, max_records=15)) == 15
        await wait_until(
            lambda: consumer.commits is not None and consumer.commits.committed.get(("t", 0)) == 15,
            message="auto-commit",
        )
        assert len(await consumer.poll(timeout_ms=2000, max_records=5)) == 5
    # closing commits the rest of what was consumed
    assert await checker_lag(broker, "auto", "t") == 10


async def test_seeking_drops_what_was_queued_from_the_old_position(broker: Broker) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await fill(broker, "t", 5)
    async with Consumer(
        bootstrap([broker]),
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        queued_max_message_chunks=10,
        fetch_message_max_bytes=700,
    ) as consumer:
        consumer.assign([("t", 0)])
        first = await consumer.poll(timeout_ms=2000, max_records=10)
        assert [r.offset for r in first] == list(range(10))
        await wait_until(lambda: consumer.queued_chunks() >= 2, message="chunks queued")
        consumer.seek(("t", 0), 3)
        again = await consumer.poll(timeout_ms=2000, max_records=4)
        assert [r.offset for r in again] == [3, 4, 5, 6]


async def test_the_consumer_serves_its_lag_as_prometheus_metrics(broker: Broker) -> None:
    from purgatory.clients.consumer_metrics import serve_metrics

    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await fill(broker, "t", 10)
    [port] = free_ports(1)
    async with Consumer(
        bootstrap([broker]),
        auto_offset_reset="earliest",
        fetch_max_wait_ms=20,
        queued_max_message_chunks=50,
    ) as consumer:
        consumer.assign([("t", 0)])
        await consumer.poll(timeout_ms=2000, max_records=10)
        await wait_until(lambda: consumer.max_lag() == 0, message="fetched all")
        server = await serve_metrics(consumer, "127.0.0.1", port)
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}/metrics") as response,
            ):
                text = await response.text()
        finally:
            await server.stop()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    lag = {s.labels["partition"]: s.value for s in families["purgatory_consumer_lag"].samples}
    assert lag == {"0": 90}
    assert families["purgatory_consumer_fetcher_max_lag"].samples[0].value == 0
    for name in families:
        assert re.search(rf"`{name}`", DOC), f"{name} is not in docs/metrics.md"
