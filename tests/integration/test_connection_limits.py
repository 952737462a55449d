"""Connection limits as Kafka has them: max.connections.per.ip (and its overrides) closes
one connection too many at once, connections.max.idle.ms closes connections without
requests; both counted and logged, and the broker keeps serving."""

from __future__ import annotations

import asyncio
import time

from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from tests.support import bootstrap, running_cluster, wait_until


async def connect(broker: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", broker.port)


async def closed_by_broker(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(1), 10) == b""


async def test_one_connection_over_the_per_ip_limit_is_closed_at_once() -> None:
    async with running_cluster(1, max_connections_per_ip=2) as (broker,):
        kept = [await connect(broker) for _ in range(2)]
        await wait_until(lambda: broker.socket_server.per_ip.get("127.0.0.1") == 2)
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)
        writer.close()
        assert broker.socket_server.refused == 1 and len(broker.socket_server.connections) == 2
        events = [
            e for e in RECENT_LOGS.events(broker.broker_id) if e["event"] == "connection_refused"
        ]
        assert events and events[-1]["limit"] == 2 and events[-1]["ip"] == "127.0.0.1"
        # They close: the address is under its limit again, and a client is served.
        for _, kept_writer in kept:
            kept_writer.close()
        await wait_until(lambda: "127.0.0.1" not in broker.socket_server.per_ip)
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("still-served", 1)


async def test_an_override_raises_the_limit_for_one_address() -> None:
    overrides = {"max_connections_per_ip": 1, "max_connections_per_ip_overrides": "127.0.0.1:3"}
    async with running_cluster(1, **overrides) as (broker,):
        kept = [await connect(broker) for _ in range(3)]
        await wait_until(lambda: broker.socket_server.per_ip.get("127.0.0.1") == 3)
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)
        assert broker.socket_server.refused == 1
        for _, w in [*kept, (reader, writer)]:
            w.close()


async def test_a_connection_without_requests_is_closed_after_the_idle_limit() -> None:
    async with running_cluster(1, connections_max_idle_ms=200) as (broker,):
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)  # within 1.25 x the limit, bounded by the wait
        assert broker.socket_server.idle_closed >= 1
        writer.close()
        # A client that keeps using its connection is not disturbed.
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("busy", 1)
            until = time.monotonic() + 0.6  # three idle limits of requests back to back
            while time.monotonic() < until:
                await admin.describe_topics(["busy"])
            await admin.create_topic("busy-after", 1)
