"""A closed connection is freed at once, by reference counting: under steady load the
broker's cycle collector hardly runs (requests free what they allocate), so a connection
left in a reference cycle would keep its buffers and transport for as long as that."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable

import msgspec
import pytest

from purgatory.broker.network.broker_connection import BrokerConnection
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Connection
from purgatory.common.gc_policy import collector_off
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from tests.integration.test_dynamic_config import call
from tests.integration.test_produce_fetch import fetch_request
from tests.support import bootstrap, wait_until


async def serving(broker: Broker, conn: Connection) -> weakref.ref[BrokerConnection]:
    """The broker's side of ``conn``, weakly."""
    port = conn._transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]

    def side() -> BrokerConnection | None:
        return next(
            (c for c in broker.socket_server.connections if c.peer.endswith(f":{port}")), None
        )

    await wait_until(lambda: side() is not None, message="the broker's side of the connection")
    found = side()
    assert found is not None
    return weakref.ref(found)


async def answered(broker: Broker, conn: Connection) -> None:
    await conn.send(ApiKey.METADATA, m.MetadataRequest(["t"]))


async def parked(broker: Broker, conn: Connection) -> None:
    """A fetch waiting in the purgatory (30 s) when the client goes."""
    request = msgspec.structs.replace(fetch_request("t", 0, 0), max_wait_ms=30_000)
    waiting = asyncio.ensure_future(conn.send(ApiKey.FETCH, request, timeout_ms=60_000))
    waiting.add_done_callback(lambda f: f.cancelled() or f.exception())
    purgatory = broker.replica_manager.fetch_purgatory
    await wait_until(lambda: purgatory.delayed == 1, message="the fetch parked")


@pytest.mark.parametrize("before_close", [answered, parked], ids=["answered", "parked-fetch"])
async def test_a_closed_connection_is_freed_without_the_cycle_collector(
    broker: Broker, before_close: Callable[[Broker, Connection], Awaitable[None]]
) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    with collector_off():
        conn = await Connection.open("127.0.0.1", broker.port)
        ref = await serving(broker, conn)
        await before_close(broker, conn)
        await conn.close()
        await wait_until(lambda: ref() is None, message="the closed connection freed")


async def test_bytes_held_by_a_latency_fault_are_dropped_with_their_connection(
    broker: Broker,
) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)
    await call(broker, "POST", "/v1/faults", {"name": "slow", "kind": "latency", "delay_ms": 300})
    with collector_off():
        conn = await Connection.open("127.0.0.1", broker.port)
        ref = await serving(broker, conn)
        pending = asyncio.ensure_future(answered(broker, conn))
        await wait_until(lambda: ref() is not None and ref().receiver.held > 0)  # type: ignore[union-attr]
        await conn.close()
        with contextlib.suppress(Exception):
            await pending
        # Freed once the held bytes' timer has gone off (it delivers them to nobody).
        await wait_until(lambda: ref() is None, message="the closed connection freed")
