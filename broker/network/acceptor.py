"""Acceptor: the broker's listening sockets and the loop that accepts on them (Kafka's
class of that name).

Our own loop rather than ``loop.create_server``: it takes every connection the kernel
holds per turn, up to a backlog's worth (one per loop turn would overflow the listen
backlog under a burst), closes what ``max.connections.per.ip`` and ``max.connections``
refuse (ConnectionQuotas; a listener only brokers use is not held to the broker-wide
limit) and hands the rest to the protocol ``connect`` makes for their address.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any

from purgatory.broker.network.connection_quotas import ConnectionQuotas


class ListenError(OSError):
    """A listener that cannot bind: which one (``what``: "PLAINTEXT listener", "admin
    listener"), its address and the system's reason ("address already in use")."""

    def __init__(self, what: str, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.what, self.host, self.port = what, host, port
        if isinstance(cause, socket.gaierror) or not cause.errno:
            self.reason = cause.strerror or str(cause)  # a host name that does not resolve
        else:
            self.reason = os.strerror(cause.errno).lower()

    def __str__(self) -> str:
        return f"{self.what} {self.host}:{self.port}: {self.reason}"


class Acceptor:
    def __init__(
        self,
        quotas: ConnectionQuotas,
        connect: Callable[[str], asyncio.Protocol],
        backlog: int,
        protected: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        tls_outcome: Callable[[str], None] = lambda _result: None,
    ) -> None:
        self.quotas = quotas
        self.ssl_context = ssl_context  # an SSL or SASL_SSL listener's: TLS before any request
        self.tls_outcome = tls_outcome  # told "success" or "failure" of each TLS handshake
        self.connect = connect  # the protocol for a connection from an address
        self.backlog = backlog
        self.protected = protected  # only brokers use it: max.connections does not close it
        self.listening: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._connecting: set[asyncio.Task[None]] = set()  # accepted, transport being made

    async def start(self, host: str, port: int) -> int:
        """Bind every address ``host`` resolves to (the port of the first when ``port``
        is 0) and accept on each; return the port."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        bound = port
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], bound, *address[2:]))
                sock.listen(self.backlog)
                sock.setblocking(False)
            except OSError:
                sock.close()
                if not self.listening:
                    raise
                continue  # another address of a name taken: the first one serves
            bound = sock.getsockname()[1]
            self.listening.append(sock)
            self._tasks.append(loop.create_task(self._accept(sock)))
        return int(bound)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self.listening:
            sock.close()

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
                self._serve(loop, conn, address)
                # Then what else the kernel holds, without a loop pass each (a backlog's
                # worth at most: a flood must not keep the loop from serving).
                for _ in range(self.backlog):
                    conn, address = sock.accept()
                    self._serve(loop, conn, address)
            except (BlockingIOError, InterruptedError):
                continue  # the kernel holds no more
            except OSError as exc:  # out of file descriptors, say: wait, then go on
                quotas.log_once(("*", "accept_failed"), "accept_failed", error=str(exc))
                await asyncio.sleep(0.1)

    def _serve(self, loop: asyncio.AbstractEventLoop, conn: socket.socket, address: Any) -> None:
        ip = str(address[0]) if isinstance(address, tuple) else "?"
        if not self.quotas.admit(ip, self.protected):
            conn.close()
            return
        conn.setblocking(False)
        task = loop.create_task(self._connect(loop, conn, ip))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, loop: asyncio.AbstractEventLoop, conn: socket.socket, ip: str) -> None:
        try:
            await loop.connect_accepted_socket(lambda: self.connect(ip), conn, ssl=self.ssl_context)
        except Exception as exc:  # gone before it was served, or its TLS handshake failed
            self.quotas.release(ip)
            conn.close()
            if self.ssl_context is not None:
                self.tls_outcome("failure")
                self.quotas.log_once(
                    (ip, "tls_handshake_failed"), "tls_handshake_failed", peer=ip, error=str(exc)
                )
            return
        if self.ssl_context is not None:
            self.tls_outcome("success")
