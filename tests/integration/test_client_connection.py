"""Our client's connection keeps Kafka's order rules against a real socket."""

from __future__ import annotations

import asyncio

from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, RequestDecoder, RequestFrame, encode_response_into
from purgatory.protocol.framing import FrameDecoder

_requests = RequestDecoder(RequestFrame)


async def test_a_client_closes_a_connection_whose_answers_come_out_of_order() -> None:
    """A server that answers two pipelined requests last-first breaks Kafka's order: the
    client fails both requests and closes, instead of giving one the other's answer."""
    received: list[int] = []
    answered = asyncio.Event()

    async def swapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(1 << 20)
        while len(received) < 2:
            data = await reader.read(65536)
            if not data:
                return
            received.extend(_requests.decode(frame).correlation_id for frame in decoder.feed(data))
        out = bytearray()
        for correlation_id in reversed(received):
            encode_response_into(out, correlation_id, m.ApiVersionsResponse(0, []))
        writer.write(out)
        await writer.drain()
        answered.set()
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(swapped, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        conn = await Connection.open("127.0.0.1", port)
        first = conn.request(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
        second = conn.request(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
        results = await asyncio.wait_for(
            asyncio.gather(first, second, return_exceptions=True), timeout=10
        )
        assert all(isinstance(r, ConnectionClosed) for r in results), results
        assert "broke the order" in str(results[0])
        assert conn.closed
        assert answered.is_set()
    finally:
        server.close()
        await server.wait_closed()
