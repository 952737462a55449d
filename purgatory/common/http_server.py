"""A small HTTP/1.1 server on the running event loop, for the admin API and /metrics.

h11 parses and writes HTTP; this module adds routes with ``{name}`` segments, JSON
responses, keep-alive and pipelining (one request at a time per connection, answered in
order), and limits (a request head of 64 KiB, a body of 1 MiB). aiohttp's server did
this before; it cost every broker process about 10 MB and 0.15 s of its start (issue 17:
50 brokers on a laptop), for a dozen JSON routes.

Bad requests get a 400 (413 for a body over the limit) and the connection closes; a
handler that raises gets a 500 and the error goes to ``on_error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import msgspec

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 1024 * 1024
REQUEST_TIMEOUT_S = 30.0  # for a whole request to arrive (then 408 and close)
JSON = "application/json; charset=utf-8"


class BadRequest(ValueError):
    """A body that is not the JSON a handler expects (``HttpRequest.json``)."""


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value
    body: bytes = b""
    params: dict[str, str] = field(default_factory=dict)  # the route's {name} segments

    def json(self) -> Any:
        """The body as JSON; BadRequest (a ValueError) if it is not."""
        try:
            return msgspec.json.decode(self.body)
        except msgspec.DecodeError as exc:
            raise BadRequest(f"the body is not JSON: {exc}") from None


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


def json_response(
    payload: Any, status: int = 200, headers: dict[str, str] | None = None
) -> HttpResponse:
    return HttpResponse(status, msgspec.json.encode(payload), JSON, headers or {})


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
# Runs before every routed handler; an answer it returns is sent instead (e.g. a 401).
Guard = Callable[[HttpRequest], HttpResponse | None]


class Router:
    def __init__(self) -> None:
        self._routes: list[tuple[str, list[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        """``pattern`` like ``/v1/faults/{name}``: a ``{...}`` segment matches any one
        segment and is handed to the handler in ``request.params``."""
        self._routes.append((method, pattern.strip("/").split("/"), handler))

    def resolve(self, method: str, path: str) -> tuple[Handler | None, dict[str, str], list[str]]:
        """(the handler, its params, the methods the path allows): no handler with an
        empty list is a 404, with a list a 405."""
        segments = path.strip("/").split("/")
        allowed: list[str] = []
        for route_method, pattern, handler in self._routes:
            params = _match(pattern, segments)
            if params is None:
                continue
            if route_method == method or (method == "HEAD" and route_method == "GET"):
                return handler, params, []
            allowed.append(route_method)
        return None, {}, allowed


def _match(pattern: list[str], segments: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    params = {}
    for want, got in zip(pattern, segments, strict=True):
        if want.startswith("{") and want.endswith("}"):
            params[want[1:-1]] = urllib.parse.unquote(got)
        elif want != got:
            return None
    return params


class HttpServer:
    """Serves ``router`` on ``start(host, port)`` until ``stop()``."""

    def __init__(
        self,
        router: Router,
        guard: Guard | None = None,
        on_error: Callable[[HttpRequest, BaseException], None] | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.router = router
        # A request must arrive whole within this of the connection opening or of the
        # previous answer (a half-sent request, or an idle kept-alive connection, is
        # closed: 408), so that nobody holds a connection open by sending slowly.
        self.request_timeout_s = request_timeout_s
        self.guard = guard
        self.on_error = on_error
        self.port = 0
        self._server: asyncio.Server | None = None
        self.connections: set[_Connection] = set()

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening and close every connection (a request being handled is
        cancelled: stopping a broker does not wait on its HTTP clients)."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.abort()
        self._server = None

    async def answer(self, request: HttpRequest) -> HttpResponse:
        handler, request.params, allowed = self.router.resolve(request.method, request.path)
        if handler is None:
            if allowed:
                return json_response(
                    {"error": f"{request.method} is not allowed on {request.path}"},
                    405,
                    {"Allow": ", ".join(sorted(set(allowed)))},
                )
            return json_response({"error": f"no such path: {request.path}"}, 404)
        if self.guard is not None and (refused := self.guard(request)) is not None:
            return refused
        try:
            return await handler(request)
        except Exception as exc:
            if self.on_error is not None:
                self.on_error(request, exc)
            return json_response({"error": f"unexpected server error: {type(exc).__name__}"}, 500)


class _Connection(asyncio.Protocol):
    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.transport: asyncio.Transport | None = None
        self.request: h11.Request | None = None
        self.body = bytearray()
        self.task: asyncio.Task[None] | None = None  # the request being answered
        self.deadline: asyncio.TimerHandle | None = None  # for the next request to be in

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.task is not None:
            self.task.cancel()
        if self.deadline is not None:
            self.deadline.cancel()
        self.transport = None

    def _await_request(self) -> None:
        loop = asyncio.get_running_loop()
        self.deadline = loop.call_later(self.server.request_timeout_s, self._timed_out)

    def _timed_out(self) -> None:
        self.deadline = None
        if self.task is None and self.transport is not None:
            self._refuse(408, f"no whole request within {self.server.request_timeout_s:g} s")

    def data_received(self, data: bytes) -> None:
        self.h11.receive_data(data)
        self._next()

    def eof_received(self) -> bool:
        self.h11.receive_data(b"")
        self._next()
        return True  # half-open: a request read before the EOF is still answered

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _next(self) -> None:
        """Read events until a whole request is in (then answer it) or more bytes are
        needed. While a request is answered h11 pauses (pipelined ones wait)."""
        while self.task is None and self.transport is not None:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc.error_status_hint, str(exc))
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self.request = event
                self.body.clear()
            elif isinstance(event, h11.Data):
                self.body += event.data
                if len(self.body) > MAX_BODY_BYTES:
                    self._refuse(413, f"the body is over {MAX_BODY_BYTES} bytes")
                    return
            elif isinstance(event, h11.EndOfMessage):
                assert self.request is not None
                # Pipelined requests wait unread (back-pressure) until this one is answered.
                self.transport.pause_reading()
                if self.deadline is not None:
                    self.deadline.cancel()
                    self.deadline = None
                self.task = asyncio.ensure_future(self._answer(_request(self.request, self.body)))
            elif isinstance(event, h11.ConnectionClosed):
                self.abort()
                return

    async def _answer(self, request: HttpRequest) -> None:
        response = await self.server.answer(request)
        self.task = None
        if self.transport is None:
            return
        self._send(response, head_only=request.method == "HEAD")
        if self.h11.our_state is h11.MUST_CLOSE:
            self.transport.close()
            return
        try:
            self.h11.start_next_cycle()
        except h11.LocalProtocolError:  # the client had not finished its request
            self.transport.close()
            return
        self.transport.resume_reading()
        self._await_request()
        self._next()

    def _send(self, response: HttpResponse, head_only: bool = False) -> None:
        assert self.transport is not None
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers.items(),
        ]
        out = self.h11.send(h11.Response(status_code=response.status, headers=headers))
        if not head_only and response.body:
            out += self.h11.send(h11.Data(data=response.body))
        out += self.h11.send(h11.EndOfMessage())
        self.transport.write(out)

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request that cannot be read with ``status`` and close."""
        assert self.transport is not None
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            response = json_response({"error": message}, status, {"Connection": "close"})
            with contextlib.suppress(h11.LocalProtocolError):
                self._send(response)
        self.transport.close()


def _request(head: h11.Request, body: bytearray) -> HttpRequest:
    target = head.target.decode("latin-1")
    path, _, query = target.partition("?")
    return HttpRequest(
        method=head.method.decode("ascii"),
        path=path,  # still quoted: a route's {name} segment is unquoted on its own
        query=dict(urllib.parse.parse_qsl(query)),
        headers={name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers},
        body=bytes(body),
    )
