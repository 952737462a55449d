"""`purgatory perf transactions`: what a transaction costs, on Purgatory beside Apache
Kafka (and franz-go's kfake, librdkafka's mock cluster), measured the same way with the
same client (confluent-kafka) in one run.

Per system and run, on a cluster of ``--brokers`` (3) started for the run, a topic of 3
partitions and replication factor ``--brokers``:

- commit latency: ``--transactions`` transactions of one record each to every partition,
  one after the other; per transaction the time ``commit_transaction()`` takes (EndTxn,
  answered once PrepareCommit is written) and the time until a read_committed consumer,
  already waiting at the partitions' end, has all three records (the markers written in
  every partition and the last stable offsets moved): p50 and p99 of each;
- transactional throughput: ``--num-records`` records of ``--record-size`` bytes in
  transactions of ``--batch`` records, against the same records from an idempotent
  producer with acks=all (what transactions add to producing).

Systems take turns, the order rotating from one run to the next; the JSON on stdout holds
the medians and every sample, ``--markdown`` the medians as docs/performance.md's table.

    purgatory perf transactions --runs 3
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from purgatory.testing.compare_bench import (
    STARTERS,
    CompareError,
    _progress,
    rounds,
    unavailable,
)
from purgatory.testing.real_kafka import KAFKA_VERSION

SYSTEMS = ("purgatory", "kafka", "kfake", "mock")
TOPIC = "txn-bench"
PARTITIONS = 3
MEASURES = (
    ("commit_p50_ms", "commit_transaction() p50 (ms)"),
    ("commit_p99_ms", "commit_transaction() p99 (ms)"),
    ("visible_p50_ms", "commit to read_committed p50 (ms)"),
    ("visible_p99_ms", "commit to read_committed p99 (ms)"),
    ("transactional_rps", "transactional produce (records/s)"),
    ("idempotent_rps", "idempotent acks=all produce (records/s)"),
)


def _create(servers: str, replication_factor: int, create: bool) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        NewTopic,
    )

    if create:
        admin = AdminClient({"bootstrap.servers": servers})  # held until its answers come
        futures = admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, replication_factor)], operation_timeout=10
        )
        for future in futures.values():
            future.result(timeout=20)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for partition in range(PARTITIONS):  # every partition led and acknowledging
        producer.produce(TOPIC, b"warm-up", partition=partition)
    if producer.flush(30):
        raise CompareError(f"{TOPIC} did not take acks=all records")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def commit_latency(servers: str, transactions: int) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": servers, "transactional.id": f"bench-{time.monotonic_ns()}"}
    )
    producer.init_transactions(30)
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "txn-bench",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    ends = [
        consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        for p in range(PARTITIONS)
    ]
    consumer.assign([TopicPartition(TOPIC, p, ends[p]) for p in range(PARTITIONS)])
    commits, visible = [], []
    try:
        for n in range(transactions):
            producer.begin_transaction()
            for partition in range(PARTITIONS):
                producer.produce(TOPIC, b"%d" % n, partition=partition)
            producer.flush(30)
            started = time.perf_counter()
            producer.commit_transaction(30)
            commits.append((time.perf_counter() - started) * 1000)
            seen = 0
            deadline = time.monotonic() + 30
            while seen < PARTITIONS:
                if time.monotonic() > deadline:
                    raise CompareError(f"transaction {n} not visible to read_committed in 30 s")
                message = consumer.poll(0.05)
                if message is not None and not message.error() and message.value() == b"%d" % n:
                    seen += 1
            visible.append((time.perf_counter() - started) * 1000)
    finally:
        consumer.close()
    return {
        "commit_p50_ms": _percentile(commits, 0.5),
        "commit_p99_ms": _percentile(commits, 0.99),
        "visible_p50_ms": _percentile(visible, 0.5),
        "visible_p99_ms": _percentile(visible, 0.99),
    }


def produce_rate(servers: str, records: int, size: int, batch: int | None) -> float:
    """Records/s: in transactions of ``batch`` records, or (None) idempotent, acks=all."""
    from confluent_kafka import Producer

    config: dict[str, Any] = {
        "bootstrap.servers": servers,
        "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000,
    }
    if batch is None:
        config["enable.idempotence"] = True
    else:
        config["transactional.id"] = f"bench-rate-{time.monotonic_ns()}"
    producer = Producer(config)
    if batch is not None:
        producer.init_transactions(30)
    value = b"x" * size
    started = time.perf_counter()
    sent = 0
    while sent < records:
        if batch is not None:
            producer.begin_transaction()
        for _ in range(min(batch or records, records - sent)):
            while True:
                try:
                    producer.produce(TOPIC, value)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            sent += 1
        if batch is not None:
            producer.commit_transaction(60)
    if producer.flush(60):
        raise CompareError("records were not acknowledged")
    return round(records / (time.perf_counter() - started))


def measure_once(system: str, args: argparse.Namespace) -> dict[str, float]:
    phase = "start"
    try:
        running = STARTERS[system](args.brokers)
        try:
            phase = "topic"
            _create(running.bootstrap, args.brokers, running.creates_topics)
            phase = "commit latency"
            result = commit_latency(running.bootstrap, args.transactions)
            phase = "transactional produce"
            result["transactional_rps"] = produce_rate(
                running.bootstrap, args.num_records, args.record_size, args.batch
            )
            phase = "idempotent produce"
            result["idempotent_rps"] = produce_rate(
                running.bootstrap, args.num_records, args.record_size, None
            )
        finally:
            running.stop()
    except Exception as exc:
        raise CompareError(f"{system}, {phase}: {exc!r}") from exc
    return result


def run(args: argparse.Namespace, systems: list[str]) -> dict[str, Any]:
    samples, medians = rounds(systems, args.runs, lambda system: measure_once(system, args))
    return {
        "benchmark": "transactions",
        "kafka_version": KAFKA_VERSION if "kafka" in systems else None,
        "brokers": args.brokers,
        "transactions": args.transactions,
        "records": args.num_records,
        "record_size": args.record_size,
        "batch": args.batch,
        "runs": args.runs,
        "median": medians,
        "samples": samples,
    }


def markdown(result: dict[str, Any]) -> str:
    systems = list(result["median"])
    lines = ["| | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for name, label in MEASURES:
        cells = [f"{result['median'][s][name]:,.1f}".removesuffix(".0") for s in systems]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        _progress("purgatory perf transactions: needs confluent-kafka")
        return 1
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if not systems or unknown:
        _progress(f"purgatory perf transactions: --systems takes {', '.join(SYSTEMS)}")
        return 2
    if min(args.runs, args.brokers, args.transactions, args.num_records, args.batch) < 1:
        _progress(
            "purgatory perf transactions: --runs, --brokers, --transactions, --num-records "
            "and --batch must be >= 1"
        )
        return 2
    for system in systems:
        if (reason := unavailable(system)) is not None:
            _progress(f"purgatory perf transactions: {system}: {reason}")
            return 1
    try:
        result = run(args, systems)
    except CompareError as exc:
        _progress(f"purgatory perf transactions: {exc}")
        return 1
    if args.markdown:
        print(markdown(result))
    else:
        print(json.dumps(result, indent=None if args.json else 2))
    return 0
