"""`purgatory perf produce`: pipelined produce requests of N records each against one broker,
optionally next to the framed echo ceiling in the same run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.interrupts import Interrupts
from purgatory.clients.perf.load import LoadStats, PipelinedLoad
from purgatory.clients.perf.progress import progress_of
from purgatory.clients.perf.running import run_benchmark
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, encode_request_into
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import encode_batch

if TYPE_CHECKING:
    from purgatory.clients.perf.echo import EchoServer

LEADER_TIMEOUT_S = 10.0  # how long a new topic's partitions may go without a leader
ECHO_ROUNDS = 5  # --echo: turns the broker and the echo server take, by default


def _check(response: m.ProduceResponse) -> bool:
    return all(p.error_code == 0 for t in response.responses for p in t.partitions)


async def produce_load(
    host: str,
    port: int,
    topic: str,
    num_requests: int,
    record_size: int,
    batch_size: int,
    window: int,
    *,
    acks: int,
    throughput: float,
    duration_s: float | None,
    progress: bool,
    partitions: list[int] | None = None,
    label: str = "records",
    started: Callable[[PipelinedLoad], None] | None = None,
) -> LoadStats:
    """One pipelined run; ``started(load)`` is told of it before it sends (to stop it)."""
    value = os.urandom(record_size)
    batch = encode_batch([(None, value)] * batch_size, timestamp_ms=0)
    parts = partitions or [0]
    bodies = [
        msgspec.Raw(
            msgspec.msgpack.encode(
                m.ProduceRequest(
                    acks, 30000, [m.TopicProduceData(topic, [m.PartitionProduceData(p, batch)])]
                )
            )
        )
        for p in parts
    ]
    n = len(bodies)

    def encode(buffer: bytearray, correlation_id: int) -> None:
        encode_request_into(
            buffer, ApiKey.PRODUCE, 0, correlation_id, "perf", bodies[correlation_id % n]
        )

    load = PipelinedLoad(
        host,
        port,
        api_key=ApiKey.PRODUCE,
        api_version=0,
        encode=encode,
        check=_check,
        total=num_requests,
        records_per_request=batch_size,
        record_bytes=record_size,
        window=window,
        throughput=throughput,
        duration_s=duration_s,
        expect_response=acks != 0,
    )
    if started is not None:
        started(load)
    async with progress_of(
        load, num_requests * batch_size, batch_size, enabled=progress, label=label
    ):
        return await load.run()


async def _prepare(
    bootstrap: str, topic: str, partitions: int, leader_timeout_s: float = LEADER_TIMEOUT_S
) -> tuple[str, int, list[int]]:
    """Create the topic if needed; return one broker's address and the partitions it leads.

    A topic just created may not have its leaders yet: metadata is asked again until every
    partition has one, for up to ``leader_timeout_s``."""
    async with AdminClient(bootstrap) as admin:
        with contextlib.suppress(KafkaError):
            await admin.create_topic(topic, partitions)
        await admin.cluster.ensure_topics([topic], auto_create=False)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + leader_timeout_s
        while True:
            parts = admin.cluster.partitions_for(topic) or []
            leaderless = [p.partition_index for p in parts if p.leader_id < 0]
            if parts and not leaderless:
                break
            if loop.time() >= deadline:
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    f"topic {topic!r}: partitions {leaderless} still have no leader after "
                    f"{leader_timeout_s:g} s",
                )
            await asyncio.sleep(0.05)
            await admin.cluster.refresh([topic])
        leaders: dict[int, list[int]] = {}
        for p in parts:
            leaders.setdefault(p.leader_id, []).append(p.partition_index)
        leader = min(leaders)
        if leader not in admin.cluster.brokers:
            raise KafkaError(
                ErrorCode.BROKER_NOT_AVAILABLE, f"leader {leader} of {topic!r} is not in metadata"
            )
        host, port = admin.cluster.brokers[leader]
        return host, port, leaders[leader]


def main(args: argparse.Namespace) -> int:
    """The first Ctrl-C ends the run under way once its requests in flight are answered
    (and skips the rounds left), a second at once; the summary covers what ran, with
    ``"interrupted": true``, and the exit status is 130."""
    if args.record_size < 1 or args.batch_size < 1 or args.num_records < 1:
        print("record size, batch size and record count must be positive", file=sys.stderr)
        return 2
    if args.rounds is not None and not args.echo:
        print("--rounds alternates the broker and the echo server: give --echo", file=sys.stderr)
        return 2
    num_requests = max(1, args.num_records // args.batch_size)
    rounds = min(ECHO_ROUNDS, num_requests) if args.rounds is None else args.rounds
    if args.echo and not 1 <= rounds <= num_requests:
        print(f"--rounds must be 1..{num_requests} (one request a round)", file=sys.stderr)
        return 2
    from purgatory.clients.perf.echo import EchoServer, produce_reply

    # The echo server's process is forked here, before any event loop runs and before the
    # signal handlers are ours (it keeps the default SIGTERM, which stops it).
    echo = EchoServer(produce_reply()) if args.echo else contextlib.nullcontext()
    with echo as echo_server:
        summary = run_benchmark(
            "perf produce",
            functools.partial(_measure, args, num_requests, rounds, echo=echo_server),
            failures=(KafkaError, ConnectionError, ValueError),
            given_up="interrupted before the load began",
            as_json=args.json,
        )
    if isinstance(summary, int):
        return summary
    if summary["interrupted"]:
        return 130
    return 1 if summary["errors"] else 0


async def _measure(
    args: argparse.Namespace,
    num_requests: int,
    rounds: int,
    interrupts: Interrupts,
    *,
    echo: EchoServer | None,
) -> dict[str, Any]:
    """The summary. A signal before the first run cancels this task (CancelledError); one
    during a run stops that run."""
    acks = -1 if args.acks == "all" else int(args.acks)
    task = asyncio.current_task()
    assert task is not None
    loads: list[PipelinedLoad] = []

    def on_signal(name: str, count: int) -> None:
        if loads:
            loads[-1].stop(now=count > 1)
        else:
            task.cancel()

    interrupts.on_signal = on_signal
    if interrupts.count:
        raise asyncio.CancelledError
    host, port, parts = await _prepare(args.bootstrap, args.topic, args.partitions)

    async def run(
        at_host: str, at_port: int, requests: int, duration_s: float | None, label: str
    ) -> LoadStats:
        return await produce_load(
            at_host,
            at_port,
            args.topic,
            requests,
            args.record_size,
            args.batch_size,
            args.max_in_flight,
            acks=acks,
            throughput=args.throughput,
            duration_s=duration_s,
            progress=not args.json,
            partitions=parts,
            label=label,
            started=_stopped_if(interrupts, loads.append),
        )

    summary: dict[str, Any] = {
        "benchmark": "produce",
        "broker": f"{host}:{port}",
        "topic": args.topic,
        "partitions": parts,
        "acks": acks,
        "record_size": args.record_size,
        "batch_size": args.batch_size,
        "max_in_flight": args.max_in_flight,
    }
    if echo is None:
        stats = await run(host, port, num_requests, args.duration, "records")
        summary.update(stats.summary())
    else:
        stats, beside = await _beside_echo(
            run, host, port, echo.port, num_requests, args.duration, rounds, interrupts
        )
        summary.update(stats.summary())
        summary.update(beside)
    return summary


def _stopped_if(
    interrupts: Interrupts, started: Callable[[PipelinedLoad], None]
) -> Callable[[PipelinedLoad], None]:
    """``started``, and a load that starts after a signal is stopped before it sends."""

    def start(load: PipelinedLoad) -> None:
        started(load)
        if interrupts.count:
            load.stop()

    return start


async def _beside_echo(
    run: Callable[[str, int, int, float | None, str], Awaitable[LoadStats]],
    host: str,
    port: int,
    echo_port: int,
    num_requests: int,
    duration_s: float | None,
    rounds: int,
    interrupts: Interrupts,
) -> tuple[LoadStats, dict[str, Any]]:
    """The broker and the framed echo server take turns, ``rounds`` times, each echo run
    sending as many requests as the broker's before it: a machine whose speed drifts
    (shared cores, frequency) meets both in about the same state. Returns the broker's
    runs as one, and the summary's echo part: the echo runs as one, the fraction of their
    rates over all rounds, and each round's. A signal ends the rounds early."""
    broker_runs: list[LoadStats] = []
    echo_runs: list[LoadStats] = []
    for i in range(rounds):
        share = num_requests // rounds + (i < num_requests % rounds)
        turn = f"{i + 1}/{rounds}"
        ran = await run(
            host, port, share, duration_s / rounds if duration_s else None, f"broker {turn}"
        )
        broker_runs.append(ran)
        if interrupts.count:
            break
        echo_runs.append(
            await run("127.0.0.1", echo_port, ran.requests or share, None, f"echo {turn}")
        )
        if interrupts.count:
            break
    stats = LoadStats.combined(broker_runs)
    echoed = LoadStats.combined(echo_runs)
    return stats, {
        "echo": echoed.summary(),
        "fraction_of_echo": _fraction(stats, echoed),
        "rounds": [
            {
                "requests_per_sec": round(b.requests_per_sec, 1),
                "echo_requests_per_sec": round(e.requests_per_sec, 1),
                "fraction_of_echo": _fraction(b, e),
            }
            for b, e in zip(broker_runs, echo_runs, strict=False)
        ],
    }


def _fraction(broker: LoadStats, echo: LoadStats) -> float | None:
    return round(broker.requests_per_sec / echo.requests_per_sec, 3) if echo.requests else None
