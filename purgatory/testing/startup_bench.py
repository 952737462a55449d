"""`purgatory perf cluster-start`: what a test suite pays for a cluster of its own.

For each mode (thread, process) and run: the time until `Cluster.start()` returns (every
broker healthy, registered and sharing the metadata), then until a first topic is
created with its leaders elected (a cluster a test can use), then what a per-test topic
costs (`create_topic` as the `purgatory_topic` fixture calls it, replicated on every
broker, leaders elected), and the time to stop everything. Progress goes to stderr, the
result to stdout as JSON, with the targets, whether each was met, and the figure of a
container-based broker to compare with.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from purgatory.testing.cluster import Cluster, ClusterError

TARGETS_MS = {"thread_ready": 1000.0, "process_ready": 3000.0, "topic": 10.0}

# The container-based figure we compare with: strimzi/test-container's own start-up
# benchmark (release 0.112.0, Kafka 4.1.0, image already pulled), average of 5 runs.
CONTAINER_FIGURES = {
    "source": "https://github.com/strimzi/test-container/issues/155",
    "kafka": "4.1.0",
    "one_node_combined_ms": 3374,
    "one_controller_three_brokers_ms": 6425,
}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "median": round(statistics.median(ordered), 2),
        "p99": round(p99, 2),
        "max": round(ordered[-1], 2),
    }


def measure_once(brokers: int, mode: str, topics: int, partitions: int) -> dict[str, Any]:
    """One cluster: start, first topic, ``topics`` per-test topics, stop (times in ms)."""
    started = time.perf_counter()
    # Brokers stopping one after the other warn of lost peers; the progress lines matter.
    quiet = {"log.level": "ERROR"}
    cluster = Cluster(brokers=brokers, config=quiet, mode=mode)  # type: ignore[arg-type]
    cluster.start()
    try:
        ready = time.perf_counter()
        cluster.create_topic("first", partitions)
        usable = time.perf_counter()
        topic_ms = []
        for i in range(topics):
            before = time.perf_counter()
            cluster.create_topic(f"per-test-{i}", partitions)
            topic_ms.append(_ms(time.perf_counter() - before))
    finally:
        closing = time.perf_counter()
        cluster.close()
        closed = time.perf_counter()
    return {
        "ready_ms": _ms(ready - started),
        "first_topic_ms": _ms(usable - started),
        "topic_ms": topic_ms,
        "close_ms": _ms(closed - closing),
    }


def measure_mode(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    runs = []
    for run in range(1, args.runs + 1):
        result = measure_once(args.brokers, mode, args.topics, args.partitions)
        topics = _summary(result["topic_ms"]) if result["topic_ms"] else None
        print(
            f"{mode} mode, run {run}/{args.runs}: ready in {result['ready_ms']:.0f} ms, "
            f"a first topic at {result['first_topic_ms']:.0f} ms"
            + (f", per-test topics {topics['median']:.1f} ms (median)" if topics else "")
            + f", stopped in {result['close_ms']:.0f} ms",
            file=sys.stderr,
        )
        runs.append(result)
    all_topics = [t for r in runs for t in r["topic_ms"]]
    return {
        "ready_ms": _summary([r["ready_ms"] for r in runs]),
        "first_topic_ms": _summary([r["first_topic_ms"] for r in runs]),
        "topic_ms": _summary(all_topics) if all_topics else None,
        "close_ms": _summary([r["close_ms"] for r in runs]),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "cluster-start",
        "brokers": args.brokers,
        "runs": args.runs,
        "topics_per_run": args.topics,
        "partitions": args.partitions,
    }
    for mode in args.modes:
        result[mode] = measure_mode(args, mode)
    met: dict[str, bool] = {}
    for mode in args.modes:
        # A cluster is ready for a test when a topic is creatable: the first topic's time.
        met[f"{mode}_ready"] = (
            result[mode]["first_topic_ms"]["median"] <= TARGETS_MS[f"{mode}_ready"]
        )
        if result[mode]["topic_ms"] is not None:
            met[f"{mode}_topic"] = result[mode]["topic_ms"]["median"] <= TARGETS_MS["topic"]
    result["targets_ms"] = TARGETS_MS
    result["met"] = met
    result["container_broker"] = CONTAINER_FIGURES
    return result


def main(args: argparse.Namespace) -> int:
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or not set(args.modes) <= {"thread", "process"}:
        print("purgatory perf cluster-start: --modes names thread and/or process", file=sys.stderr)
        return 2
    if args.brokers < 1 or args.runs < 1 or args.topics < 0 or args.partitions < 1:
        print(
            "purgatory perf cluster-start: --brokers, --runs and --partitions must be at "
            "least 1, --topics at least 0",
            file=sys.stderr,
        )
        return 2
    try:
        result = run(args)
    except KeyboardInterrupt:
        return 130
    except (ClusterError, OSError) as exc:
        print(f"purgatory perf cluster-start: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
