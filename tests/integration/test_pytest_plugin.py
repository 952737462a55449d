"""The pytest plugin, as a user's suite meets it: pytester runs a sample suite (real
kafka-python and confluent-kafka clients) in a subprocess that loads the plugin from its
installed entry point."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

SAMPLE = """
import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer


def test_kafka_python_writes_what_the_cluster_then_holds(purgatory_cluster, purgatory_topic):
    producer = KafkaProducer(bootstrap_servers=purgatory_cluster.bootstrap_servers)
    producer.send(purgatory_topic, key=b"k", value=b"hello").get(timeout=10)
    producer.close()
    assert purgatory_cluster.records(purgatory_topic) == [(0, b"k", b"hello")]


def test_confluent_kafka_reads_back_through_a_group(purgatory_cluster, purgatory_topic):
    producer = Producer({"bootstrap.servers": purgatory_cluster.bootstrap_servers})
    producer.produce(purgatory_topic, b"x")
    assert producer.flush(10) == 0
    consumer = Consumer({
        "bootstrap.servers": purgatory_cluster.bootstrap_servers,
        "group.id": "sample",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([purgatory_topic])
    deadline = time.monotonic() + 30
    message = None
    while message is None and time.monotonic() < deadline:
        polled = consumer.poll(0.5)
        if polled is not None and polled.error() is None:
            message = polled
    consumer.close()
    assert message is not None and message.value() == b"x"


def test_every_test_gets_a_fresh_topic(purgatory_cluster, purgatory_topic):
    assert purgatory_cluster.records(purgatory_topic) == []
    assert sorted(purgatory_cluster.partition(purgatory_topic).isr) == [0, 1, 2]


@pytest.mark.purgatory(brokers=1, config={"num.partitions": 2})
def test_a_marked_test_gets_a_cluster_of_its_own(purgatory_cluster):
    assert purgatory_cluster.size == 1
    assert purgatory_cluster.state(0).broker_id == 0


def test_faults_stay_with_the_test_that_added_them_1(purgatory_cluster):
    purgatory_cluster.add_fault(0, name="slow", kind="latency", delay_ms=5)
    assert purgatory_cluster.state(0).faults


def test_faults_stay_with_the_test_that_added_them_2(purgatory_cluster):
    assert not purgatory_cluster.state(0).faults


def test_that_fails_on_purpose(purgatory_cluster, purgatory_topic):
    purgatory_cluster.elect_leader(purgatory_topic, 0, 2)  # an event in the controller's log
    assert False, "on purpose"
"""


def test_a_user_suite_runs_on_the_fixtures_and_a_failure_shows_the_cluster(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\npurgatory_brokers = 3\n")
    pytester.makepyfile(test_sample=SAMPLE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=6, failed=1)
    out = result.stdout.str()
    assert "purgatory cluster" in out  # the failing test's report section
    assert re.search(r"broker \d \(controller\)", out)
    assert "test_that_fails_on_purpose-" in out and "-0: leader 2" in out
    assert "isr [2, 0, 1]" in out  # in replica order: 2 is the preferred replica now
    assert "latest log events" in out and "preferred_leader_election" in out
