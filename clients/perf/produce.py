"""`purgatory perf produce`: pipelined produce requests of N records each against one broker,
optionally next to the framed echo ceiling in the same run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from typing import Any

import msgspec
import uvloop

from purgatory.clients.admin import AdminClient
from purgatory.clients.perf.load import LoadStats, PipelinedLoad
from purgatory.clients.perf.progress import progress_of
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, encode_request_into
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import encode_batch

LEADER_TIMEOUT_S = 10.0  # how long a new topic's partitions may go without a leader


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
) -> LoadStats:
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
    async with progress_of(load, num_requests * batch_size, batch_size, enabled=progress):
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
    acks = -1 if args.acks == "all" else int(args.acks)
    if args.record_size < 1 or args.batch_size < 1 or args.num_records < 1:
        print("record size, batch size and record count must be positive", file=sys.stderr)
        return 2
    num_requests = max(1, args.num_records // args.batch_size)
    try:
        host, port, parts = uvloop.run(_prepare(args.bootstrap, args.topic, args.partitions))
    except (KafkaError, ConnectionError, ValueError) as exc:
        print(f"purgatory perf produce: {exc}", file=sys.stderr)
        return 1
    stats = uvloop.run(
        produce_load(
            host,
            port,
            args.topic,
            num_requests,
            args.record_size,
            args.batch_size,
            args.max_in_flight,
            acks=acks,
            throughput=args.throughput,
            duration_s=args.duration,
            progress=not args.json,
            partitions=parts,
        )
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
        **stats.summary(),
    }
    if args.echo:
        from purgatory.clients.perf.echo import EchoServer, produce_reply

        with EchoServer(produce_reply()) as echo:
            echo_stats = uvloop.run(
                produce_load(
                    "127.0.0.1",
                    echo.port,
                    args.topic,
                    stats.requests or num_requests,
                    args.record_size,
                    args.batch_size,
                    args.max_in_flight,
                    acks=acks,
                    throughput=args.throughput,
                    duration_s=None,
                    progress=not args.json,
                )
            )
        e = echo_stats.summary()
        summary["echo"] = e
        summary["fraction_of_echo"] = (
            round(summary["requests_per_sec"] / e["requests_per_sec"], 3)
            if e["requests_per_sec"]
            else None
        )
    print(json.dumps(summary, indent=None if args.json else 2))
    return 1 if stats.errors else 0
