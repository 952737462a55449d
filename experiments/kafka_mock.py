"""`purgatory perf kafka-mock`: the same confluent-kafka (librdkafka) producer and consumer
against librdkafka's own mock cluster and against Purgatory, side by side in one run.

Two measures per target (3 brokers each, topic of 3 partitions, replication factor 3):

- produce throughput: ``--num-records`` records of ``--record-size`` bytes, acks=1 and
  acks=all, linger.ms 5, from the first ``produce()`` to ``flush()`` returning, once
  one acks=all record per partition has been acknowledged (steady state, not topic
  creation: a follower that asked before its leader knew the new partition backs off
  ``replica.fetch.backoff.ms``, as in Kafka, and acks=all waits for it);
- end-to-end latency at a low rate: ``--rate`` records/s for ``--seconds`` seconds to one
  partition, after a second of the same unmeasured, read by a consumer with
  ``fetch.wait.max.ms`` 500 (librdkafka's default) that is already fetching: a broker
  that parks fetches answers when the record arrives, one that answers an empty fetch at
  MaxWait (the mock) makes records wait up to half a second.

Prints one JSON document; figures are reported as measured, targets beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOPIC = "kafka-mock-bench"
_SENT_AT = struct.Struct(">d")


def _producer(servers: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": servers, "linger.ms": 5, **extra})


def create_topic(servers: str, create: bool, replication_factor: int = 3) -> None:
    """Create the topic, 3 partitions (the mock's CreateTopics never answers: it is
    auto-created by a first record), wait until every partition has a leader, and until
    each has acknowledged an acks=all record."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": servers})
    if create:
        futures = admin.create_topics(
            [NewTopic(TOPIC, 3, replication_factor)], operation_timeout=10
        )
        for future in futures.values():
            future.result(timeout=20)
    else:
        producer = _producer(servers)
        producer.produce(TOPIC, b"create")
        producer.flush(10)
    _replicated(servers, leaders(admin, TOPIC))


def _replicated(servers: str, partitions: int, timeout: float = 20) -> None:
    """One acks=all record to each partition, acknowledged (retried until ``timeout``)."""
    producer = _producer(servers, acks="all", **{"message.timeout.ms": int(timeout * 1000)})
    failed: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for partition in range(partitions):
        producer.produce(TOPIC, b"warm-up", partition=partition, on_delivery=delivered)
    left = producer.flush(timeout + 5)
    if failed or left:
        raise RuntimeError(f"{TOPIC} did not acknowledge acks=all records: {failed or left}")


def leaders(admin: Any, topic: str, timeout: float = 20) -> int:
    """Wait until every partition of ``topic`` has a leader, as a confluent-kafka
    ``AdminClient`` sees it; return how many partitions it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and found.partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return len(found.partitions)
        time.sleep(0.1)
    raise RuntimeError(f"{topic} did not get leaders in time")


def produce_all(
    producer: Any, topic: str, value: bytes, records: int, delivered: Callable[[Any, Any], None]
) -> None:
    """Hand ``records`` copies of ``value`` to ``producer`` as fast as it takes them,
    serving its delivery callbacks whenever its queue is full; flushing is the caller's."""
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)


def throughput(servers: str, acks: str, records: int, size: int) -> dict[str, float]:
    producer = _producer(servers, acks=acks, **{"queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    failed = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    start = time.perf_counter()
    produce_all(producer, TOPIC, value, records, delivered)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    return {
        "records_per_s": round(records / elapsed),
        "mb_per_s": round(records * size / elapsed / 1e6, 2),
        "failed": failed + left,
    }


def end_to_end(servers: str, rate: int, seconds: float, warmup: float = 1.0) -> dict[str, float]:
    """Records at ``rate``/s to partition 0 for ``warmup`` + ``seconds``, each carrying the
    time it was produced; the latencies of those produced after the warm-up, as the
    consumer received them."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "kafka-mock-bench",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
        }
    )
    producer = _producer(servers, acks="1", **{"linger.ms": 0})
    producer.produce(TOPIC, b"warm-up", partition=0)
    producer.flush(10)
    high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    consumer.assign([TopicPartition(TOPIC, 0, high)])
    _fetching(consumer, producer)
    warm = int(rate * warmup)
    total = warm + int(rate * seconds)
    latencies: list[float] = []
    start = time.perf_counter()
    measured_from = start + warmup
    sent = received = 0
    while received < total and time.perf_counter() - start < warmup + seconds + 10:
        due = start + sent / rate
        if sent < total and time.perf_counter() >= due:
            producer.produce(TOPIC, _SENT_AT.pack(time.perf_counter()), partition=0)
            producer.poll(0)
            sent += 1
            continue
        msg = consumer.poll(0.001)
        value = msg.value() if msg is not None and msg.error() is None else None
        if value is not None and len(value) == _SENT_AT.size:
            received += 1
            sent_at = _SENT_AT.unpack(value)[0]
            if sent_at >= measured_from:
                latencies.append((time.perf_counter() - sent_at) * 1000)
    consumer.close()
    producer.flush(10)
    latencies.sort()
    if not latencies:
        return {"received": 0}
    return {
        "received": len(latencies),
        "sent": sent - warm,
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1),
        "max_ms": round(latencies[-1], 1),
    }


def _fetching(consumer: Any, producer: Any, timeout: float = 30.0) -> None:
    """Wait until ``consumer``'s group coordinator answers and it reads a record produced
    after its assignment: the latency run measures a consumer already fetching, not its
    start. (A consumer with a group.id looks up its coordinator even when it only assigns;
    the first lookup makes Apache Kafka create __consumer_offsets, 50 partitions, which
    slowed its first seconds of records by up to 2 s.)"""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.committed([TopicPartition(TOPIC, 0)], timeout=5)
            break
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                break  # kfake's answer for a group with no offsets: the coordinator answered
            if time.monotonic() > deadline:  # else not yet elected or loaded
                raise
            consumer.poll(0.1)
    producer.produce(TOPIC, b"fetching", partition=0)
    producer.flush(10)
    while time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None and msg.value() == b"fetching":
            return
    raise RuntimeError(f"the consumer read nothing of {TOPIC} in {timeout:.0f} s")


def measure(servers: str, args: argparse.Namespace, create: bool = True) -> dict[str, Any]:
    create_topic(servers, create)
    return {
        "acks=1": throughput(servers, "1", args.num_records, args.record_size),
        "acks=all": throughput(servers, "all", args.num_records, args.record_size),
        "end_to_end": end_to_end(servers, args.rate, args.seconds),
    }


def measure_mock(args: argparse.Namespace) -> dict[str, Any]:
    """librdkafka's mock cluster lives inside the client that creates it; the others
    connect to the brokers it lists."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 3, "bootstrap.servers": ""})
    brokers = holder.list_topics(timeout=10).brokers.values()
    servers = ",".join(f"{b.host}:{b.port}" for b in brokers)
    try:
        return measure(servers, args, create=False)
    finally:
        holder.flush(5)


async def _purgatory_brokers(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.experiments.processes import local_brokers

    with tempfile.TemporaryDirectory(prefix="kafka-mock-bench-") as logs:
        async with local_brokers(3, {"log.level": "WARNING"}, Path(logs)) as brokers:
            return await asyncio.to_thread(measure, brokers.bootstrap, args)


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "records": args.num_records,
        "record_size": args.record_size,
        "rate": args.rate,
        "seconds": args.seconds,
    }
    targets = ("mock", "purgatory") if args.target == "both" else (args.target,)
    if "mock" in targets:
        out["mock"] = measure_mock(args)
    if "purgatory" in targets:
        if args.bootstrap:
            out["purgatory"] = measure(args.bootstrap, args)
        else:
            out["purgatory"] = asyncio.run(_purgatory_brokers(args))
    if "mock" in out and "purgatory" in out:
        mock, ours = out["mock"], out["purgatory"]
        out["vs_mock"] = {
            acks: round(ours[acks]["records_per_s"] / mock[acks]["records_per_s"], 2)
            for acks in ("acks=1", "acks=all")
        }
    out["targets"] = {"throughput_vs_mock": ">= 0.8", "end_to_end_p99_ms": "<= 20"}
    return out


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka
    except ImportError:
        print(
            "purgatory perf kafka-mock: needs confluent-kafka (pip install confluent-kafka)",
            file=sys.stderr,
        )
        return 1
    try:
        result = run(args)
    except (RuntimeError, OSError, confluent_kafka.KafkaException) as exc:
        print(f"purgatory perf kafka-mock: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
