"""The framed echo ceiling: a server that answers every frame with one fixed, valid
response frame, on uvloop with the broker's framing and no broker logic in between."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import signal
import socket
from typing import Any

import uvloop

from purgatory.protocol.api import encode_response_into
from purgatory.protocol.framing import LENGTH_PREFIX, FrameDecoder


class EchoProtocol(asyncio.Protocol):
    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        frames = self.decoder.feed(data)
        if frames and self.transport is not None:
            self.transport.write(self.reply * len(frames))


def reply_frame(body: Any) -> bytes:
    buffer = bytearray()
    encode_response_into(buffer, 0, body)
    return bytes(buffer)


async def _echo_stream(
    reply: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """The same echo on asyncio streams: a task per connection awaiting each frame."""
    try:
        while True:
            (size,) = LENGTH_PREFIX.unpack(await reader.readexactly(4))
            await reader.readexactly(size)
            writer.write(reply)
            if not reader._buffer:  # type: ignore[attr-defined]  # flush when the batch is read
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def _serve(sock: socket.socket, reply: bytes, server_kind: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if server_kind == "streams":
            server = await asyncio.start_server(functools.partial(_echo_stream, reply), sock=sock)
        else:
            server = await loop.create_server(lambda: EchoProtocol(reply), sock=sock)
        await server.serve_forever()

    uvloop.run(main())


class EchoServer:
    """An echo server in its own process (like a broker), on a free loopback port."""

    def __init__(self, reply: bytes, server_kind: str = "protocol") -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        ctx = multiprocessing.get_context("fork")  # uvloop is POSIX-only anyway
        self.process = ctx.Process(target=_serve, args=(self.sock, reply, server_kind), daemon=True)

    def __enter__(self) -> EchoServer:
        self.process.start()
        self.sock.close()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(5)


def main(args: argparse.Namespace) -> int:
    from purgatory.clients.perf.produce import produce_load

    with EchoServer(produce_reply(), args.server) as echo:
        stats = uvloop.run(
            produce_load(
                "127.0.0.1",
                echo.port,
                "perf",
                args.num_requests,
                args.record_size,
                args.batch_size,
                args.max_in_flight,
                acks=1,
                throughput=-1,
                duration_s=None,
                progress=not args.json,
            )
        )
    summary = {
        "benchmark": "echo",
        "server": args.server,
        "record_size": args.record_size,
        "batch_size": args.batch_size,
        "max_in_flight": args.max_in_flight,
        **stats.summary(),
    }
    print(json.dumps(summary, indent=None if args.json else 2))
    return 0


def produce_reply() -> bytes:
    from purgatory.protocol import messages as m

    return reply_frame(
        m.ProduceResponse(
            [m.TopicProduceResponse("perf", [m.PartitionProduceResponse(0, 0, 0, -1, 0)])]
        )
    )
