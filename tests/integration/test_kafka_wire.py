"""Kafka's wire protocol byte by byte: version negotiation, bad input, the KIP-736 wait-time
tagged field, idempotent retries and faults, with exact requests (tests/kafka_wire.py)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import pytest
from prometheus_client import generate_latest

from purgatory.broker.config.definitions import TOPIC_CONFIGS
from purgatory.broker.server import Broker
from purgatory.common.broker_state import ClientSoftware
from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_fetch import WAIT_TIME_TAG
from purgatory.protocol.kafka_schemas import VERSIONS
from purgatory.testing.cluster import metric_samples
from tests.integration.test_dynamic_config import call
from tests.kafka_wire import KafkaWire, request, request_frame, schema
from tests.support import running_cluster, wait_until


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with running_cluster(1, **{"num.partitions": 1}) as brokers:
        yield brokers[0]


@pytest.fixture
async def wire(broker: Broker) -> AsyncIterator[KafkaWire]:
    conn = await KafkaWire.open(broker.port)
    yield conn
    await conn.close()


def bad_requests(broker: Broker, reason: str) -> float:
    samples = metric_samples(generate_latest(broker.metrics.registry).decode())
    return samples.get(("purgatory_bad_requests_total", (("reason", reason),)), 0.0)


async def create_topic(wire: KafkaWire, name: str) -> None:
    s = schema(ApiKey.CREATE_TOPICS, 7)
    body = request(
        ApiKey.CREATE_TOPICS,
        7,
        topics=(
            s.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
            ),
        ),
        timeout=10_000,
        validate_only=False,
    )
    answer = await wire.call(ApiKey.CREATE_TOPICS, 7, body)
    assert answer.topics[0].error_code.value == 0 and answer.topics[0].topic_id is not None


def produce_body(topic: str, batch: bytes, acks: int = -1, version: int = 9) -> object:
    s = schema(ApiKey.PRODUCE, version)
    return request(
        ApiKey.PRODUCE,
        version,
        transactional_id=None,
        acks=acks,
        timeout=5_000,
        topic_data=(
            s.TopicProduceData(
                name=topic, partition_data=(s.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )


async def test_api_versions_lists_the_served_ranges_and_names_the_client(
    broker: Broker, wire: KafkaWire
) -> None:
    body = request(
        ApiKey.API_VERSIONS, 3, client_software_name="wire-test", client_software_version="1.0"
    )
    answer = await wire.call(ApiKey.API_VERSIONS, 3, body)
    assert answer.error_code.value == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == {
        int(k): v for k, v in VERSIONS.items()
    }
    clients = broker.state().clients
    assert clients == [ClientSoftware("wire-test", "1.0", connections=1)]
    text = generate_latest(broker.metrics.registry).decode()
    assert (
        'purgatory_client_connections{client_software_name="wire-test",'
        'client_software_version="1.0"} 1.0' in text
    )


async def test_api_versions_of_an_unknown_version_is_answered_in_v0_with_the_ranges(
    wire: KafkaWire,
) -> None:
    body = request(ApiKey.API_VERSIONS, 4, client_software_name="a", client_software_version="1")
    frame = request_frame(ApiKey.API_VERSIONS, 4, 7, body)
    await wire.send_raw(frame[:6] + struct.pack(">h", 99) + frame[8:])  # as version 99
    frame = await wire.read_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
    assert (correlation_id, error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
    assert count == len(VERSIONS)


async def test_an_unknown_api_key_closes_the_connection_and_is_counted(
    broker: Broker, wire: KafkaWire
) -> None:
    payload = struct.pack(">hhih", 57, 0, 1, 1) + b"x" + b"\x00" * 8  # UpdateFeatures: not served
    await wire.send_raw(struct.pack(">i", len(payload)) + payload)
    assert await wire.closed()
    assert bad_requests(broker, "unknown_api_key") == 1


async def test_a_body_that_does_not_parse_closes_the_connection(
    broker: Broker, wire: KafkaWire
) -> None:
    payload = struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 1) + b"x" + b"\xff\xff\x07"
    await wire.send_raw(struct.pack(">i", len(payload)) + payload)
    assert await wire.closed()
    assert bad_requests(broker, "malformed_request") == 1
    # The broker goes on serving.
    other = await KafkaWire.open(broker.port)
    answer = await other.call(ApiKey.API_VERSIONS, 0, request(ApiKey.API_VERSIONS, 0))
    assert answer.error_code.value == 0
    await other.close()


async def test_a_fetch_response_carries_its_purgatory_wait_as_a_tagged_field(
    wire: KafkaWire,
) -> None:
    await create_topic(wire, "waits")
    s = schema(ApiKey.FETCH, 12)
    body = request(
        ApiKey.FETCH,
        12,
        replica_id=-1,
        max_wait=300,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            s.FetchTopic(
                topic="waits",
                partitions=(
                    s.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    await wire.send_raw(request_frame(ApiKey.FETCH, 12, 41, body))
    frame = await wire.read_frame()
    # The response ends with one tagged field: WAIT_TIME_TAG, 4 bytes, the wait in ms.
    tail = frame[-8:]
    assert tail[0] == 1 and tail[1:3] == bytes([0xE0, 0x05]) and tail[3] == 4
    assert WAIT_TIME_TAG == 0x05 << 7 | 0x60
    (wait_ms,) = struct.unpack(">i", tail[4:])
    assert 250 <= wait_ms <= 5_000  # it waited its max_wait (not answered at once)


async def test_a_retried_idempotent_batch_is_answered_with_its_offset_not_appended(
    broker: Broker, wire: KafkaWire
) -> None:
    await create_topic(wire, "idem")

    def batch(seq: int, n: int) -> bytes:
        return kafka_records.encode(
            [(1000, None, b"%d" % (seq + i), []) for i in range(n)],
            producer_id=77,
            producer_epoch=0,
            base_sequence=seq,
        )

    offsets = []
    for body in (batch(0, 3), batch(3, 2), batch(3, 2), batch(0, 3)):
        answer = await wire.call(ApiKey.PRODUCE, 9, produce_body("idem", body))
        part = answer.responses[0].partition_responses[0]
        offsets.append((part.error_code.value, part.base_offset))
    assert offsets == [(0, 0), (0, 3), (0, 3), (0, 0)]
    answer = await wire.call(ApiKey.PRODUCE, 9, produce_body("idem", batch(9, 1)))
    part = answer.responses[0].partition_responses[0]
    assert part.error_code.value == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert broker.replica_manager.partitions[("idem", 0)].log.log_end_offset == 5


async def test_a_batch_that_is_not_kafkas_v2_is_refused_as_an_invalid_record(
    wire: KafkaWire,
) -> None:
    from purgatory.protocol.records import encode_batch

    await create_topic(wire, "v2only")
    answer = await wire.call(
        ApiKey.PRODUCE, 9, produce_body("v2only", encode_batch([(None, b"x")]))
    )
    assert answer.responses[0].partition_responses[0].error_code.value == ErrorCode.INVALID_RECORD


async def test_an_error_fault_answers_kafka_clients_in_their_api_s_own_shape(
    broker: Broker, wire: KafkaWire
) -> None:
    await create_topic(wire, "faulty")
    await call(
        broker,
        "POST",
        "/v1/faults",
        {
            "name": "nl",
            "kind": "error",
            "api": "Produce",
            "error_code": "NOT_LEADER_OR_FOLLOWER",
            "times": 1,
        },
    )
    batch = kafka_records.encode([(1000, None, b"x", [])])
    answer = await wire.call(ApiKey.PRODUCE, 9, produce_body("faulty", batch))
    part = answer.responses[0].partition_responses[0]
    assert part.error_code.value == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = await wire.call(ApiKey.PRODUCE, 9, produce_body("faulty", batch))
    assert answer.responses[0].partition_responses[0].error_code.value == 0
    await wait_until(lambda: broker.faults.faults == {}, message="the fault gone")


async def test_describe_configs_says_where_each_value_comes_from(
    broker: Broker, wire: KafkaWire
) -> None:
    await create_topic(wire, "described")
    status, _ = await call(
        broker, "PUT", "/v1/config/unclean.leader.election.enable", {"value": True}
    )
    assert status == 200
    s = schema(ApiKey.DESCRIBE_CONFIGS, 4)
    resources = (
        s.DescribeConfigsResource(
            resource_type=2,
            resource_name="described",
            configuration_keys=("unclean.leader.election.enable", "retention.ms"),
        ),
        s.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None),
        s.DescribeConfigsResource(resource_type=4, resource_name="7", configuration_keys=None),
        s.DescribeConfigsResource(resource_type=2, resource_name="ghost", configuration_keys=None),
        s.DescribeConfigsResource(resource_type=3, resource_name="g", configuration_keys=None),
    )
    body = request(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=resources,
        include_synonyms=True,
        include_documentation=True,
    )
    topic, own, other, ghost, group = (await wire.call(ApiKey.DESCRIBE_CONFIGS, 4, body)).results
    assert topic.error_code.value == 0
    entries = {c.name: c for c in topic.configs}
    assert sorted(entries) == ["retention.ms", "unclean.leader.election.enable"]  # as asked
    unclean = entries["unclean.leader.election.enable"]
    assert unclean.value == "true" and unclean.config_source == 2  # DYNAMIC_BROKER_CONFIG
    assert [(y.value, y.source) for y in unclean.synonyms] == [("true", 2), ("false", 5)]
    assert unclean.config_type == 1 and unclean.documentation  # BOOLEAN, documented
    assert entries["retention.ms"].config_type == 5  # LONG, as Kafka types it
    broker_entries = {c.name: c for c in own.configs}
    assert broker_entries["broker.id"].read_only and broker_entries["broker.id"].value == "0"
    assert broker_entries["unclean.leader.election.enable"].value == "true"
    assert other.error_code.value == ErrorCode.INVALID_REQUEST and "broker 7" in other.error_message
    assert ghost.error_code.value == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert group.error_code.value == ErrorCode.INVALID_REQUEST and group.configs == ()


async def test_create_topics_answers_every_config_of_the_topic_it_created(
    wire: KafkaWire,
) -> None:
    s = schema(ApiKey.CREATE_TOPICS, 7)
    body = request(
        ApiKey.CREATE_TOPICS,
        7,
        topics=(
            s.CreatableTopic(
                name="configured",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(s.CreatableTopicConfig(name="retention.ms", value="3600000"),),
            ),
        ),
        timeout=10_000,
        validate_only=False,
    )
    [created] = (await wire.call(ApiKey.CREATE_TOPICS, 7, body)).topics
    assert created.error_code.value == 0
    configs = {c.name: c for c in created.configs}
    retention = configs["retention.ms"]
    assert retention.value == "3600000" and retention.config_source == 1  # DYNAMIC_TOPIC_CONFIG
    assert sorted(configs) == sorted(TOPIC_CONFIGS)  # every one, as DescribeConfigs lists them
    unset = configs["retention.bytes"]
    assert unset.config_source in (4, 5)  # the broker config it follows, not the topic
    [again] = (await wire.call(ApiKey.CREATE_TOPICS, 7, body)).topics
    assert again.error_code.value == ErrorCode.TOPIC_ALREADY_EXISTS and not again.configs


async def test_create_partitions_on_kafkas_wire_grows_a_topic_and_refuses_shrinking(
    broker: Broker, wire: KafkaWire
) -> None:
    await create_topic(wire, "grown")

    def grow(count: int, assignments: tuple[list[int], ...] | None = None, v: int = 3) -> object:
        s = schema(ApiKey.CREATE_PARTITIONS, v)
        given = (
            None
            if assignments is None
            else tuple(s.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments)
        )
        return request(
            ApiKey.CREATE_PARTITIONS,
            v,
            topics=(s.CreatePartitionsTopic(name="grown", count=count, assignments=given),),
            timeout=10_000,
            validate_only=False,
        )

    [ok] = (await wire.call(ApiKey.CREATE_PARTITIONS, 3, grow(2))).results
    assert ok.error_code.value == 0 and ok.error_message is None
    assert len(broker.metadata.topics["grown"].partitions) == 2
    [bad] = (await wire.call(ApiKey.CREATE_PARTITIONS, 3, grow(3, ([0, 5],)))).results
    assert bad.error_code.value == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "replication factor is 1" in bad.error_message
    [shrunk] = (await wire.call(ApiKey.CREATE_PARTITIONS, 0, grow(1, v=0))).results
    assert shrunk.error_code.value == ErrorCode.INVALID_PARTITIONS


async def test_error_faults_answer_create_partitions_and_describe_configs_per_entry(
    broker: Broker, wire: KafkaWire
) -> None:
    for api in ("CreatePartitions", "DescribeConfigs"):
        fault = {"name": api, "kind": "error", "api": api, "error_code": "NOT_CONTROLLER"}
        status, _ = await call(broker, "POST", "/v1/faults", {**fault, "times": 1})
        assert status in (200, 201)
    s = schema(ApiKey.CREATE_PARTITIONS, 2)
    body = request(
        ApiKey.CREATE_PARTITIONS,
        2,
        topics=tuple(s.CreatePartitionsTopic(name=n, count=2, assignments=None) for n in "ab"),
        timeout=1000,
        validate_only=True,
    )
    answer = await wire.call(ApiKey.CREATE_PARTITIONS, 2, body)
    assert [(r.name, r.error_code.value) for r in answer.results] == [
        ("a", ErrorCode.NOT_CONTROLLER),
        ("b", ErrorCode.NOT_CONTROLLER),
    ]
    d = schema(ApiKey.DESCRIBE_CONFIGS, 1)
    body = request(
        ApiKey.DESCRIBE_CONFIGS,
        1,
        resources=(d.DescribeConfigsResource(resource_type=4, resource_name="0"),),
        include_synonyms=False,
    )
    [result] = (await wire.call(ApiKey.DESCRIBE_CONFIGS, 1, body)).results
    assert result.error_code.value == ErrorCode.NOT_CONTROLLER and result.configs == ()
    assert result.resource_name == "0"


LAZY_KAFKA_SCRIPT = """
import asyncio, struct, sys
from purgatory.broker.config.broker_config import load_config
from purgatory.broker.server import start_broker
from purgatory.clients.admin import AdminClient

def api_versions_v0(correlation_id):
    payload = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"lazy"
    return struct.pack(">i", len(payload)) + payload

async def main():
    config = load_config(overrides={"listeners": "PLAINTEXT://127.0.0.1:0",
                                    "admin.listener": "127.0.0.1:0"}, environ={})
    broker = await start_broker(config)
    try:
        async with AdminClient(f"127.0.0.1:{broker.port}") as admin:
            await admin.create_topic("t", 1)  # our protocol: served without Kafka's code
        print("before", any(m.startswith("kio") for m in sys.modules))
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(api_versions_v0(1) + api_versions_v0(2))  # pipelined, while it loads
        ids = []
        for _ in range(2):
            size, = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            ids.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
        print("answered", ids)
        print("after", any(m.startswith("kio") for m in sys.modules))
        writer.close()
    finally:
        await broker.stop()

asyncio.run(main())
"""


def test_kafka_code_loads_when_the_first_kafka_client_connects_not_before() -> None:
    # Issue 17: an idle broker (50 of them on a laptop) does not pay ~10 MB and ~0.25 s of
    # CPU for Kafka's schemas; the first Kafka connection waits for them, in order.
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", LAZY_KAFKA_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [
        line
        for line in run.stdout.splitlines()
        if line.split(" ")[0] in {"before", "answered", "after"}
    ]
    assert lines == ["before False", "answered [1, 2]", "after True"], run.stdout


@pytest.mark.parametrize("version", [1, 5, 6])
async def test_a_delete_topics_naming_the_empty_string_is_answered(
    wire: KafkaWire, version: int
) -> None:
    if version >= 6:
        s = schema(ApiKey.DELETE_TOPICS, version)
        topics = {"topics": (s.DeleteTopicState(name="", topic_id=None),)}
    else:
        topics = {"topic_names": ("",)}
    body = request(ApiKey.DELETE_TOPICS, version, timeout=1_000, **topics)
    answer = await wire.call(ApiKey.DELETE_TOPICS, version, body)
    (result,) = answer.responses
    assert result.name == "" and result.error_code.value == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("deferred", [False, True])
async def test_an_answer_that_cannot_be_encoded_is_an_error_answer_not_a_hung_connection(
    broker: Broker, wire: KafkaWire, deferred: bool
) -> None:
    """A handler bug (a value its schema refuses) must not leave the request unanswered:
    every later answer on the connection would queue behind it forever."""
    await create_topic(wire, "warm")  # the Kafka protocol is loaded
    served = broker.kafka.served
    assert served is not None
    handlers = served[1]

    def broken(_body: object, _version: int) -> object:
        if not deferred:
            return object()  # no schema writes this

        async def later() -> object:
            return object()

        return later()

    original = handlers[ApiKey.DESCRIBE_CLUSTER]
    handlers[ApiKey.DESCRIBE_CLUSTER] = broken  # type: ignore[index]
    try:
        body = request(ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False)
        answer = await wire.call(ApiKey.DESCRIBE_CLUSTER, 0, body)
        assert answer.error_code.value == ErrorCode.UNKNOWN_SERVER_ERROR
    finally:
        handlers[ApiKey.DESCRIBE_CLUSTER] = original  # type: ignore[index]
    await create_topic(wire, "after")  # the connection still serves


def _bad_batches() -> dict[str, tuple[bytes, int, bool]]:
    """Batches a consumer could not read, each with the error Kafka gives it and whether
    it names the bad records (record-level errors do; batch-level ones do not)."""
    from tests.unit.test_log_validator import NOW, batch, compressed, recrc, with_count

    control = bytearray(batch(1, NOW))
    control[22] |= 0x20
    return {
        "count over the records": (
            with_count(batch(1), 2**31 - 1),
            ErrorCode.INVALID_RECORD,
            True,
        ),
        "garbage gzip": (
            compressed(batch(1), 1, b"\x1f\x8bjunk"),
            ErrorCode.CORRUPT_MESSAGE,
            False,
        ),
        "a control batch": (recrc(bytes(control)), ErrorCode.INVALID_RECORD, False),
        "year 9999": (batch(1, 253402300799000), ErrorCode.INVALID_TIMESTAMP, True),
    }


@pytest.mark.parametrize("name", list(_bad_batches()))
async def test_a_batch_no_consumer_could_read_is_refused_and_nothing_is_stored(
    broker: Broker, wire: KafkaWire, name: str
) -> None:
    import time

    from tests.unit.test_log_validator import batch

    data, code, per_record = _bad_batches()[name]
    await create_topic(wire, "checked")
    answer = await wire.call(ApiKey.PRODUCE, 9, produce_body("checked", data))
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code.value == code, partition.error_message
    assert partition.error_message
    assert bool(partition.record_errors) == per_record
    assert broker.replica_manager.partitions[("checked", 0)].log.log_end_offset == 0
    good = await wire.call(
        ApiKey.PRODUCE, 9, produce_body("checked", batch(1, int(time.time() * 1000)))
    )
    assert good.responses[0].partition_responses[0].base_offset == 0  # no offset was taken
