"""`purgatory perf compare`: Purgatory beside Apache Kafka itself, franz-go's kfake and
librdkafka's mock cluster, measured the same way with the same client in one run.

Per system and run, on a cluster of ``--brokers`` (3) started for the run:

- start to first acknowledged produce: from launching the processes until a topic of
  replication factor ``--brokers`` is created and one acks=all record on it is
  acknowledged (the mock creates topics on first use: it does not answer CreateTopics);
- produce throughput: ``--num-records`` records of ``--record-size`` bytes, acks=1 then
  acks=all, linger.ms 5, into a topic of 3 partitions (`perf kafka-mock`'s phases);
- end-to-end latency: ``--rate`` records/s for ``--seconds`` to one partition, read by a
  consumer with librdkafka's default ``fetch.wait.max.ms`` (500);
- consumer throughput: every record of the topic read from the beginning by one consumer;
- RSS: the resident set of the system's processes (every JVM, every broker), summed,
  once after the first record and again after the phases above, when it holds every
  record they wrote (Purgatory and the fakes keep records in memory; Kafka in files,
  whose page cache is not in its RSS).

The client is confluent-kafka (librdkafka) throughout. Systems take turns, the order
rotating from one run to the next so a drift of the machine falls on all of them; the
JSON on stdout holds the medians, Purgatory's ratios to Kafka beside the targets of
issue 44, and every sample; progress goes to stderr. ``--markdown`` prints the medians as
the table of docs/performance.md instead.

    purgatory perf compare --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from purgatory.experiments import kafka_mock
from purgatory.testing.real_kafka import (
    KAFKA_VERSION,
    RealKafka,
    rss_bytes,
)
from purgatory.testing.real_kafka import unavailable as kafka_unavailable
from purgatory.testing.real_kafka_bench import first_acknowledged_record

SYSTEMS = ("purgatory", "kafka", "kfake", "mock")
MIB = 1 << 20
KFAKE = Path(__file__).resolve().parents[2] / "build" / "go-clients" / "kfake"
READY_TIMEOUT_S = 60.0

# The medians' names and how the table shows them.
MEASURES = (
    ("first_ack_ms", "start to first acks=all record (ms)"),
    ("produce_acks_1_rps", "produce acks=1 (records/s)"),
    ("produce_acks_all_rps", "produce acks=all (records/s)"),
    ("end_to_end_p50_ms", "end-to-end p50 (ms)"),
    ("end_to_end_p99_ms", "end-to-end p99 (ms)"),
    ("consume_rps", "consume (records/s)"),
    ("rss_first_mib", "RSS after the first record (MiB)"),
    ("rss_mib", "RSS after the phases (MiB)"),
)
# Issue 44's targets for Purgatory against Kafka: measure -> (bound on the ratio, <= or >=).
TARGETS = {
    "first_ack_ms": (0.1, "<="),
    "rss_first_mib": (0.2, "<="),
    "rss_mib": (0.2, "<="),
    "produce_acks_1_rps": (0.8, ">="),
    "produce_acks_all_rps": (0.8, ">="),
    "end_to_end_p99_ms": (1.0, "<="),
}


class CompareError(RuntimeError):
    """A system could not be started or measured."""


@dataclass
class Running:
    """A started system: where clients connect, its processes, and how to stop it."""

    bootstrap: str
    pids: list[int]
    stop: Callable[[], None]
    creates_topics: bool = True


def unavailable(system: str) -> str | None:
    """Why ``system`` cannot run on this machine, or None."""
    if system == "kafka":
        return kafka_unavailable()
    if system == "kfake" and not KFAKE.exists():
        return f"franz-go's kfake is not built ({KFAKE}): run `make go-clients` (needs Go)"
    return None


def _start_purgatory(brokers: int) -> Running:
    from purgatory.testing.cluster import Cluster

    cluster = Cluster(brokers=brokers, config={"log.level": "ERROR"}, mode="process")
    cluster.start()
    return Running(
        cluster.bootstrap_servers, [cluster.pid(b) for b in range(brokers)], cluster.close
    )


def _start_kafka(brokers: int) -> Running:
    kafka = RealKafka(nodes=brokers)
    kafka.start()
    return Running(kafka.bootstrap_servers, [kafka.pid(n) for n in range(brokers)], kafka.stop)


def _start_child(command: list[str], what: str, creates_topics: bool) -> Running:
    """A child that prints ``ready host:port,...`` once it listens and stops when its stdin
    closes (kfake, the mock's holder)."""
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    stdout, stdin = child.stdout, child.stdin
    assert stdout is not None and stdin is not None
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT_S)
    if not line or not line[0].startswith(b"ready "):
        child.kill()
        _, err = child.communicate()
        raise CompareError(f"{what} did not start: {err.decode(errors='replace')[-2000:]}")

    def stop() -> None:
        with contextlib.suppress(OSError):
            stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    return Running(line[0].split()[1].decode(), [child.pid], stop, creates_topics)


def _start_kfake(brokers: int) -> Running:
    return _start_child(
        [str(KFAKE), "-brokers", str(brokers), "-default-partitions", "3"], "kfake", True
    )


def _start_mock(brokers: int) -> Running:
    """librdkafka's mock cluster lives inside a client: a Python process of its own holds
    one (its RSS is that process's, the interpreter and confluent-kafka included)."""
    return _start_child(
        [sys.executable, "-c", f"from {__name__} import serve_mock; serve_mock({brokers})"],
        "librdkafka's mock cluster",
        False,
    )


def serve_mock(brokers: int) -> None:
    """In the mock's holder process: create the cluster, print its brokers, wait."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": ""})
    found = holder.list_topics(timeout=10).brokers.values()
    print("ready " + ",".join(f"{b.host}:{b.port}" for b in found), flush=True)
    sys.stdin.read()


STARTERS: dict[str, Callable[[int], Running]] = {
    "purgatory": _start_purgatory,
    "kafka": _start_kafka,
    "kfake": _start_kfake,
    "mock": _start_mock,
}


def consume_throughput(servers: str, topic: str, timeout_s: float = 120.0) -> dict[str, float]:
    """Read every record of ``topic`` from its start with one consumer: records/s from the
    assignment to the last record."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "compare-bench-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        total = 0
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            total += high - low
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        read = 0
        while read < total and time.perf_counter() - start < timeout_s:
            read += sum(1 for m in consumer.consume(10_000, timeout=0.5) if m.error() is None)
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if read < total:
        raise CompareError(f"the consumer read {read} of {total} records in {timeout_s:.0f} s")
    return {"records": total, "records_per_s": round(total / elapsed)}


def measure_once(system: str, args: argparse.Namespace) -> dict[str, float]:
    """Start ``system``, run every phase, stop it; the figures of MEASURES. A failure
    names the system and the phase it failed in."""
    phase = "start"
    started = time.perf_counter()
    try:
        running = STARTERS[system](args.brokers)
        try:
            phase = "first record"
            first_acknowledged_record(
                running.bootstrap, args.brokers, create=running.creates_topics
            )
            first_ack = time.perf_counter()
            rss_first = sum(rss_bytes(pid) for pid in running.pids)
            phase = "topic"
            kafka_mock.create_topic(
                running.bootstrap, running.creates_topics, replication_factor=args.brokers
            )
            phase = "produce"
            produced = {
                acks: kafka_mock.throughput(
                    running.bootstrap, acks, args.num_records, args.record_size
                )
                for acks in ("1", "all")
            }
            if any(p["failed"] for p in produced.values()):
                raise CompareError(f"records failed: {produced}")
            phase = "end to end"
            latency = kafka_mock.end_to_end(running.bootstrap, args.rate, args.seconds)
            if not latency.get("received"):
                raise CompareError("no record came back")
            phase = "consume"
            consumed = consume_throughput(running.bootstrap, kafka_mock.TOPIC)
            rss = sum(rss_bytes(pid) for pid in running.pids)
        finally:
            running.stop()
    except Exception as exc:
        raise CompareError(f"{system}, {phase}: {exc!r}") from exc
    return {
        "first_ack_ms": round((first_ack - started) * 1000),
        "produce_acks_1_rps": produced["1"]["records_per_s"],
        "produce_acks_all_rps": produced["all"]["records_per_s"],
        "end_to_end_p50_ms": latency["p50_ms"],
        "end_to_end_p99_ms": latency["p99_ms"],
        "consume_rps": consumed["records_per_s"],
        "rss_first_mib": round(rss_first / MIB, 1),
        "rss_mib": round(rss / MIB, 1),
    }


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rounds(
    systems: list[str], runs: int, measure: Callable[[str], dict[str, float]]
) -> tuple[dict[str, list[dict[str, float]]], dict[str, dict[str, float]]]:
    """``runs`` rounds of ``measure(system)`` over every system, the order rotating from
    one round to the next so a drift of the machine falls on all of them; (every sample,
    the medians) per system. Progress goes to stderr."""
    samples: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    for index in range(runs):
        shift = index % len(systems)
        for system in systems[shift:] + systems[:shift]:
            _progress(f"run {index + 1}/{runs}: {system} ...")
            result = measure(system)
            samples[system].append(result)
            _progress(
                f"run {index + 1}/{runs}: {system}: "
                + ", ".join(f"{name} {value:g}" for name, value in result.items())
            )
    medians = {
        system: {name: statistics.median(r[name] for r in results) for name in results[0]}
        for system, results in samples.items()
    }
    return samples, medians


def run(args: argparse.Namespace, systems: list[str]) -> dict[str, Any]:
    samples, medians = rounds(systems, args.runs, lambda system: measure_once(system, args))
    out: dict[str, Any] = {
        "benchmark": "compare",
        "kafka_version": KAFKA_VERSION if "kafka" in systems else None,
        "brokers": args.brokers,
        "records": args.num_records,
        "record_size": args.record_size,
        "rate": args.rate,
        "seconds": args.seconds,
        "runs": args.runs,
        "median": medians,
    }
    if "purgatory" in medians and "kafka" in medians:
        ours, kafka = medians["purgatory"], medians["kafka"]
        out["purgatory_vs_kafka"] = {
            name: {
                "ratio": round(ours[name] / kafka[name], 3) if kafka[name] else None,
                "target": f"{op} {bound}",
                "met": met(ours[name], kafka[name], bound, op),
            }
            for name, (bound, op) in TARGETS.items()
        }
    out["samples"] = samples
    return out


def met(ours: float, kafka: float, bound: float, op: str) -> bool:
    return ours <= bound * kafka if op == "<=" else ours >= bound * kafka


def markdown(result: dict[str, Any]) -> str:
    """The medians as a Markdown table, one column per system, then Purgatory's ratio to
    Kafka and its target where both ran."""
    systems = list(result["median"])
    versus = result.get("purgatory_vs_kafka")
    extra = ["Purgatory / Kafka", "target"] if versus else []
    lines = [
        "| | " + " | ".join(systems + extra) + " |",
        "|---|" + "---|" * (len(systems) + len(extra)),
    ]
    for name, label in MEASURES:
        cells = [f"{result['median'][s][name]:,.1f}".removesuffix(".0") for s in systems]
        if versus:
            entry = versus.get(name)
            ratio = (
                f"{result['median']['purgatory'][name] / result['median']['kafka'][name]:.2f}"
                if result["median"]["kafka"][name]
                else "-"
            )
            target = f"{entry['target']} ({'met' if entry['met'] else 'missed'})" if entry else ""
            cells += [ratio, target]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        _progress("purgatory perf compare: needs confluent-kafka (pip install confluent-kafka)")
        return 1
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if not systems or unknown:
        _progress(f"purgatory perf compare: --systems takes {', '.join(SYSTEMS)}")
        return 2
    if args.runs < 1 or args.brokers < 1 or args.num_records < 1 or args.rate < 1:
        _progress("purgatory perf compare: --runs, --brokers, --num-records, --rate >= 1")
        return 2
    for system in systems:
        if (reason := unavailable(system)) is not None:
            _progress(f"purgatory perf compare: {system}: {reason}")
            return 1
    try:
        result = run(args, systems)
    except CompareError as exc:
        _progress(f"purgatory perf compare: {exc}")
        return 1
    if args.markdown:
        print(markdown(result))
    else:
        print(json.dumps(result, indent=None if args.json else 2))
    return 0
