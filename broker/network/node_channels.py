"""NodeChannels: this broker's requests to the other nodes of the cluster on our protocol,
for the metadata quorum and the controller (Kafka's NetworkClient of the raft and the
node-to-controller channels).

One connection per node and purpose, so that a long-polled metadata fetch never holds up
a vote or a heartbeat behind it on the same connection (answers come back in order). A
request that times out closes its connection (the node may be gone, or partitioned
away): the next request opens a fresh one instead of queueing behind it.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable
from typing import Any

from purgatory.clients.cluster_auth import authenticate
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.clients.security import ClientSecurity
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError


class NodeChannels:
    def __init__(
        self,
        broker_id: int,
        addresses: Callable[[], dict[int, tuple[str, int]]],
        receive_delay: Callable[[int], float],
        refused: Callable[[int], bool],
        cluster_secret: str = "",
        ssl_context: ssl.SSLContext | None = None,
        sasl: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        # The brokers' SASL login on the listener it reaches, instead of the secret.
        self.sasl = sasl
        self.ssl_context = ssl_context  # the listener it reaches is SSL or SASL_SSL
        self.cluster_secret = cluster_secret  # proven on each new connection
        self.addresses = addresses  # node id -> (host, port)
        self.receive_delay = receive_delay  # a latency fault's delay on bytes from a node
        self.refused = refused  # a partition fault cuts this node off from that one
        self._connections: dict[tuple[int, str], Connection] = {}

    def purpose(self, key: ApiKey) -> str:
        return "raft-fetch" if key in (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT) else "control"

    async def send(self, destination: int, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        """The answer of ``destination``; ConnectionError when it cannot be reached,
        KafkaError(REQUEST_TIMED_OUT) when it does not answer in time."""
        if self.refused(destination):
            raise ConnectionClosed(f"node {destination} is cut off by a partition fault")
        conn = await self._connection(destination, self.purpose(key), timeout_ms)
        try:
            return await conn.send(key, request, timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.code == ErrorCode.REQUEST_TIMED_OUT:
                await conn.close()
            raise

    async def _connection(self, destination: int, purpose: str, timeout_ms: int) -> Connection:
        conn = self._connections.get((destination, purpose))
        if conn is None or conn.closed:
            address = self.addresses().get(destination)
            if address is None:
                raise ConnectionClosed(f"node {destination} has no known address")
            conn = await Connection.open(
                *address,
                client_id=f"broker-{self.broker_id}",
                receive_delay=functools.partial(self.receive_delay, destination),
                connect_timeout_s=timeout_ms / 1000,
                ssl_context=self.ssl_context,
            )
            try:
                if self.sasl is not None:
                    await self.sasl.authenticate(conn)
                else:
                    await authenticate(conn, self.cluster_secret, self.broker_id, timeout_ms)
            except BaseException:
                await conn.close()
                raise
            self._connections[(destination, purpose)] = conn
        return conn

    def drop(self, destination: int) -> None:
        """Close every connection to ``destination`` (a partition fault began)."""
        for (node, purpose), conn in list(self._connections.items()):
            if node == destination:
                del self._connections[(node, purpose)]
                conn._fail(ConnectionClosed(f"node {destination} is cut off by a partition fault"))

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
