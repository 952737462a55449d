"""One fuzz run: a 3-broker process cluster holding acknowledged records, then ``frames``
hostile frames over both protocols from several connections at once (mutated valid
requests of every API version, corrupt batches behind good CRCs, framing tricks, and
slowloris connections that send a byte at a time), then the checks of issue 42: every
broker alive and healthy, the acknowledged records' batches unchanged on every replica,
each broker's RSS within 20% of before, no traceback (or handler failure) in the logs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from purgatory.clients import AdminClient, Producer
from tests.cluster.process_cluster import ProcessCluster
from tests.fuzz.corpus import PING_ID, kafka_frames, msgpack_frames, pings
from tests.fuzz.mutate import bad_batch, framing_trick, mutant
from tests.support import wait_until

TOPIC = "intact"
_PING_MARK = PING_ID.to_bytes(4, "big")
RECORDS = 300
RSS_GROWTH = 1.2
# What a healthy broker never logs, whatever it is sent: a traceback, or a request (or
# its answer) that failed inside the broker.
BAD_LOG = re.compile(r"Traceback|\"request_failed\"|\"response_encoding_failed\"|\"critical\"")


@dataclass
class FuzzResult:
    seed: int
    hostile_frames: int = 0  # mutated requests, spoiled batches, framing tricks
    valid_frames: int = 0  # sent around them, so that the hostile ones are read
    connections: int = 0
    # What the brokers counted (their metrics): requests served, and frames refused as
    # unreadable or invalid (closing the connection or answered with an error).
    requests_served: int = 0
    pings_timed_out: int = 0  # a burst's answers held up (a parked fetch, a join)
    bad_requests: int = 0
    slowloris_bytes: int = 0
    seconds: float = 0.0
    rss_before_mb: dict[int, float] = field(default_factory=dict)
    rss_after_mb: dict[int, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "hostile_frames": self.hostile_frames,
            "valid_frames": self.valid_frames,
            "connections": self.connections,
            "requests_served": self.requests_served,
            "pings_timed_out": self.pings_timed_out,
            "bad_requests": self.bad_requests,
            "slowloris_bytes": self.slowloris_bytes,
            "seconds": round(self.seconds, 1),
            "rss_before_mb": self.rss_before_mb,
            "rss_after_mb": self.rss_after_mb,
            "ok": self.ok,
            "problems": self.problems,
        }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def batches(cluster: ProcessCluster, broker: int) -> Any:
    url = f"http://127.0.0.1:{cluster.admin_ports[broker]}/v1/partitions/{TOPIC}/0/batches"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["batches"]


async def _acknowledged(cluster: ProcessCluster) -> None:
    async with AdminClient(cluster.bootstrap) as admin:
        await admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    async with Producer(cluster.bootstrap, acks=-1) as producer:
        futures = [await producer.send(TOPIC, b"acked-%d" % i, partition=0) for i in range(RECORDS)]
        await producer.flush()
    failed = [f for f in futures if f.exception() is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} of {RECORDS} records were not acknowledged")


class _Wire:
    """One connection: writes whatever it is given, reads (and drops) whatever comes,
    noting when a ping's answer (PING_ID) arrives."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pinged = asyncio.Event()
        self._tail = b""
        self.drain_task = asyncio.ensure_future(self._drain(reader))

    @classmethod
    async def open(cls, port: int) -> _Wire:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def _drain(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                seen = self._tail + data
                if _PING_MARK in seen:
                    self.pinged.set()
                self._tail = seen[-8:]
        self.pinged.set()  # closed: nothing more will be read either

    async def ping(self, frame: bytes, timeout_s: float = 0.25) -> bool:
        """Send a ping; True once everything before it was read (its answer came or the
        broker closed the connection), False if it did not come in time."""
        self.pinged.clear()
        await self.send(frame)
        try:
            await asyncio.wait_for(self.pinged.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    @property
    def closed(self) -> bool:
        return self.drain_task.done() or self.writer.is_closing()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), 10)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
        self.drain_task.cancel()


class _Tally:
    """Frames sent so far, against the run's budget (shared by the workers)."""

    def __init__(
        self, result: FuzzResult, frames: int, progress: Callable[[int], None] | None
    ) -> None:
        self.result = result
        self.frames = frames
        self.progress = progress
        self._reported = 0

    def more(self) -> bool:
        return self.result.hostile_frames < self.frames

    def sent(self, hostile: int, valid: int) -> None:
        self.result.hostile_frames += hostile
        self.result.valid_frames += valid
        if self.progress is not None and self.result.hostile_frames - self._reported >= 1000:
            self._reported = self.result.hostile_frames
            self.progress(self.result.hostile_frames)


async def _worker(
    ports: list[int],
    corpora: tuple[list[bytes], list[bytes]],
    rng: random.Random,
    tally: _Tally,
) -> None:
    ping = pings()
    wire: _Wire | None = None
    kafka = True
    while tally.more():
        try:
            if wire is None or wire.closed or rng.random() < 0.05:
                if wire is not None:
                    await wire.close()
                wire = await _Wire.open(rng.choice(ports))
                tally.result.connections += 1
                kafka = rng.random() < 0.6
                if rng.random() < 0.9:  # usually speak the protocol first, then spoil it
                    await wire.send(rng.choice(corpora[0] if kafka else corpora[1]))
                    tally.sent(0, 1)
            corpus = corpora[0] if kafka else corpora[1]
            if rng.random() < 0.03:  # the framing itself, then this connection is done
                await wire.send(framing_trick(rng, rng.choice(corpus)))
                tally.sent(1, 0)
                await wire.close()
                wire = None
                continue
            # A few valid requests, then one hostile frame last: the broker reads it
            # (one that closes the connection closes it after the rest were served).
            burst = [rng.choice(corpus) for _ in range(rng.randint(0, 3))]
            if kafka and rng.random() < 0.15:
                burst.append(bad_batch(rng, b""))
            else:
                burst.append(mutant(rng, rng.choice(corpus)))
            await wire.send(b"".join(burst))
            tally.sent(1, len(burst) - 1)
            # Wait until the broker has read the burst (or closed): frames written into a
            # connection it already closed would never be read. A ping stuck behind a
            # parked fetch closes the connection (whose fetches then leave the purgatory).
            if not await wire.ping(ping[0] if kafka else ping[1]):
                tally.result.pings_timed_out += 1
                await wire.close()
                wire = None
        except (ConnectionError, OSError, TimeoutError):
            wire = None
    if wire is not None:
        await wire.close()


async def _slowloris(port: int, frame: bytes, stop: asyncio.Event, result: FuzzResult) -> None:
    """A valid frame, one byte every 20 ms, for as long as the run lasts."""
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        wire = await _Wire.open(port)
        try:
            for byte in frame * 100:
                if stop.is_set() or wire.closed:
                    break
                await wire.send(bytes([byte]))
                result.slowloris_bytes += 1
                await asyncio.sleep(0.02)
        finally:
            await wire.close()


async def fuzz(
    cluster: ProcessCluster,
    frames: int,
    seed: int,
    workers: int = 6,
    progress: Callable[[int], None] | None = None,
) -> FuzzResult:
    result = FuzzResult(seed)
    log_dir = cluster.supervisor.log_dir
    # Where this run's log lines start (a kept log directory holds earlier runs' too).
    offsets = (
        {log.name: log.stat().st_size for log in log_dir.glob("broker-*.log")} if log_dir else {}
    )
    await _acknowledged(cluster)
    ports = cluster.ports
    corpora = (kafka_frames(), msgpack_frames())
    # Warm-up: every valid frame once per broker, so the Kafka protocol's code and each
    # version's reader are loaded before RSS is first read.
    # A frame the broker closes the connection on (a failed SaslAuthenticate) is followed
    # by the rest on a new connection.
    for port in ports:
        for corpus in corpora:
            wire = await _Wire.open(port)
            for frame in corpus:
                if wire.closed:
                    await wire.close()
                    wire = await _Wire.open(port)
                with contextlib.suppress(ConnectionError):
                    await wire.send(frame)
            await wire.close()
    # ... and a short fuzz of another seed: error paths, their log lines, their caches.
    warm = _Tally(FuzzResult(seed), min(2000, max(frames // 10, 1)), None)
    await asyncio.gather(
        *(_worker(ports, corpora, random.Random(-seed - w - 1), warm) for w in range(workers))
    )
    # Every warm-up burst ended with an answered ping (or a closed connection): the
    # brokers have read it all. They must be healthy before anything is measured.
    await wait_until(lambda: all(cluster.healthy(i) for i in range(3)), timeout=30)
    before = {i: batches(cluster, i) for i in range(3)}
    result.rss_before_mb = {i: rss_mb(cluster.procs[i].pid) for i in range(3)}
    rngs = [random.Random(seed * 1000 + w) for w in range(workers)]
    tally = _Tally(result, frames, progress)
    started = time.monotonic()
    stop = asyncio.Event()
    loris = [
        asyncio.ensure_future(_slowloris(port, corpora[0][0], stop, result))
        for port in ports
        for _ in range(2)
    ]
    await asyncio.gather(*(_worker(ports, corpora, rng, tally) for rng in rngs))
    stop.set()
    await asyncio.gather(*loris)
    result.seconds = time.monotonic() - started
    await _check(cluster, before, offsets, result)
    return result


async def _check(
    cluster: ProcessCluster, before: dict[int, Any], offsets: dict[str, int], result: FuzzResult
) -> None:
    problems = result.problems
    for i in range(3):
        if not cluster.supervisor.running(i):
            problems.append(f"broker {i} died (exit {cluster.procs[i].poll()})")
    if problems:
        return
    try:
        await wait_until(
            lambda: all(cluster.healthy(i) for i in range(3)),
            timeout=30,
            message="every broker healthy after the fuzz",
        )
    except AssertionError as exc:
        problems.append(str(exc))
    for i in range(3):
        now = batches(cluster, i)
        if now[: len(before[i])] != before[i]:
            problems.append(f"broker {i}: the acknowledged batches of {TOPIC} changed")
    result.rss_after_mb = {i: rss_mb(cluster.procs[i].pid) for i in range(3)}
    for i in range(3):
        for (name, _), value in cluster.metrics(i).items():
            if name == "purgatory_requests_total":
                result.requests_served += int(value)
            elif name == "purgatory_bad_requests_total":
                result.bad_requests += int(value)
    for i in range(3):
        if result.rss_after_mb[i] > RSS_GROWTH * result.rss_before_mb[i]:
            problems.append(
                f"broker {i}: RSS {result.rss_before_mb[i]} -> {result.rss_after_mb[i]} MB "
                f"(more than {RSS_GROWTH - 1:.0%})"
            )
    log_dir = cluster.supervisor.log_dir
    if log_dir is not None:
        for log in sorted(log_dir.glob("broker-*.log")):
            with log.open("rb") as f:
                f.seek(offsets.get(log.name, 0))
                lines = f.read().decode(errors="replace").splitlines()
            for line in lines:
                if BAD_LOG.search(line):
                    problems.append(f"{log.name}: {line[:300]}")
                    break
