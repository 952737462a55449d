"""`RealKafka`: Apache Kafka itself, from Maven Central's jars, started for tests; a Kafka
client gets back what it produced with acks=all, and three nodes replicate a topic to all."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from purgatory.testing.real_kafka import (
    KAFKA_VERSION,
    RealKafka,
    RealKafkaError,
    broker_count,
    unavailable,
)

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kafka_here() -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def three_nodes(kafka_here: None) -> Iterator[RealKafka]:
    with RealKafka(nodes=3) as kafka:
        yield kafka


def produce_acks_all(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Produce ``values`` with acks=all; every delivery report must be a success."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(30) == 0, "deliveries still pending after 30 s"
    assert failures == []


def consume(consumer: Consumer, count: int, timeout_s: float = 30.0) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        values.append(value)
    return values


def python_m(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120
    )


def test_the_pom_fetches_the_kafka_version_the_module_starts() -> None:
    pom = (ROOT / "tests" / "oracle" / "kafka" / "pom.xml").read_text()
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert match is not None and match.group(1) == KAFKA_VERSION


def test_one_node_serves_back_what_it_acknowledged_with_acks_all(kafka_here: None) -> None:
    values = [f"record-{i}".encode() for i in range(20)]
    with RealKafka(nodes=1) as kafka:
        assert broker_count(kafka.ports[0]) == 1
        produce_acks_all(kafka.bootstrap_servers, "one-node", values)  # auto-created
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "unused"})
        try:
            consumer.assign([TopicPartition("one-node", 0, 0)])
            assert consume(consumer, len(values)) == values
        finally:
            consumer.close()
        pids, log_dir = [kafka.pid(0)], kafka.log_dir
    assert not any(running(pid) for pid in pids)
    assert not log_dir.exists()


def test_a_setting_kafka_refuses_fails_the_start_with_kafkas_reason(
    kafka_here: None, tmp_path: Path
) -> None:
    kafka = RealKafka(nodes=1, config={"process.roles": "nonsense"}, log_dir=tmp_path)
    with pytest.raises(RealKafkaError) as raised:
        kafka.start()
    assert "formatting node 0's storage" in str(raised.value)
    assert "Invalid value nonsense for configuration process.roles" in str(raised.value)
    assert "\tat " not in str(raised.value)  # Kafka's reason, not Java's stack


def test_the_command_prints_the_bootstrap_and_stops_on_ctrl_c(kafka_here: None) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "purgatory.testing.real_kafka", "--nodes", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap), bootstrap
        assert broker_count(int(bootstrap.rsplit(":", 1)[1])) == 1
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert f"Apache Kafka {KAFKA_VERSION}: 1 node(s) ready" in stderr


def test_the_command_refuses_zero_nodes_without_a_traceback() -> None:
    run = python_m("purgatory.testing.real_kafka", "--nodes", "0")
    assert run.returncode == 2
    assert "--nodes must be at least 1" in run.stderr and "Traceback" not in run.stderr


def test_the_command_refuses_a_listener_without_its_protocol_without_a_traceback() -> None:
    run = python_m("purgatory.testing.real_kafka", "--listener", "SASL_PLAINTEXT")
    assert run.returncode == 2
    assert "--listener takes NAME=PROTOCOL" in run.stderr and "Traceback" not in run.stderr


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_benchmark_reports_medians_of_start_first_ack_and_rss() -> None:
    # Purgatory's side only: Kafka's is the same code around RealKafka, tested above.
    run = python_m(
        "purgatory.testing.real_kafka_bench",
        "--runs",
        "1",
        "--nodes",
        "1",
        "--systems",
        "purgatory",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    median = json.loads(run.stdout)["median"]["purgatory-1"]
    assert 0 < median["ready_ms"] <= median["first_ack_ms"]
    assert median["rss_mib"] > 10


def test_the_benchmark_refuses_an_unknown_system_without_a_traceback() -> None:
    run = python_m("purgatory.testing.real_kafka_bench", "--systems", "redpanda")
    assert run.returncode == 2
    assert "--systems names kafka and/or purgatory" in run.stderr
    assert "Traceback" not in run.stderr


# The three-node cluster last: a module's fixture lives until the module ends, and its JVMs
# would slow the tests above.
def test_three_nodes_keep_an_rf3_topic_in_sync_on_all_of_them(three_nodes: RealKafka) -> None:
    assert broker_count(three_nodes.ports[2]) == 3
    admin = AdminClient({"bootstrap.servers": three_nodes.bootstrap_servers})
    created = admin.create_topics([NewTopic("replicated", num_partitions=3, replication_factor=3)])
    created["replicated"].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        partitions = admin.list_topics("replicated", timeout=10).topics["replicated"].partitions
        isrs = {p: sorted(info.isrs) for p, info in partitions.items()}
        if len(isrs) == 3 and all(isr == [0, 1, 2] for isr in isrs.values()):
            break
        assert time.monotonic() < deadline, f"ISRs not all three nodes after 30 s: {isrs}"
        time.sleep(0.1)
    assert all(sorted(info.replicas) == [0, 1, 2] for info in partitions.values())


def test_three_nodes_serve_a_group_what_they_acknowledged_with_acks_all(
    three_nodes: RealKafka,
) -> None:
    topic = f"group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": three_nodes.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(
        timeout=30
    )
    values = [f"v{i}".encode() for i in range(50)]
    produce_acks_all(three_nodes.bootstrap_servers, topic, values)
    # A group's offsets go to __consumer_offsets, created with replication factor 3.
    consumer = Consumer(
        {
            "bootstrap.servers": three_nodes.bootstrap_servers,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        assert consume(consumer, len(values), timeout_s=60) == values
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    offsets = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    assert all(len(p.replicas) == 3 for p in offsets.partitions.values())
