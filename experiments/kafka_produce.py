"""`purgatory perf kafka-produce`: the Kafka listener's produce path, request by request.

One broker process and a Produce v9 request (acks=1, one partition, a v2 batch of
``--records-per-batch`` records of ``--record-size`` bytes) sent ``--num-requests`` times,
``--max-in-flight`` at a time, on one connection; then the same frames to the framed echo
server answering each with the broker's own response (the ceiling of the socket and the
client, with no broker in between). Reported: requests/s of both, and the broker's CPU
time per request (user + system of its process, from /proc), the figure that moves when
decoding or validation gets dearer. Compare two commits by running each, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOPIC = "kafka-produce-bench"


def produce_frame(records_per_batch: int, record_size: int) -> bytes:
    """A whole Produce v9 request frame (length prefix included)."""
    from kio.serial import entity_writer

    from purgatory.protocol.api import ApiKey
    from purgatory.protocol.kafka_records import encode
    from purgatory.protocol.kafka_schemas import build, request_class

    cls = request_class(ApiKey.PRODUCE, 9)
    schema = sys.modules[cls.__module__]
    now = int(time.time() * 1000)
    batch = encode([(now, b"k", b"v" * record_size, ()) for _ in range(records_per_batch)])
    partition = build(schema.PartitionProduceData, index=0, records=batch)
    topic = build(schema.TopicProduceData, name=TOPIC, partition_data=(partition,))
    body = build(cls, transactional_id=None, acks=1, timeout=30_000, topic_data=(topic,))
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    client = b"perf"
    header = struct.pack(">hhih", int(ApiKey.PRODUCE), 9, 1, len(client)) + client + b"\x00"
    payload = header + out.getvalue()
    return struct.pack(">i", len(payload)) + payload


async def pipeline(host: str, port: int, frame: bytes, count: int, window: int) -> bytes:
    """Send ``frame`` ``count`` times, at most ``window`` unanswered; the last answer."""
    reader, writer = await asyncio.open_connection(host, port)
    slots = asyncio.Semaphore(window)
    last = b""

    async def answers() -> None:
        nonlocal last
        for _ in range(count):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            last = await reader.readexactly(size)
            slots.release()

    reading = asyncio.create_task(answers())
    for _ in range(count):
        await slots.acquire()
        writer.write(frame)
    await reading
    writer.close()
    return last


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure_broker(args: argparse.Namespace, frame: bytes) -> tuple[dict[str, Any], bytes]:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        NewTopic,
    )

    from purgatory.experiments.processes import local_brokers

    with tempfile.TemporaryDirectory(prefix="kafka-produce-bench-") as logs:
        async with local_brokers(1, {"log.level": "WARNING"}, Path(logs)) as brokers:
            assert brokers.supervisor is not None  # local_brokers started them
            pid = brokers.supervisor.procs[0].pid
            admin = AdminClient({"bootstrap.servers": brokers.bootstrap, "log_level": 3})
            for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                await asyncio.to_thread(future.result, 20)
            host, port = brokers.bootstrap.split(",")[0].rsplit(":", 1)
            await pipeline(host, int(port), frame, min(2000, args.num_requests), args.max_in_flight)
            cpu, start = _cpu_s(pid), time.perf_counter()
            answer = await pipeline(host, int(port), frame, args.num_requests, args.max_in_flight)
            elapsed, cpu = time.perf_counter() - start, _cpu_s(pid) - cpu
    return {
        "requests_per_s": round(args.num_requests / elapsed),
        "broker_cpu_us_per_request": round(cpu / args.num_requests * 1e6, 1),
    }, answer


async def _measure_echo(args: argparse.Namespace, frame: bytes, answer: bytes) -> dict[str, Any]:
    from purgatory.clients.perf.echo import EchoServer

    reply = struct.pack(">i", len(answer)) + answer
    with EchoServer(reply) as echo:
        await pipeline("127.0.0.1", echo.port, frame, min(2000, args.num_requests), 32)
        start = time.perf_counter()
        await pipeline("127.0.0.1", echo.port, frame, args.num_requests, args.max_in_flight)
        elapsed = time.perf_counter() - start
    return {"requests_per_s": round(args.num_requests / elapsed)}


def _check_accepted(answer: bytes) -> None:
    """The broker's Produce v9 answer (correlation id, header tags, body) says NONE."""
    from kio.serial import entity_reader

    from purgatory.protocol.api import ApiKey
    from purgatory.protocol.kafka_schemas import response_class

    body, _ = entity_reader(response_class(ApiKey.PRODUCE, 9))(answer, 5)
    partition = body.responses[0].partition_responses[0]
    if partition.error_code.value:
        raise RuntimeError(f"the broker refused the produce: {partition.error_message}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    frame = produce_frame(args.records_per_batch, args.record_size)
    broker, answer = await _measure_broker(args, frame)
    _check_accepted(answer)
    echo = await _measure_echo(args, frame, answer)
    return {
        "benchmark": "kafka-produce",
        "num_requests": args.num_requests,
        "records_per_batch": args.records_per_batch,
        "record_size": args.record_size,
        "max_in_flight": args.max_in_flight,
        "broker": broker,
        "echo": echo,
        "vs_echo": round(broker["requests_per_s"] / echo["requests_per_s"], 2),
    }


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka  # noqa: F401  (its AdminClient creates the topic)
    except ImportError:
        print("purgatory perf kafka-produce: needs confluent-kafka", file=sys.stderr)
        return 1
    try:
        result = asyncio.run(run(args))
    except (RuntimeError, OSError) as exc:
        print(f"purgatory perf kafka-produce: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
