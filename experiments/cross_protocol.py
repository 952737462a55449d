"""`purgatory perf cross-protocol`: what it costs that one partition log serves both
protocols, measured side by side in one run.

A log keeps each batch in the format it was produced in (ours, magic 1, or Kafka's v2), so
a reader of the same protocol gets stored bytes untouched and a reader of the other pays a
conversion: the broker rewrites our batches as v2 for a Kafka consumer
(``kafka_records.as_kafka_batches``, on every fetch), and our consumer decodes v2 batches
itself. Two measures:

- consume throughput: one broker process, two one-partition topics holding the same
  ``--num-records`` records of ``--record-size`` bytes, one filled by our producer and one
  by confluent-kafka's; each is read from the beginning by our consumer and by
  confluent-kafka's, so each consumer reads its own protocol's records and the other's;
- the conversions alone, in this process: microseconds per record for the broker's
  rewrite and for our client's decoding of either format.

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from purgatory.protocol import kafka_records
from purgatory.protocol.records import assign_offsets, decode_records, encode_batch

OURS, KAFKA = "xp-ours", "xp-kafka"
_BATCH = 500  # records per batch in the in-process measure


async def fill_ours(servers: str, records: int, size: int) -> None:
    from purgatory.clients.producer import Producer

    value = b"x" * size
    async with Producer(servers, acks=1, linger_ms=5, batch_size=65536) as producer:
        for _ in range(records):
            await producer.send(OURS, value, partition=0)
        if not await producer.flush(60):
            raise RuntimeError("our producer did not deliver every record in 60 s")


def fill_kafka(servers: str, records: int, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": servers, "linger.ms": 5, "batch.size": 65536, "acks": "1"}
    )
    value = b"x" * size
    for _ in range(records):
        while True:
            try:
                producer.produce(KAFKA, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("confluent-kafka did not deliver every record in 60 s")


async def read_ours(servers: str, topic: str, records: int) -> float:
    """Records per second our Consumer reads ``topic`` from its beginning (the leader
    known before the clock starts)."""
    from purgatory.clients.consumer import Consumer

    async with Consumer(servers, auto_offset_reset="earliest") as consumer:
        await consumer.assign_topics([topic])
        await consumer.seek_to_beginning()
        got = 0
        start = time.perf_counter()
        deadline = start + 120
        while got < records and time.perf_counter() < deadline:
            got += len(await consumer.poll(timeout_ms=500, max_records=records - got))
        elapsed = time.perf_counter() - start
    if got < records:
        raise RuntimeError(f"our consumer read {got} of {records} records of {topic}")
    return records / elapsed


def read_confluent(servers: str, topic: str, records: int) -> float:
    """Records per second confluent-kafka's Consumer reads ``topic`` from its beginning
    (connected, metadata known, before the clock starts)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "cross-protocol",
            "enable.auto.commit": False,
            # librdkafka pauses fetching for this long whenever its queue holds
            # queued.min.messages (100,000) records; at the default 1000 ms a broker that
            # answers faster than Python drains the queue is measured as slower.
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        consumer.list_topics(topic, timeout=10)  # connected, metadata known
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = 0
        start = time.perf_counter()
        deadline = start + 120
        while got < records and time.perf_counter() < deadline:
            got += sum(m.error() is None for m in consumer.consume(min(10000, records - got), 0.5))
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if got < records:
        raise RuntimeError(f"confluent-kafka read {got} of {records} records of {topic}")
    return records / elapsed


def conversions(records: int, size: int) -> dict[str, float]:
    """Microseconds per record of each conversion, on ``records`` records in batches of
    500 as a fetch returns them."""
    value = b"x" * size
    batches = max(1, records // _BATCH)
    ours = b"".join(
        assign_offsets(encode_batch([(None, value)] * _BATCH, timestamp_ms=1), i * _BATCH, 0)
        for i in range(batches)
    )
    v2 = b"".join(
        kafka_records.encode([(1, None, value, ())] * _BATCH, base_offset=i * _BATCH)
        for i in range(batches)
    )
    n = batches * _BATCH

    def per_record(work: Any, data: bytes) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            work(data)
            best = min(best, time.perf_counter() - start)
        return round(best / n * 1e6, 3)

    return {
        "broker_rewrites_ours_as_v2": per_record(kafka_records.as_kafka_batches, ours),
        "broker_passes_v2_through": per_record(kafka_records.as_kafka_batches, v2),
        "our_client_decodes_ours": per_record(decode_records, ours),
        "our_client_decodes_v2": per_record(decode_records, v2),
    }


async def _measure(servers: str, args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.clients.admin import AdminClient

    async with AdminClient(servers) as admin:
        await admin.delete_topics([OURS, KAFKA])  # left by an earlier run (else: no-op)
        for topic in (OURS, KAFKA):
            await admin.create_topic(topic, 1, 1)
    await fill_ours(servers, args.num_records, args.record_size)
    await asyncio.to_thread(fill_kafka, servers, args.num_records, args.record_size)
    n = args.num_records
    rates = {
        "purgatory_consumer": {
            "same": await read_ours(servers, OURS, n),
            "cross": await read_ours(servers, KAFKA, n),
        },
        "confluent_consumer": {
            "same": await asyncio.to_thread(read_confluent, servers, KAFKA, n),
            "cross": await asyncio.to_thread(read_confluent, servers, OURS, n),
        },
    }
    return {
        reader: {
            "same_protocol_records_per_s": round(r["same"]),
            "other_protocol_records_per_s": round(r["cross"]),
            "ratio": round(r["cross"] / r["same"], 2),
        }
        for reader, r in rates.items()
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.experiments.processes import local_brokers

    out: dict[str, Any] = {"records": args.num_records, "record_size": args.record_size}
    if args.bootstrap:
        out["consume"] = await _measure(args.bootstrap, args)
    else:
        with tempfile.TemporaryDirectory(prefix="cross-protocol-") as logs:
            async with local_brokers(1, {"log.level": "WARNING"}, Path(logs)) as brokers:
                out["consume"] = await _measure(brokers.bootstrap, args)
    out["us_per_record"] = conversions(min(args.num_records, 100_000), args.record_size)
    return out


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka
    except ImportError:
        print(
            "purgatory perf cross-protocol: needs confluent-kafka (pip install confluent-kafka)",
            file=sys.stderr,
        )
        return 1
    from purgatory.protocol.errors import KafkaError

    try:
        result = uvloop.run(_run(args))
    except (RuntimeError, OSError, KafkaError, confluent_kafka.KafkaException) as exc:
        print(f"purgatory perf cross-protocol: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
