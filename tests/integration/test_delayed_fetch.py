"""Long-poll fetches waiting in the Fetch purgatory, against a live broker."""

from __future__ import annotations

import asyncio
import gc
import sys
import time

from purgatory.broker.server import Broker
from purgatory.clients import Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import decode_records
from tests.integration.test_bad_input import answer, frame
from tests.integration.test_produce_fetch import connect, create, produce_request
from tests.support import wait_until


def long_poll(
    topic: str,
    offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    partitions: tuple[int, ...] = (0,),
) -> m.FetchRequest:
    return m.FetchRequest(
        -1,
        max_wait_ms,
        min_bytes,
        1 << 20,
        [m.FetchTopic(topic, [m.FetchPartition(p, offset, 1 << 20) for p in partitions])],
    )


async def parked(broker: Broker, count: int = 1) -> None:
    await wait_until(
        lambda: broker.replica_manager.fetch_purgatory.delayed == count,
        message=f"{count} fetch(es) parked in purgatory",
    )


async def test_a_fetch_waits_for_min_bytes_and_a_produce_completes_it_early(broker: Broker) -> None:
    await create(broker, "t")
    consumer, producer = await connect(broker), await connect(broker)
    started = time.monotonic()
    fetch = consumer.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000))
    await parked(broker)
    assert not fetch.done()
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"wake up"]))
    response = await asyncio.wait_for(fetch, 10)
    elapsed_ms = (time.monotonic() - started) * 1000
    part = response.responses[0].partitions[0]
    assert [r.value for r in decode_records(part.records)] == [b"wake up"]
    assert 0 <= response.wait_time_ms <= elapsed_ms + 1
    purgatory = broker.replica_manager.fetch_purgatory
    assert (purgatory.delayed, purgatory.watched, purgatory.expirations) == (0, 0, 0)
    await consumer.close()
    await producer.close()


async def test_a_fetch_that_finds_nothing_expires_at_max_wait_and_says_how_long_it_waited(
    broker: Broker,
) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    started = time.monotonic()
    response = await conn.send(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=200))
    elapsed_ms = (time.monotonic() - started) * 1000
    assert response.responses[0].partitions[0].records == b""
    assert 199 <= response.wait_time_ms <= elapsed_ms + 1  # the loop clock counts whole ms
    assert elapsed_ms >= 199
    assert broker.replica_manager.fetch_purgatory.expirations == 1
    assert broker.replica_manager.replication_metrics.fetch_expirations == {
        "consumer": 1,
        "follower": 0,
    }
    await conn.close()


async def test_min_bytes_counts_across_partitions(broker: Broker) -> None:
    await create(broker, "t", partitions=2)
    conn, producer = await connect(broker), await connect(broker)
    fetch = conn.request(
        ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000, min_bytes=150, partitions=(0, 1))
    )
    await parked(broker)
    # (On its own connection: a produce on the fetch's would be answered after the fetch.)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"x" * 60]))  # 110 bytes
    assert broker.replica_manager.fetch_purgatory.delayed == 1 and not fetch.done()
    await producer.send(ApiKey.PRODUCE, produce_request("t", 1, [b"y" * 60]))
    response = await asyncio.wait_for(fetch, 10)
    assert sum(len(p.records) for p in response.responses[0].partitions) == 220
    await conn.close()
    await producer.close()


async def test_a_v0_fetch_waits_too_and_gets_a_v0_answer(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    fetch = conn.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000), version=0)
    await parked(broker)
    producer = await connect(broker)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"old client"]))
    await producer.close()
    response = await asyncio.wait_for(fetch, 10)
    assert type(response) is m.FetchResponseV0
    assert decode_records(response.responses[0].partitions[0].records)[0].value == b"old client"
    await conn.close()


async def test_responses_behind_a_parked_fetch_wait_their_turn(broker: Broker) -> None:
    await create(broker, "t")
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    writer.write(
        frame([1, 1, 1, "x", [-1, 30_000, 1, 1 << 20, [["t", [[0, 0, 1 << 20]]]]]])
        + frame([18, 0, 2, "x", []])
    )
    await parked(broker)
    producer = await connect(broker)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"go"]))
    first, second = await answer(reader), await answer(reader)
    assert (first[0], second[0]) == (1, 2)
    writer.close()
    await producer.close()


async def test_a_parked_fetch_completes_at_once_when_its_partition_goes_away(
    broker: Broker,
) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    fetch = conn.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000))
    await parked(broker)
    # The topic is deleted: once that is committed, the partition is gone here.
    admin = await connect(broker)
    deleted = await admin.send(ApiKey.DELETE_TOPICS, m.DeleteTopicsRequest(["t"]))
    assert deleted.responses[0].error_code == ErrorCode.NONE
    response = await asyncio.wait_for(fetch, 10)
    await admin.close()
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert response.wait_time_ms < 30_000
    await conn.close()


async def test_waiting_shows_in_purgatory_gauges_and_remote_time(broker: Broker) -> None:
    await create(broker, "t", partitions=3)
    conn = await connect(broker)
    fetch = conn.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000, partitions=(0, 1, 2)))
    await parked(broker)
    purgatory = broker.replica_manager.fetch_purgatory
    assert (purgatory.watched, purgatory.watched_keys) == (3, 3)
    producer = await connect(broker)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 2, [b"z"]))
    await asyncio.wait_for(fetch, 10)
    await producer.close()
    times = broker.metrics.for_request(ApiKey.FETCH, 1).times
    assert times.remote.sum > 0  # the wait is remote time ...
    assert times.total.sum >= times.remote.sum  # ... and total_local excludes it
    assert abs((times.total.sum - times.remote.sum) - times.total_local.sum) < 1e-6
    assert (purgatory.watched, purgatory.watched_keys, purgatory.completions) == (0, 0, 1)
    await conn.close()


async def test_a_closed_connection_leaves_nothing_behind(broker: Broker) -> None:
    await create(broker, "t")
    conn = await Connection.open("127.0.0.1", broker.port)
    conn.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=100)).add_done_callback(
        lambda f: f.exception()
    )
    await parked(broker)
    await conn.close()
    await wait_until(lambda: broker.replica_manager.fetch_purgatory.delayed == 0, message="expiry")
    assert broker.replica_manager.fetch_purgatory.watched == 0


async def test_the_consumer_records_total_and_true_fetch_latency(broker: Broker) -> None:
    from purgatory.clients import Consumer
    from tests.support import bootstrap

    await create(broker, "t")
    async with Consumer(
        bootstrap([broker]), fetch_max_wait_ms=60, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.poll(timeout_ms=60) == []  # starts the background fetcher
        await wait_until(
            lambda: (
                broker.broker_id in consumer.fetch_latency
                and sum(consumer.fetch_latency[broker.broker_id].total.counts) >= 3
            ),
            message="three idle long polls",
        )
        latency = consumer.fetch_latency[broker.broker_id]
    assert sum(latency.total.counts) >= 3
    assert latency.wait.sum >= 0.1  # the polls waited in purgatory ...
    assert latency.total.sum >= latency.wait.sum
    assert latency.true.sum < latency.total.sum / 2  # ... which true latency leaves out


async def test_a_woken_fetch_records_how_soon_its_response_followed(broker: Broker) -> None:
    await create(broker, "t")
    consumer, producer = await connect(broker), await connect(broker)
    fetch = consumer.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=30_000))
    await parked(broker)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"now"]))
    await asyncio.wait_for(fetch, 10)
    await wait_until(
        lambda: sum(broker.replica_manager.replication_metrics.fetch_wake[False].counts) == 1,
        message="the wake recorded",
    )
    assert sum(broker.replica_manager.replication_metrics.fetch_wake[True].counts) == 0
    # An expired fetch is not a wake.
    await consumer.send(ApiKey.FETCH, long_poll("t", 1, max_wait_ms=10))
    assert sum(broker.replica_manager.replication_metrics.fetch_wake[False].counts) == 1
    await consumer.close()
    await producer.close()


_PARKING_CLIENT = """
import asyncio, sys
from purgatory.clients import Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey

async def main(port, count):
    conns = [await Connection.open("127.0.0.1", port) for _ in range(count)]
    for conn in conns:  # each connection fully set up on the broker's side
        await conn.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
    print("open", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    request = m.FetchRequest(
        -1, 60_000, 1, 1 << 20, [m.FetchTopic("t", [m.FetchPartition(0, 0, 1 << 20)])]
    )
    parked = [asyncio.ensure_future(c.send(ApiKey.FETCH, request)) for c in conns]
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


async def test_a_parked_fetch_leaves_about_four_objects_for_the_collector(
    broker: Broker,
) -> None:
    """What the broker keeps for each waiting fetch and the cycle collector walks at every
    collection while it waits (thousands park at once; each collection stops the broker):
    the operation, its future, its place in the connection's answer order and the
    connection's map of pending futures. The request's body and the partitions it asks
    for stay out of the collector's sight (they were three lists more)."""
    count = 200
    await create(broker, "t")

    def tracked() -> int:
        gc.collect()
        gc.collect()  # a tuple of tuples is untracked at its second look
        return len(gc.get_objects())

    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PARKING_CLIENT,
        str(broker.port),
        str(count),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert client.stdin is not None and client.stdout is not None
    try:
        assert await asyncio.wait_for(client.stdout.readline(), 30) == b"open\n"
        idle = tracked()
        client.stdin.write(b"park\n")
        await parked(broker, count)
        per_fetch = (tracked() - idle) / count
        # 4 and the timing wheel's buckets (4.6 here; 7.4 when the body and the partitions
        # were lists)
        assert per_fetch < 5.5, f"{per_fetch:.2f} tracked objects per parked fetch"
    finally:
        client.stdin.write(b"done\n")
        await asyncio.wait_for(client.wait(), 30)


async def test_fetches_parked_by_connections_that_close_leave_the_purgatory_at_once(
    broker: Broker,
) -> None:
    """Issue 42: fetches sent on connections closed at once stayed parked for their whole
    max wait (an append then paid for every one). Now a closed connection's parked
    operations complete when it goes."""
    await create(broker, "t")
    conns = [await connect(broker) for _ in range(50)]
    for conn in conns:
        for _ in range(4):
            conn.request(ApiKey.FETCH, long_poll("t", 0, max_wait_ms=600_000))
    await parked(broker, 200)
    for conn in conns:
        await conn.close()
    purgatory = broker.replica_manager.fetch_purgatory
    await wait_until(lambda: purgatory.delayed == 0, message="abandoned fetches gone")
    assert purgatory.expirations == 0  # completed, not expired
    producer = await connect(broker)
    await producer.send(ApiKey.PRODUCE, produce_request("t", 0, [b"after"]))
    assert purgatory.watched == 0  # the append found no abandoned fetch to check
    await producer.close()
