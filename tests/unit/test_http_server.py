"""The admin API's HTTP server (purgatory.common.http_server) on a real socket: routing,
keep-alive and pipelining, and what it answers to requests it cannot serve."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import msgspec
import pytest

from purgatory.common.http_server import (
    MAX_BODY_BYTES,
    HttpRequest,
    HttpResponse,
    HttpServer,
    Router,
    json_response,
)
from tests.support import wait_until


async def echo(request: HttpRequest) -> HttpResponse:
    return json_response(
        {
            "method": request.method,
            "params": request.params,
            "query": request.query,
            "body": request.json() if request.body else None,
        }
    )


async def slow(request: HttpRequest) -> HttpResponse:
    await asyncio.sleep(float(request.query["s"]))
    return json_response({"slept": request.query["s"]})


async def broken(_: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


def guard(request: HttpRequest) -> HttpResponse | None:
    if request.method == "DELETE" and request.headers.get("authorization") != "Bearer t":
        return json_response({"error": "token"}, 401)
    return None


@pytest.fixture
async def served() -> AsyncIterator[tuple[HttpServer, list[BaseException]]]:
    router = Router()
    router.add("GET", "/things", echo)
    router.add("POST", "/things", echo)
    router.add("DELETE", "/things/{name}", echo)
    router.add("GET", "/things/{name}/parts/{part}", echo)
    router.add("GET", "/slow", slow)
    router.add("GET", "/broken", broken)
    errors: list[BaseException] = []
    server = HttpServer(router, guard=guard, on_error=lambda _, exc: errors.append(exc))
    await server.start("127.0.0.1", 0)
    try:
        yield server, errors
    finally:
        await server.stop()


async def raw(port: int, data: bytes) -> bytes:
    """Send ``data`` and read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def test_routes_take_path_segments_query_and_json_bodies(served) -> None:
    server, _ = served
    url = f"http://127.0.0.1:{server.port}"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/things/a%2Fb/parts/7?x=1&y=two") as r:
            assert r.status == 200
            assert r.headers["Content-Type"] == "application/json; charset=utf-8"
            got = await r.json()
        assert got["params"] == {"name": "a/b", "part": "7"}
        assert got["query"] == {"x": "1", "y": "two"}
        async with session.post(f"{url}/things", json={"k": [1, 2]}) as r:
            assert (await r.json())["body"] == {"k": [1, 2]}
        async with session.head(f"{url}/things") as r:
            assert r.status == 200
            assert int(r.headers["Content-Length"]) > 0
            assert await r.read() == b""


async def test_unknown_paths_and_methods_say_what_is_wrong(served) -> None:
    server, _ = served
    url = f"http://127.0.0.1:{server.port}"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/nope") as r:
            assert r.status == 404
            assert (await r.json())["error"] == "no such path: /nope"
        async with session.put(f"{url}/things") as r:
            assert r.status == 405
            assert r.headers["Allow"] == "GET, POST"
        async with session.delete(f"{url}/things/x") as r:
            assert r.status == 401  # the guard
        async with session.delete(f"{url}/things/x", headers={"Authorization": "Bearer t"}) as r:
            assert (await r.json())["params"] == {"name": "x"}


async def test_a_failing_handler_answers_500_and_reports_the_error(served) -> None:
    server, errors = served
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.port}/broken") as r,
    ):
        assert r.status == 500
        assert (await r.json())["error"] == "unexpected server error: RuntimeError"
    assert [str(e) for e in errors] == ["a bug"]


async def test_one_connection_serves_pipelined_requests_in_order(served) -> None:
    server, _ = served
    # The first request is the slow one: the second waits behind it, answered after it.
    data = (
        b"GET /slow?s=0.05 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /things?n=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    answer = await raw(server.port, data)
    assert answer.count(b"HTTP/1.1 200") == 2
    assert answer.index(b'"slept"') < answer.index(b'"n":"2"')


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
        (b"GET /things HTTP/1.1\r\n\r\n", b"400"),  # HTTP/1.1 needs a Host header
        # a head that never ends: refused once it is over 64 KiB, not buffered for ever
        (b"GET /things HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70_000, b"431"),
        (
            b"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
            + b"{" * (MAX_BODY_BYTES + 1),
            b"413",
        ),
    ],
    ids=["garbage", "no-host", "huge-head", "huge-body"],
)
async def test_bad_requests_get_an_error_status_and_the_server_lives_on(
    served, data: bytes, status: bytes
) -> None:
    server, _ = served
    answer = await raw(server.port, data)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    body = answer.split(b"\r\n\r\n", 1)[1]
    assert msgspec.json.decode(body)["error"]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{server.port}/things") as r,
    ):
        assert r.status == 200


async def test_a_body_that_is_not_json_is_a_value_error(served) -> None:
    server, _ = served
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://127.0.0.1:{server.port}/things", data=b"{nope") as r,
    ):
        # echo's request.json() raised: a handler that does not catch it answers 500
        assert r.status == 500


async def test_stop_closes_open_connections_and_the_port(served) -> None:
    server, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /slow?s=30 HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await wait_until(lambda: any(c.task for c in server.connections), message="request taken")
    await server.stop()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", server.port)
