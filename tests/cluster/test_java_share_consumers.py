"""Apache Kafka's Java share consumer (kafka-clients 4.1.1's KafkaShareConsumer, KIP-932,
unmodified) against a 3-broker Purgatory: two JVMs in one share group (the
``share-consume`` program of tests/java, `make java-clients` builds it) acknowledge every
record of a topic, each exactly once across both. kafka-clients 3.9.1's share consumer
speaks ShareFetch v0, which Purgatory does not serve (v1-v2), so only 4.x runs."""

from __future__ import annotations

import json
import select
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from purgatory.testing import Cluster
from tests.cluster.test_java_clients import LOG_LEVEL, classpath

pytestmark = pytest.mark.cluster

VERSION = "4.1.1"
TOPIC, GROUP, PARTITIONS, COUNT = "java-share", "java-share-group", 3, 300
WAIT_S = 60


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    classpath(VERSION)  # skip before anything starts
    # Members told of a new assignment within half a second (Kafka's default is 5 s).
    heartbeat = {
        "group.share.heartbeat.interval.ms": 500,
        "group.share.min.heartbeat.interval.ms": 500,
    }
    with Cluster(brokers=3, config=heartbeat) as started:
        yield started


def _share_consumer(cluster: Cluster, name: str) -> subprocess.Popen[str]:
    command = [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={LOG_LEVEL}",
        "-cp",
        classpath(VERSION),
        "dev.purgatory.javaclients.JavaClients",
        "share-consume",
        "--bootstrap",
        cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--client-id",
        name,
        "--idle-ms",
        "5000",
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_polling(member: subprocess.Popen[str]) -> None:
    assert member.stdout is not None
    ready, _, _ = select.select([member.stdout], [], [], WAIT_S)
    line = member.stdout.readline() if ready else ""
    assert line.strip() == "polling", f"the share consumer did not start polling: {line!r}"


def _result(member: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = member.communicate(timeout=WAIT_S + 30)
    lines = out.strip().splitlines()
    assert member.returncode == 0 and lines, f"exited {member.returncode}:\n{out}\n{err[-20000:]}"
    errors = [line for line in err.splitlines() if " ERROR " in line]
    assert not errors, f"the Java share consumer logged errors:\n{err[-20000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["client_version"] == VERSION
    return result


def test_two_java_share_consumers_acknowledge_every_record_exactly_once(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    earliest = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    group = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[earliest])
    for done in admin.incremental_alter_configs([group]).values():
        done.result(WAIT_S)
    members = [_share_consumer(cluster, f"java-share-{i}") for i in range(2)]
    try:
        for member in members:
            _wait_polling(member)
        # Records arrive over a while, so that both members are in the group for most.
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(COUNT):
            producer.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
            if i % 10 == 9:
                assert producer.flush(WAIT_S) == 0
                time.sleep(0.1)  # pacing the producer, not waiting on a condition
        assert producer.flush(WAIT_S) == 0
        results = [_result(member) for member in members]
    finally:
        for member in members:
            if member.poll() is None:
                member.kill()
                member.wait()
    for result in results:
        assert result["commit_errors"] == []
    acknowledged = [
        (r["partition"], r["offset"], r["value"]) for result in results for r in result["records"]
    ]
    assert len(acknowledged) == COUNT
    assert len(set(acknowledged)) == COUNT  # none acknowledged twice
    stored = {
        (p, offset, value.decode())
        for p in range(PARTITIONS)
        for offset, _, value in cluster.records(TOPIC, p)
    }
    assert set(acknowledged) == stored
    print("split:", [len(result["records"]) for result in results])  # shown with -s
