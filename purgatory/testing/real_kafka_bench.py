"""What a test pays for a cluster of Apache Kafka itself (`RealKafka`) against one of
Purgatory's (`Cluster(mode="process")`), started and used the same way.

Per system, size (1 and 3 nodes) and run: the time from the start until the cluster is ready
(its start() returns), and until a first record is acknowledged (a topic created with
replication factor = nodes through the Admin API, then one record produced with acks=all,
both by confluent-kafka); then the resident set size of every node's process (each JVM, each
`purgatory broker`; summed), and the time to stop. Runs alternate between the systems so drift
of the machine falls on both. Progress goes to stderr, medians to stdout as JSON.

    python -m purgatory.testing.real_kafka_bench --runs 3 --nodes 1,3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from purgatory.testing.real_kafka import (
    KAFKA_VERSION,
    RealKafka,
    RealKafkaError,
    rss_bytes,
    unavailable,
)

SYSTEMS = ("kafka", "purgatory")
MIB = 1 << 20


def first_acknowledged_record(
    bootstrap: str, nodes: int, timeout_s: float = 60.0, create: bool = True
) -> None:
    """Create topic ``first`` (replication factor ``nodes``), produce one record with acks=all
    and wait for its acknowledgement. ``create=False`` leaves the topic to be created by the
    record (librdkafka's mock cluster does not answer CreateTopics)."""
    from confluent_kafka import KafkaError, KafkaException, Message, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("first", num_partitions=1, replication_factor=nodes)
        try:
            admin.create_topics([topic], operation_timeout=timeout_s)["first"].result(timeout_s)
        except KafkaException as exc:
            raise RealKafkaError(f"creating the first topic failed: {exc}") from exc
    outcome: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        outcome.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce("first", b"first", on_delivery=delivered)
    if producer.flush(timeout_s) != 0 or not outcome:
        raise RealKafkaError(f"the first record was not acknowledged within {timeout_s:.0f} s")
    if outcome[0] is not None:
        raise RealKafkaError(f"the first record failed: {outcome[0]}")


def measure_once(system: str, nodes: int) -> dict[str, float]:
    """One cluster of ``system``: start, first acknowledged record, RSS, stop (ms, MiB)."""
    from purgatory.testing.cluster import Cluster

    started = time.perf_counter()
    cluster: RealKafka | Cluster
    if system == "kafka":
        cluster = RealKafka(nodes=nodes)
        cluster.start()
    else:
        # Brokers stopping one after the other warn of lost peers; the progress lines matter.
        cluster = Cluster(brokers=nodes, config={"log.level": "ERROR"}, mode="process")
        cluster.start()
    try:
        ready = time.perf_counter()
        first_acknowledged_record(cluster.bootstrap_servers, nodes)
        acknowledged = time.perf_counter()
        pids = [cluster.pid(node) for node in range(nodes)]
        rss = [rss_bytes(pid) for pid in pids]
    finally:
        closing = time.perf_counter()
        if isinstance(cluster, RealKafka):
            cluster.stop()
        else:
            cluster.close()
        closed = time.perf_counter()
    return {
        "ready_ms": round((ready - started) * 1000),
        "first_ack_ms": round((acknowledged - started) * 1000),
        "rss_mib": round(sum(rss) / MIB, 1),
        "rss_per_node_mib": round(max(rss) / MIB, 1),
        "stop_ms": round((closed - closing) * 1000),
    }


def run(runs: int, sizes: list[int], systems: list[str]) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {}
    for run_index in range(1, runs + 1):
        for nodes in sizes:
            for system in systems:
                result = measure_once(system, nodes)
                samples.setdefault(f"{system}-{nodes}", []).append(result)
                print(
                    f"run {run_index}/{runs}, {system}, {nodes} node(s): ready "
                    f"{result['ready_ms']:.0f} ms, first ack {result['first_ack_ms']:.0f} ms, "
                    f"RSS {result['rss_mib']:.0f} MiB, stopped in {result['stop_ms']:.0f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    medians = {
        key: {name: statistics.median(r[name] for r in results) for name in results[0]}
        for key, results in samples.items()
    }
    return {
        "benchmark": "real-kafka-vs-purgatory",
        "kafka_version": KAFKA_VERSION,
        "runs": runs,
        "median": medians,
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m purgatory.testing.real_kafka_bench",
        description=(
            "Start-up, first acknowledged record and memory of Apache Kafka (RealKafka) and "
            "of Purgatory (Cluster, process mode), median of --runs."
        ),
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per system and size (3)")
    parser.add_argument("--nodes", default="1,3", help="cluster sizes, comma-separated (1,3)")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help="kafka and/or purgatory (both)"
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(n) for n in args.nodes.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--nodes takes sizes like 1,3, got {args.nodes!r}")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.runs < 1:
        parser.error("--nodes and --runs must be at least 1")
    if not systems or not set(systems) <= set(SYSTEMS):
        parser.error("--systems names kafka and/or purgatory")
    if "kafka" in systems and (reason := unavailable()) is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    try:
        result = run(args.runs, sizes, systems)
    except KeyboardInterrupt:
        return 130
    except (RealKafkaError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
