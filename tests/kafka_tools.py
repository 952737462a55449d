"""Apache Kafka's own command-line tools (kafka-topics, kafka-console-producer, ...) run from
the jars of `make kafka-jars`, as Kafka's bin/ scripts run them, for tests and by hand.

``kafka_tool("kafka-topics", "--bootstrap-server", servers, "--list")`` starts one JVM on
the tool's main class with a quiet log4j2 config (warnings to stderr, as Kafka's
tools-log4j2.yaml) and returns the finished process, its output as text. `unavailable()`
says why the tools cannot run here (no Java 17+, no jars), for tests to skip on.

By hand: ``python -m tests.kafka_tools kafka-topics --bootstrap-server HOST:PORT --list``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from purgatory.testing.real_kafka import (
    RealKafkaUnavailable,
    check_jars,
    find_java,
    jars_dir,
)
from purgatory.testing.real_kafka import unavailable as kafka_unavailable

LOG4J2 = Path(__file__).resolve().parent / "oracle" / "kafka" / "tools-log4j2.properties"

# bin/<script>.sh -> the main class it runs (kafka-run-class.sh <class>).
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
}

# Short-lived JVMs: the client compiler only and a serial collector start fastest.
JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xmx256m",
    "-Djava.awt.headless=true",
)


def unavailable() -> str | None:
    """Why Kafka's tools cannot run here (no Java 17+, no jars), or None."""
    return kafka_unavailable()


def command(name: str, *args: str) -> list[str]:
    """The java command line that runs tool ``name`` (a bin/ script's name) with ``args``."""
    if name not in MAIN_CLASSES:
        raise ValueError(f"unknown Kafka tool {name!r}: one of {', '.join(MAIN_CLASSES)}")
    jars = jars_dir()
    check_jars(jars)
    return [
        find_java(),
        *JVM_OPTIONS,
        f"-Dlog4j2.configurationFile={LOG4J2}",
        "-cp",
        f"{jars}/*",
        MAIN_CLASSES[name],
        *args,
    ]


def kafka_tool(
    name: str, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's tool ``name`` (``"kafka-topics"``, ...) with ``args`` to its end: stdin
    from ``stdin`` (else none), stdout and stderr captured as text."""
    return subprocess.run(
        command(name, *args),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def main(argv: list[str]) -> int:
    if not argv:
        print(f"usage: python -m tests.kafka_tools TOOL ARGS...; TOOL: {', '.join(MAIN_CLASSES)}")
        return 2
    try:
        return subprocess.call(command(argv[0], *argv[1:]))
    except (RealKafkaUnavailable, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
