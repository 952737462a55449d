"""DeleteRecords with real clients against a 3-broker cluster: the log start moves on every
replica (the followers learn it from their fetches) before the leader answers, consumers
from the earliest start there, Kafka's errors, and ``purgatory delete-records``."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.ops.faults import parse_spec
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Producer
from purgatory.protocol.errors import ErrorCode
from tests.integration.test_cli_tools import cli
from tests.integration.test_kafka_clients import create, in_thread
from tests.support import bootstrap, running_cluster

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(
        3, **{"default.replication.factor": 3, "replica.fetch.wait.max.ms": 100}
    ) as b:
        yield b


async def topic_of_ten(brokers: list[Broker], topic: str, partitions: int = 1) -> None:
    """A topic whose every partition holds records 0-9 on every replica."""
    await create(brokers, topic, partitions)
    async with Producer(bootstrap(brokers), acks=-1) as producer:
        for p in range(partitions):
            for i in range(10):
                await producer.send(topic, b"%d" % i, partition=p)
        await producer.flush()


def log_starts(brokers: list[Broker], topic: str, index: int = 0) -> list[int]:
    """The log start offset of each broker's replica."""
    return [b.replica_manager.partitions[(topic, index)].log.log_start_offset for b in brokers]


def confluent_delete(servers: str, topic: str, offsets: dict[int, int]) -> dict[int, Any]:
    """AdminClient.delete_records: each partition's low watermark, or its KafkaError."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    admin = ConfluentAdmin({"bootstrap.servers": servers})
    futures = admin.delete_records(
        [TopicPartition(topic, p, o) for p, o in offsets.items()], request_timeout=20
    )
    out: dict[int, Any] = {}
    for tp, future in futures.items():
        try:
            out[tp.partition] = future.result(20).low_watermark
        except KafkaException as exc:
            out[tp.partition] = exc.args[0].code()
    return out


def confluent_earliest(servers: str, topic: str) -> tuple[tuple[int, int], int]:
    """(low, high) watermarks and the first offset a consumer from the beginning reads."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "earliest"})
    try:
        watermarks = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                return watermarks, message.offset()
        raise AssertionError("nothing read")
    finally:
        consumer.close()


async def test_confluent_delete_records_moves_the_log_start_of_every_replica(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await topic_of_ten(brokers, "purged")
    assert await in_thread(confluent_delete, servers, "purged", {0: 4}) == {0: 4}
    # Answered once every live replica started there: the followers too.
    assert log_starts(brokers, "purged") == [4, 4, 4]
    assert await in_thread(confluent_earliest, servers, "purged") == ((4, 10), 4)


async def test_confluent_delete_records_errors_are_kafkas(brokers: list[Broker]) -> None:
    servers = bootstrap(brokers)
    await topic_of_ten(brokers, "errors")
    outcome = await in_thread(confluent_delete, servers, "errors", {0: 11})
    assert outcome == {0: ErrorCode.OFFSET_OUT_OF_RANGE}
    assert log_starts(brokers, "errors") == [0, 0, 0]
    # -1: up to the high watermark.
    assert await in_thread(confluent_delete, servers, "errors", {0: -1}) == {0: 10}
    assert log_starts(brokers, "errors") == [10, 10, 10]


def kafka_python_delete(servers: str, topic: str, offset: int) -> Any:
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return admin.delete_records({TopicPartition(topic, 0): offset}, timeout_ms=20000)
    finally:
        admin.close()


async def test_kafka_python_and_aiokafka_delete_records(brokers: list[Broker]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition

    servers = bootstrap(brokers)
    await topic_of_ten(brokers, "libraries")
    result = await in_thread(kafka_python_delete, servers, "libraries", 3)
    assert [r["low_watermark"] for r in result.values()] == [3]
    assert log_starts(brokers, "libraries") == [3, 3, 3]
    admin = AIOKafkaAdminClient(bootstrap_servers=servers)
    await admin.start()
    try:
        marks = await admin.delete_records(
            {AioTopicPartition("libraries", 0): RecordsToDelete(7)}, 20000
        )
    finally:
        await admin.close()
    assert list(marks.values()) == [7]
    assert log_starts(brokers, "libraries") == [7, 7, 7]


async def test_our_admin_client_answers_each_partition(brokers: list[Broker]) -> None:
    await topic_of_ten(brokers, "ours", partitions=2)
    async with AdminClient(bootstrap(brokers)) as admin:
        outcome = await admin.delete_records(
            {("ours", 0): 5, ("ours", 1): 99, ("ours", 2): 0, ("nope", 0): 0}
        )
        assert outcome == {
            ("ours", 0): (ErrorCode.NONE, 5),
            ("ours", 1): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
            ("ours", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
            ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        }
        assert await admin.offsets_at([("ours", 0), ("ours", 1)], "earliest") == {
            ("ours", 0): 5,
            ("ours", 1): 0,
        }
    assert log_starts(brokers, "ours") == [5, 5, 5]


async def test_the_cli_deletes_with_kafkas_offset_file_and_says_what_failed(
    brokers: list[Broker], tmp_path: Path
) -> None:
    await topic_of_ten(brokers, "cli", partitions=2)
    offsets = tmp_path / "offsets.json"
    command = ("delete-records", "--offset-json-file", str(offsets), "--bootstrap-server")
    command += (bootstrap(brokers),)
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "cli", "partition": 0, "offset": 6},
                    {"topic": "cli", "partition": 1, "offset": 20},
                ],
                "version": 1,
            }
        )
    )
    code, out, err = await cli(*command)
    assert code == 1, err
    lines = out.splitlines()
    assert lines[:3] == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: cli-0\tlow_watermark: 6",
    ]
    assert lines[3].startswith("partition: cli-1\terror: OFFSET_OUT_OF_RANGE: ")
    assert log_starts(brokers, "cli") == [6, 6, 6]
    # A bad file is a one-line message, not a traceback.
    offsets.write_text('{"partitions": [{"topic": "cli", "partition": 0}]}')
    code, out, err = await cli(*command)
    assert code == 1 and "offset must be an integer" in err and "Traceback" not in err
    code, out, err = await cli("delete-records", "--offset-json-file", str(tmp_path / "none"))
    assert code == 1 and "No such file" in err and "Traceback" not in err


async def test_a_replica_that_does_not_follow_in_time_times_the_deletion_out(
    brokers: list[Broker],
) -> None:
    await topic_of_ten(brokers, "slow")
    leader = next(b for b in brokers if b.replica_manager.partitions[("slow", 0)].is_leader)
    follower = next(b for b in brokers if b is not leader)
    # The leader hears nothing from this follower: its log start stays unknown there.
    leader.faults.add(parse_spec({"name": "cut", "kind": "drop", "peers": [follower.broker_id]}))
    async with AdminClient(bootstrap(brokers)) as admin:
        outcome = await admin.delete_records({("slow", 0): 2}, timeout_ms=300)
    assert outcome[("slow", 0)][0] == ErrorCode.REQUEST_TIMED_OUT
    assert leader.replica_manager.partitions[("slow", 0)].log.log_start_offset == 2
