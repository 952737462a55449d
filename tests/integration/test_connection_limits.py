"""Connection limits with Kafka's names: max.connections closes one connection too many
at once (except on a listener only brokers use), max.connections.per.ip (and its
overrides) closes one connection too many at once, connections.max.idle.ms closes connections without
requests; both counted and logged, and the broker keeps serving."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import generate_latest

from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from purgatory.experiments.processes import free_ports
from tests.support import bootstrap, running_cluster, wait_until


async def connect(broker: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", broker.port)


async def closed_by_broker(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(1), 10) == b""


async def test_one_connection_over_the_per_ip_limit_is_closed_at_once() -> None:
    async with running_cluster(1, max_connections_per_ip=2) as (broker,):
        kept = [await connect(broker) for _ in range(2)]
        await wait_until(lambda: broker.socket_server.quotas.per_ip.get("127.0.0.1") == 2)
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)
        writer.close()
        assert (
            broker.socket_server.quotas.refused["per_ip"] == 1
            and len(broker.socket_server.connections) == 2
        )
        events = [
            e for e in RECENT_LOGS.events(broker.broker_id) if e["event"] == "connection_refused"
        ]
        assert events and events[-1]["limit"] == 2 and events[-1]["ip"] == "127.0.0.1"
        # They close: the address is under its limit again, and a client is served.
        for _, kept_writer in kept:
            kept_writer.close()
        await wait_until(lambda: "127.0.0.1" not in broker.socket_server.quotas.per_ip)
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("still-served", 1)


async def test_an_override_raises_the_limit_for_one_address() -> None:
    overrides = {"max_connections_per_ip": 1, "max_connections_per_ip_overrides": "127.0.0.1:3"}
    async with running_cluster(1, **overrides) as (broker,):
        kept = [await connect(broker) for _ in range(3)]
        await wait_until(lambda: broker.socket_server.quotas.per_ip.get("127.0.0.1") == 3)
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)
        assert broker.socket_server.quotas.refused["per_ip"] == 1
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


async def test_at_max_connections_a_new_connection_is_closed_at_once() -> None:
    async with running_cluster(1, max_connections=3) as (broker,):
        server = broker.socket_server
        async with AdminClient(bootstrap([broker])) as admin:
            # The broker's connection to its controller (itself) is not counted.
            await admin.create_topic("first", 1)
        await wait_until(lambda: server.quotas.total == 0)
        kept = [await connect(broker) for _ in range(3)]
        await wait_until(lambda: server.quotas.total == 3)
        reader, writer = await connect(broker)
        assert await closed_by_broker(reader)  # not left waiting for an answer
        writer.close()
        assert server.quotas.refused == {"per_ip": 0, "max_connections": 1}
        events = [
            e
            for e in RECENT_LOGS.events(broker.broker_id)
            if e["event"] == "max_connections_reached"
        ]
        assert events and events[-1]["limit"] == 3
        text = generate_latest(broker.metrics.registry).decode()
        assert 'purgatory_connections_refused_total{reason="max_connections"} 1.0' in text
        # Slots free: the admin client's connections are accepted, and it is served.
        kept[0][1].close()
        kept[1][1].close()
        await wait_until(lambda: server.quotas.total == 1)
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("after-a-slot", 1)
        kept[2][1].close()


async def test_a_listener_only_brokers_use_is_not_held_to_max_connections() -> None:
    """Beside a client listener, the inter-broker listener is the brokers' (KIP-402): a
    full broker still takes connections there, so replication goes on whatever clients
    hold; the client listener closes one too many at once."""
    client, inter = free_ports(2)
    listeners = {
        "listeners": f"CLIENT://127.0.0.1:{client},BROKER://127.0.0.1:{inter}",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
    }
    async with running_cluster(1, lambda _: (inter, listeners), max_connections=2) as (broker,):
        server = broker.socket_server
        await wait_until(lambda: server.quotas.total == 0)
        held = [await asyncio.open_connection("127.0.0.1", client) for _ in range(2)]
        await wait_until(lambda: server.quotas.total == 2)
        reader, writer = await asyncio.open_connection("127.0.0.1", client)
        assert await closed_by_broker(reader)
        writer.close()
        async with AdminClient(f"127.0.0.1:{inter}") as admin:
            await admin.create_topic("through-the-brokers-listener", 1)
        assert server.quotas.refused["max_connections"] == 1
        for _, w in held:
            w.close()


async def test_a_client_calling_itself_a_broker_is_still_counted() -> None:
    """Brokers' own connections leave max.connections' count once they proved the cluster
    secret, but only as a cluster member's, and at most MAX_EXEMPT_PER_BROKER each: a
    flood of clients using a broker's client id, without the secret, is held at the limit
    all the same."""
    from purgatory.broker.network.connection_quotas import MAX_EXEMPT_PER_BROKER
    from purgatory.clients.cluster_auth import authenticate
    from purgatory.clients.connection import Connection
    from purgatory.protocol import messages as m
    from purgatory.protocol.api import ApiKey

    async with running_cluster(1) as (broker,):
        quotas = broker.socket_server.quotas
        await wait_until(lambda: quotas.total == 0)
        exempt_before = sum(quotas.exempted.values())
        opened = []
        for _ in range(3):  # a broker's client id, no secret: counted
            conn = await Connection.open("127.0.0.1", broker.port, client_id="broker-0")
            await conn.send(ApiKey.METADATA, m.MetadataRequest([], False))
            opened.append(conn)
        assert quotas.exempted.get(0, 0) == 0
        for claimed in [7] + [0] * (MAX_EXEMPT_PER_BROKER + 2):
            conn = await Connection.open("127.0.0.1", broker.port, client_id=f"broker-{claimed}")
            await authenticate(conn, "tests-cluster-secret", claimed)
            opened.append(conn)
        # 7 is no member; 0 is this broker, exempt up to the cap.
        exempt_now = quotas.exempted.get(0, 0)
        assert exempt_now == MAX_EXEMPT_PER_BROKER
        assert quotas.total == len(opened) - (exempt_now - exempt_before)
        events = [
            e
            for e in RECENT_LOGS.events(broker.broker_id)
            if e["event"] == "broker_connection_counted"
        ]
        # Logged once per address: for the first, broker 7.
        assert [(e["ip"], e["claimed_broker_id"]) for e in events] == [("127.0.0.1", 7)]
        for conn in opened:
            await conn.close()
        await wait_until(
            lambda: quotas.total == 0 and sum(quotas.exempted.values()) == exempt_before
        )
