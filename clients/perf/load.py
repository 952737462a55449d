"""A pipelined, framed load generator: keeps ``window`` requests in flight on one connection,
times each request from send to response, and checks every response.

The broker benchmark and the echo ceiling use this same client, so the only difference
between their figures is the server.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

from purgatory.common.percentiles import latency_summary
from purgatory.protocol.api import decode_response_body, decode_response_header
from purgatory.protocol.framing import FrameDecoder


class LoadStats(msgspec.Struct):
    requests: int
    records: int
    record_bytes: int
    elapsed_s: float
    errors: int
    latencies_ms: list[float]

    @staticmethod
    def combined(runs: list[LoadStats]) -> LoadStats:
        """Several runs as one: their counts and running times added, latencies pooled."""
        return LoadStats(
            sum(r.requests for r in runs),
            sum(r.records for r in runs),
            sum(r.record_bytes for r in runs),
            sum(r.elapsed_s for r in runs),
            sum(r.errors for r in runs),
            [x for r in runs for x in r.latencies_ms],
        )

    @property
    def _seconds(self) -> float:
        return max(self.elapsed_s, 1e-9)

    @property
    def requests_per_sec(self) -> float:
        return self.requests / self._seconds

    def summary(self) -> dict[str, Any]:
        secs = self._seconds
        return {
            "requests": self.requests,
            "records": self.records,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed_s, 3),
            "requests_per_sec": round(self.requests_per_sec, 1),
            "records_per_sec": round(self.records / secs, 1),
            "mb_per_sec": round(self.record_bytes / secs / 1e6, 3),
            "latency_ms": latency_summary(self.latencies_ms),
        }


class _LoadProtocol(asyncio.Protocol):
    def __init__(self, load: PipelinedLoad) -> None:
        self.load = load

    def data_received(self, data: bytes) -> None:
        self.load._received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.load._lost(exc)

    def pause_writing(self) -> None:
        self.load._paused = True

    def resume_writing(self) -> None:
        self.load._paused = False
        self.load._fill()


class PipelinedLoad:
    """Send ``total`` requests built by ``encode(buffer, correlation_id)`` (which appends one
    complete frame); ``check(body) -> bool`` says whether a decoded response body is OK."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        api_key: int,
        api_version: int,
        encode: Callable[[bytearray, int], None],
        check: Callable[[Any], bool],
        total: int,
        records_per_request: int,
        record_bytes: int,
        window: int = 64,
        throughput: float = -1,
        duration_s: float | None = None,
        expect_response: bool = True,
    ) -> None:
        self.host, self.port = host, port
        self.api_key, self.api_version = api_key, api_version
        self.encode, self.check = encode, check
        self.total = total
        self.records_per_request = records_per_request
        self.record_bytes = record_bytes
        self.window = window
        self.throughput = throughput
        self.duration_s = duration_s
        self.expect_response = expect_response
        self.sent = 0
        self.done = 0
        self.errors = 0
        self.latencies: list[float] = []
        self._send_times: deque[float] = deque()
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self._finished: asyncio.Future[None] | None = None
        self._start = 0.0
        self._stop_at = float("inf")
        self._stopped = False
        self._pace_handle: asyncio.TimerHandle | None = None

    def stop(self, *, now: bool = False) -> None:
        """End the run early (Ctrl-C): send no more requests and finish once those in
        flight are answered, or at once with ``now``. Before ``run`` it sends none."""
        self._stopped = True
        if self._finished is None or self._finished.done():
            return
        if now:
            self._finished.set_result(None)
        else:
            self._fill()

    async def run(self) -> LoadStats:
        loop = asyncio.get_running_loop()
        self._finished = loop.create_future()
        transport, _ = await loop.create_connection(
            lambda: _LoadProtocol(self), self.host, self.port
        )
        self._transport = transport
        self._start = time.perf_counter()
        if self.duration_s:
            self._stop_at = self._start + self.duration_s
        self._fill()
        try:
            await self._finished
        finally:
            if self._pace_handle is not None:
                self._pace_handle.cancel()
            transport.close()
        elapsed = time.perf_counter() - self._start
        count = self.done if self.expect_response else self.sent
        return LoadStats(
            count,
            count * self.records_per_request,
            count * self.records_per_request * self.record_bytes,
            elapsed,
            self.errors,
            [x * 1000 for x in self.latencies],
        )

    def _target_sent(self, now: float) -> int:
        if self.throughput <= 0:
            return self.total
        return min(
            self.total, int((now - self._start) * self.throughput / self.records_per_request) + 1
        )

    def _fill(self) -> None:
        if (
            self._transport is None
            or self._paused
            or self._finished is None
            or self._finished.done()
        ):
            return
        now = time.perf_counter()
        if now >= self._stop_at or self._stopped:
            self.total = self.sent
        limit = min(self._target_sent(now), self.total)
        if self.expect_response:
            limit = min(limit, self.done + self.window)
        if self.sent >= limit:
            if self.sent >= self.total and (not self.expect_response or self.done >= self.sent):
                self._finished.set_result(None)
            elif self.throughput > 0 and self.sent < self.total and self._pace_handle is None:
                loop = asyncio.get_running_loop()
                self._pace_handle = loop.call_later(0.0005, self._paced)
            return
        buffer = bytearray()
        times = self._send_times
        while self.sent < limit:
            self.sent += 1
            self.encode(buffer, self.sent)
            times.append(now)
        self._transport.write(buffer)
        if not self.expect_response:
            asyncio.get_running_loop().call_soon(self._fill)

    def _paced(self) -> None:
        self._pace_handle = None
        self._fill()

    def _received(self, data: bytes) -> None:
        now = time.perf_counter()
        for frame in self._decoder.feed(data):
            sent_at = self._send_times.popleft()
            self.latencies.append(now - sent_at)
            self.done += 1
            header = decode_response_header(frame)
            if header.error_code or not self.check(
                decode_response_body(self.api_key, self.api_version, header.body)
            ):
                self.errors += 1
        self._fill()

    def _lost(self, exc: Exception | None) -> None:
        if self._finished is not None and not self._finished.done():
            if self.sent >= self.total and (not self.expect_response or self.done >= self.sent):
                self._finished.set_result(None)
            else:
                self._finished.set_exception(
                    ConnectionError(f"connection lost during the run: {exc}")
                )
