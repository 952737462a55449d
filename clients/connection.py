"""One pipelined connection to a broker: correlation ids, in-order responses, timeouts."""

from __future__ import annotations

import asyncio
import math
import ssl
from collections.abc import Callable
from typing import Any

import msgspec

from purgatory.common.delayed_receiver import DelayedReceiver
from purgatory.protocol.api import (
    ApiKey,
    decode_response_body,
    decode_response_header,
    encode_request_into,
    latest_version,
)
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError
from purgatory.protocol.in_flight import CorrelationMismatch, InFlightRequests

DEFAULT_REQUEST_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms
LOSS_CHECK_S = 0.1  # how often a connection that lost bytes checks whether the loss ended


class ConnectionClosed(ConnectionError):
    """The connection closed (or failed) before a response arrived."""


class _Pending:
    __slots__ = ("api_key", "future", "timer", "version")

    def __init__(
        self,
        api_key: int,
        version: int,
        future: asyncio.Future[Any],
        timer: asyncio.TimerHandle | None,
    ) -> None:
        self.api_key = api_key
        self.version = version
        self.future = future
        self.timer = timer


class _ClientProtocol(asyncio.Protocol):
    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connection._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        connection = self.connection
        if connection._receiver is None:
            connection._data_received(data)
            return
        assert connection.receive_delay is not None
        delay = connection.receive_delay()
        if delay == math.inf:  # a broker's drop fault: these bytes never arrived
            if not connection._lossy:
                connection._lossy = True
                connection._watch_loss()
        elif connection._lossy:  # what follows lost bytes cannot be read
            connection._fail(ConnectionClosed(f"bytes from {connection.host} were lost"))
        else:
            connection._receiver.receive(data, delay)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection._lost(exc)


class Connection:
    """A connection to one broker. ``send`` may be called concurrently: requests are
    pipelined and their responses matched by correlation id (they arrive in order)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "purgatory-client",
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        receive_delay: Callable[[], float] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._decoder = FrameDecoder(max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._in_flight: InFlightRequests[_Pending] = InFlightRequests()
        self._out = bytearray()
        self._flush_scheduled = False
        self._closed: Exception | None = None
        self._loop = asyncio.get_running_loop()
        # Seconds to hold each chunk of received bytes (a broker's latency faults).
        self.receive_delay = receive_delay
        self._receiver = None if receive_delay is None else DelayedReceiver(self._data_received)
        self._lossy = False

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        connect_timeout_s: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        **kwargs: Any,
    ) -> Connection:
        """Connect (over TLS with ``ssl_context``: an SSL or SASL_SSL listener, the
        server's certificate checked for ``host`` if the context checks host names)."""
        self = cls(host, port, **kwargs)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation
            # that arrives as the connection attempt fails, and the caller never stops.
            async with asyncio.timeout(connect_timeout_s):
                await self._loop.create_connection(
                    lambda: _ClientProtocol(self),
                    host,
                    port,
                    ssl=ssl_context,
                    server_hostname=host if ssl_context is not None else None,
                )
        except (TimeoutError, OSError) as exc:
            raise ConnectionClosed(
                f"cannot connect to {host}:{port}: {exc or 'timed out'}"
            ) from None
        return self

    def _watch_loss(self) -> None:
        """Bytes were lost to a broker's drop fault: when it ends, fail the connection
        (what follows the lost bytes cannot be read, and the answers in them never come),
        even if nothing more arrives to tell."""
        if self._closed is not None or self.receive_delay is None:
            return
        if self.receive_delay() == math.inf:
            self._loop.call_later(LOSS_CHECK_S, self._watch_loss)
        else:
            self._fail(ConnectionClosed(f"bytes from {self.host}:{self.port} were lost"))

    @property
    def closed(self) -> bool:
        return self._closed is not None or self._transport is None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def _enqueue(self, key: int, version: int, body: msgspec.Struct) -> int:
        if self._closed is not None or self._transport is None:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        correlation_id = self._in_flight.next_correlation_id()
        encode_request_into(self._out, key, version, correlation_id, self.client_id, body)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return correlation_id

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self._transport is not None and self._closed is None:
            self._transport.write(self._out)
            self._out = bytearray()

    def send_nowait(self, key: ApiKey, body: msgspec.Struct, version: int | None = None) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        self._enqueue(int(key), latest_version(key) if version is None else version, body)

    def request(
        self,
        key: ApiKey,
        body: msgspec.Struct,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[Any]:
        """Send a request; the future resolves to the response body or raises KafkaError
        (request-level error, REQUEST_TIMED_OUT) or ConnectionClosed."""
        ver = latest_version(key) if version is None else version
        correlation_id = self._enqueue(int(key), ver, body)
        future: asyncio.Future[Any] = self._loop.create_future()
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        pending = _Pending(int(key), ver, future, None)
        if timeout > 0:
            pending.timer = self._loop.call_at(
                self._loop.time() + timeout / 1000, self._expire, pending
            )
        self._in_flight.add(correlation_id, pending)
        return future

    async def send(
        self,
        key: ApiKey,
        body: msgspec.Struct,
        version: int | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        return await self.request(key, body, version, timeout_ms)

    def _expire(self, pending: _Pending) -> None:
        if not pending.future.done():
            # The response may still come; it is then matched and dropped.
            pending.future.set_exception(
                KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"no response from {self.host}:{self.port}")
            )

    def _data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            self._fail(ConnectionClosed(f"bad frame from {self.host}:{self.port}: {exc}"))
            return
        for frame in frames:
            try:
                header = decode_response_header(frame)
            except msgspec.DecodeError as exc:
                self._fail(
                    ConnectionClosed(f"undecodable response from {self.host}:{self.port}: {exc}")
                )
                return
            try:
                pending = self._in_flight.complete(header.correlation_id)
            except CorrelationMismatch as exc:
                self._fail(ConnectionClosed(f"{self.host}:{self.port} broke the order: {exc}"))
                return
            if pending.timer is not None:
                pending.timer.cancel()
            future = pending.future
            if future.done():
                continue
            if header.error_code:
                future.set_exception(KafkaError(header.error_code, header.error_message))
                continue
            try:
                future.set_result(
                    decode_response_body(pending.api_key, pending.version, header.body)
                )
            except msgspec.DecodeError as exc:
                future.set_exception(
                    KafkaError(ErrorCode.CORRUPT_MESSAGE, f"undecodable response body: {exc}")
                )

    def _fail(self, exc: Exception) -> None:
        if self._closed is None:
            self._closed = exc
        for pending in self._in_flight.abandon():
            if pending.timer is not None:
                pending.timer.cancel()
            if not pending.future.done():
                pending.future.set_exception(exc)
        if self._transport is not None:
            self._transport.close()

    def _lost(self, exc: Exception | None) -> None:
        self._fail(
            ConnectionClosed(
                f"connection to {self.host}:{self.port} lost" + (f": {exc}" if exc else "")
            )
        )

    async def close(self) -> None:
        self._flush()
        self._fail(ConnectionClosed(f"connection to {self.host}:{self.port} closed by client"))
