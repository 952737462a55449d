"""`purgatory perf soak`: a long mixed load on a cluster of broker processes, minute by minute.

What it runs against the brokers it starts (3 by default, replication factor 3,
``min.insync.replicas`` 2):

- idempotent producers, acks=all, at a paced total rate, each record carrying its send
  time;
- a consumer group reading the topic (fetches that wait up to 500 ms for data), one of
  its members replaced every ``--churn-every`` seconds, so the group rebalances;
- long polls: fetches on an empty topic that wait their whole ``max_wait_ms`` (1-3 s) in
  a purgatory and are sent again at once.

The topic keeps ``--retention-bytes`` per partition (segments of a MiB), so once
retention starts deleting, each broker's log memory stays level and its resident memory
should too: what still grows is a leak.

Each interval (a minute by default) gives one row: records acknowledged and consumed,
produce latency (send to acknowledgement) and end-to-end latency (send to a member
receiving it) percentiles, how late the long polls came back after their deadline (as
the client saw it, and by the broker's KIP-736 wait time), errors, rebalances, and every
broker's resident memory and the bytes its logs hold. At the end the producers stop, the
group reads what is left, and every acknowledged record must have been consumed. Progress
goes to stderr, the rows and the summary to stdout as JSON (and to ``--out`` with a plot).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from purgatory.clients.cluster import TopicPartition
from purgatory.common.percentiles import latency_summary
from purgatory.protocol.errors import KafkaError
from purgatory.testing.cluster import Cluster, ClusterError
from purgatory.testing.scale_bench import rss_mb

TOPIC = "soak"
IDLE_TOPIC = "soak-idle"  # never written: long polls wait out their max_wait_ms on it
GROUP = "soak"
_STAMP = struct.Struct(">q")  # a record's value starts with its send time (ns, wall clock)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Interval:
    """What happened since the last row."""

    produce_ms: list[float] = field(default_factory=list)
    end_to_end_ms: list[float] = field(default_factory=list)
    long_poll_late_ms: list[float] = field(default_factory=list)  # as the client saw it
    long_poll_broker_late_ms: list[float] = field(default_factory=list)  # KIP-736 wait time
    sent: int = 0
    acknowledged: int = 0
    consumed: int = 0
    errors: int = 0
    rebalances: int = 0


class Offsets:
    """A set of (partition, offset): a bitmap per partition. An hour's soak acknowledges
    millions of records; as a set of tuples they made the load generator's own full
    collections take hundreds of milliseconds, which its clients then reported as latency."""

    def __init__(self) -> None:
        self._bits: dict[int, bytearray] = {}
        self.count = 0

    def add(self, partition: int, offset: int) -> bool:
        """Add one; False if it was already there."""
        bits = self._bits.setdefault(partition, bytearray())
        byte, bit = divmod(offset, 8)
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1, 2 * len(bits)) - len(bits)))
        mask = 1 << bit
        if bits[byte] & mask:
            return False
        bits[byte] |= mask
        self.count += 1
        return True

    def missing_from(self, other: Offsets) -> int:
        """How many of these ``other`` does not hold."""
        missing = 0
        for partition, bits in self._bits.items():
            mine = int.from_bytes(bits, "little")
            theirs = int.from_bytes(other._bits.get(partition, b""), "little")
            missing += (mine & ~theirs).bit_count()
        return missing


@dataclass
class Ledger:
    """Every acknowledged and every consumed (partition, offset), for the loss check."""

    acknowledged: Offsets = field(default_factory=Offsets)
    consumed: Offsets = field(default_factory=Offsets)
    redelivered: int = 0
    first_error: str | None = None


class Soak:
    def __init__(self, cluster: Cluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.bootstrap = cluster.bootstrap_servers
        self.now = Interval()
        self.ledger = Ledger()
        self.producing = True
        self.rng = random.Random(7)

    def _error(self, exc: BaseException) -> None:
        self.now.errors += 1
        if self.ledger.first_error is None:
            self.ledger.first_error = f"{type(exc).__name__}: {exc}"

    # -- load ---------------------------------------------------------------------------

    async def produce(self, index: int, rate: float) -> None:
        from purgatory.clients import Producer

        padding = b"x" * max(0, self.args.record_size - _STAMP.size)
        loop = asyncio.get_running_loop()
        async with Producer(
            self.bootstrap, acks="all", linger_ms=1, client_id=f"soak-producer-{index}"
        ) as producer:
            tick = 0.01
            owed = 0.0
            next_tick = loop.time()
            while self.producing:
                owed += rate * tick
                while owed >= 1:
                    owed -= 1
                    sent = time.perf_counter()
                    try:
                        future = await producer.send(TOPIC, _STAMP.pack(time.time_ns()) + padding)
                    except KafkaError as exc:
                        self._error(exc)
                        continue
                    self.now.sent += 1
                    future.add_done_callback(functools.partial(self._acknowledged, sent=sent))
                next_tick += tick
                await asyncio.sleep(max(0.0, next_tick - loop.time()))
            await producer.flush(timeout_s=60)

    def _acknowledged(self, future: asyncio.Future[Any], *, sent: float) -> None:
        failure = asyncio.CancelledError() if future.cancelled() else future.exception()
        if failure is not None:  # a record the producer could not deliver
            self._error(failure)
            return
        metadata = future.result()
        self.now.acknowledged += 1
        self.now.produce_ms.append((time.perf_counter() - sent) * 1000)
        self.ledger.acknowledged.add(metadata.partition, metadata.offset)

    async def member(self, index: int, stop: asyncio.Event) -> None:
        from purgatory.clients import Consumer

        consumer = Consumer(
            self.bootstrap,
            group_id=GROUP,
            auto_offset_reset="earliest",
            client_id=f"soak-member-{index}",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000,
        )
        listener = _CountRebalances(self)
        consumer.subscribe([TOPIC], listener)
        try:
            while not stop.is_set():
                try:
                    records = await consumer.poll(timeout_ms=200)
                except KafkaError as exc:
                    self._error(exc)
                    await asyncio.sleep(0.1)
                    continue
                now_ns = time.time_ns()
                for record in records:
                    if not self.ledger.consumed.add(record.partition, record.offset):
                        self.ledger.redelivered += 1
                        continue
                    self.now.consumed += 1
                    if record.value is not None and len(record.value) >= _STAMP.size:
                        (stamp,) = _STAMP.unpack_from(record.value)
                        self.now.end_to_end_ms.append((now_ns - stamp) / 1e6)
        finally:
            await consumer.close()

    async def group(self, done: asyncio.Event) -> None:
        """``--members`` members; every ``--churn-every`` seconds the oldest leaves and a new
        one joins. Stops when ``done`` is set."""
        members: list[tuple[asyncio.Event, asyncio.Task[None]]] = []
        joined = 0

        def join() -> None:
            nonlocal joined
            stop = asyncio.Event()
            members.append((stop, asyncio.ensure_future(self.member(joined, stop))))
            joined += 1

        for _ in range(self.args.members):
            join()
        churn = self.args.churn_every
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(churn if churn > 0 else None):
                    await done.wait()
            if not done.is_set() and churn > 0:
                stop, task = members.pop(0)
                stop.set()
                await task
                join()
        for stop, _ in members:
            stop.set()
        await asyncio.gather(*(task for _, task in members))

    async def long_poll(self, port: int) -> None:
        from purgatory.clients import Connection
        from purgatory.protocol import messages as m
        from purgatory.protocol.api import ApiKey

        conn = await Connection.open("127.0.0.1", port)
        try:
            while self.producing:
                max_wait = self.rng.randint(1000, 3000)
                request = m.FetchRequest(
                    -1,
                    max_wait,
                    1,
                    1 << 20,
                    [m.FetchTopic(IDLE_TOPIC, [m.FetchPartition(0, 0, 1 << 20)])],
                )
                sent = time.perf_counter()
                try:
                    response = await conn.send(
                        ApiKey.FETCH, request, version=1, timeout_ms=max_wait + 30_000
                    )
                    code = response.responses[0].partitions[0].error_code
                    if code:
                        raise KafkaError(code, f"long poll on {IDLE_TOPIC}")
                except KafkaError as exc:
                    self._error(exc)
                    await asyncio.sleep(0.5)
                    continue
                waited = (time.perf_counter() - sent) * 1000
                self.now.long_poll_late_ms.append(waited - max_wait)
                self.now.long_poll_broker_late_ms.append(response.wait_time_ms - max_wait)
        finally:
            await conn.close()

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        args = self.args
        leader = self.cluster.partition(IDLE_TOPIC, 0).leader
        group_done = asyncio.Event()
        tasks = [
            asyncio.ensure_future(self.produce(i, args.rate / args.producers))
            for i in range(args.producers)
        ]
        tasks += [
            asyncio.ensure_future(self.long_poll(self.cluster.ports[leader]))
            for _ in range(args.long_polls)
        ]
        group = asyncio.ensure_future(self.group(group_done))
        rows: list[dict[str, Any]] = []
        started = time.monotonic()
        end = started + args.duration
        try:
            while time.monotonic() < end:
                await asyncio.sleep(min(args.interval, max(0.0, end - time.monotonic())))
                rows.append(await self._row(len(rows) + 1, time.monotonic() - started))
                self._progress(rows[-1])
                for task in (*tasks, group):
                    failure = task.exception() if task.done() else None
                    if failure is not None:
                        raise failure
            self.producing = False
            await asyncio.gather(*tasks)
            drained = await self._drain()
        finally:
            self.producing = False
            group_done.set()
            await asyncio.gather(*tasks, group, return_exceptions=True)
        return self._summary(rows, drained)

    async def _drain(self) -> bool:
        """Let the group read every acknowledged record (60 s at most)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.ledger.acknowledged.missing_from(self.ledger.consumed):
                return True
            await asyncio.sleep(0.1)
        return False

    async def _row(self, index: int, elapsed_s: float) -> dict[str, Any]:
        now, self.now = self.now, Interval()
        brokers = range(self.cluster.size)
        rss = [rss_mb(self.cluster.pid(i)) for i in brokers]
        logs = [round(b / 2**20, 1) for b in await asyncio.to_thread(self._log_bytes)]
        return {
            "interval": index,
            "elapsed_s": round(elapsed_s, 1),
            "sent": now.sent,
            "acknowledged": now.acknowledged,
            "consumed": now.consumed,
            "errors": now.errors,
            "rebalances": now.rebalances,
            "produce_ms": latency_summary(now.produce_ms),
            "end_to_end_ms": latency_summary(now.end_to_end_ms),
            "long_polls": len(now.long_poll_late_ms),
            "long_poll_late_ms": latency_summary(now.long_poll_late_ms),
            "long_poll_broker_late_ms": latency_summary(now.long_poll_broker_late_ms),
            "broker_rss_mb": rss,
            "broker_log_mb": logs,
            "load_rss_mb": rss_mb(os.getpid()),
        }

    def _log_bytes(self) -> list[float]:
        """Each broker's ``purgatory_log_memory_bytes``: HTTP, so off the event loop, where
        it would hold up the clients whose latency is being measured."""
        return [
            self.cluster.metrics(i)[("purgatory_log_memory_bytes", ())]
            for i in range(self.cluster.size)
        ]

    def _progress(self, row: dict[str, Any]) -> None:
        _say(
            f"soak {row['elapsed_s']:.0f}/{self.args.duration:.0f} s: "
            f"{row['acknowledged']} acked, produce p99 {row['produce_ms']['p99']} ms, "
            f"end-to-end p99 {row['end_to_end_ms']['p99']} ms, "
            f"long polls late p99 {row['long_poll_late_ms']['p99']} ms "
            f"(broker {row['long_poll_broker_late_ms']['p99']} ms), "
            f"RSS {row['broker_rss_mb']} MB (logs {row['broker_log_mb']} MB), "
            f"{row['errors']} errors"
        )

    def _summary(self, rows: list[dict[str, Any]], drained: bool) -> dict[str, Any]:
        lost = self.ledger.acknowledged.missing_from(self.ledger.consumed)
        first, last = rows[0]["broker_rss_mb"], rows[-1]["broker_rss_mb"]
        return {
            "benchmark": "soak",
            "cpus": os.cpu_count(),
            "brokers": self.cluster.size,
            "duration_s": self.args.duration,
            "rate": self.args.rate,
            "rows": rows,
            "acknowledged": self.ledger.acknowledged.count,
            "consumed": self.ledger.consumed.count,
            "lost": lost,
            "redelivered": self.ledger.redelivered,
            "drained": drained,
            "errors": sum(r["errors"] for r in rows),
            "first_error": self.ledger.first_error,
            "rebalances": sum(r["rebalances"] for r in rows),
            "worst_p99_ms": {
                kind: max(r[kind]["p99"] for r in rows)
                for kind in (
                    "produce_ms",
                    "end_to_end_ms",
                    "long_poll_late_ms",
                    "long_poll_broker_late_ms",
                )
            },
            "broker_rss_mb": {
                "first": first,
                "last": last,
                "peak": max(max(r["broker_rss_mb"]) for r in rows),
            },
        }


class _CountRebalances:
    """Counts the assignments a member receives (one per rebalance it takes part in)."""

    def __init__(self, soak: Soak) -> None:
        self.soak = soak

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.soak.now.rebalances += 1


def plot(result: dict[str, Any], path: Path) -> None:
    """Per interval: each broker's RSS, and the p99 latencies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    minutes = [r["elapsed_s"] / 60 for r in rows]
    fig, (rss_ax, lat_ax) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for broker in range(result["brokers"]):
        line = rss_ax.plot(
            minutes, [r["broker_rss_mb"][broker] for r in rows], label=f"broker {broker}: RSS"
        )[0]
        rss_ax.plot(
            minutes,
            [r["broker_log_mb"][broker] for r in rows],
            color=line.get_color(),
            linestyle=":",
            label=f"broker {broker}: its logs",
        )
    rss_ax.set(ylabel="MB", title="Broker memory")
    for kind, label in (
        ("produce_ms", "produce, acks=all"),
        ("end_to_end_ms", "end to end"),
        ("long_poll_late_ms", "long poll past its deadline"),
        ("long_poll_broker_late_ms", "long poll past its deadline, broker's wait time"),
    ):
        lat_ax.plot(minutes, [r[kind]["p99"] for r in rows], label=label)
    lat_ax.set(xlabel="minutes", ylabel="p99 per interval (ms)", title="Latency")
    for ax in (rss_ax, lat_ax):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"purgatory perf soak: {result['rate']:g} records/s, {result['brokers']} brokers")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    import uvloop

    from purgatory.clients.cli.tools import client_logging

    problem = None
    if args.duration <= 0 or args.interval <= 0:
        problem = "--duration and --interval must be positive"
    elif args.retention_bytes < 1 << 20:
        problem = "--retention-bytes must be at least one segment (1048576)"
    elif args.rate <= 0 or args.producers < 1 or args.members < 1 or args.brokers < 1:
        problem = "--rate, --producers, --members and --brokers must be positive"
    if problem:
        print(f"purgatory perf soak: {problem}", file=sys.stderr)
        return 2
    client_logging()  # the clients' warnings to stderr: stdout is the JSON
    rf = min(args.brokers, 3)
    config = {"log.level": "ERROR", "min.insync.replicas": str(min(rf, 2))}
    try:
        with Cluster(args.brokers, config=config, mode="process") as cluster:
            retention = {"retention.bytes": args.retention_bytes, "segment.bytes": 1 << 20}
            cluster.create_topic(TOPIC, args.partitions, rf, retention)
            cluster.create_topic(IDLE_TOPIC, 1, rf)
            _say(f"soak: {args.brokers} brokers up; {args.duration:.0f} s of load")
            result = uvloop.run(Soak(cluster, args).run())
    except (ClusterError, KafkaError, OSError) as exc:
        print(f"purgatory perf soak: {exc}", file=sys.stderr)
        return 1
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "soak.json").write_text(json.dumps(result, indent=2))
        plot(result, out / "soak.png")
        result["files"] = [str(out / "soak.json"), str(out / "soak.png")]
    print(json.dumps(result, indent=None if args.json else 2))
    return 0 if result["lost"] == 0 and result["drained"] else 1
