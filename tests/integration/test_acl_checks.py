"""Authorization where Kafka's KafkaApis checks it (issue 47), on both protocols: with the
StandardAuthorizer a principal without the ACL an API needs gets Kafka's error there
(TOPIC_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and nothing changes (no record
appended, no topic created or deleted, no config changed); once allowed, the same request
succeeds. Kafka's protocol through KafkaWire, ours through a raw Connection, both on the
PLAINTEXT listener, where they act as User:ANONYMOUS; confluent-kafka as a SASL user."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
from collections.abc import AsyncIterator
from typing import Any

from purgatory.broker.server import Broker, start_broker
from purgatory.clients.connection import Connection
from purgatory.protocol import acl_messages as am
from purgatory.protocol import kafka_records
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import request_class
from purgatory.protocol.records import encode_batch
from tests import kafka_wire
from tests.kafka_wire import KafkaWire, schema
from tests.support import broker_config, wait_until

PASSWORDS = {"admin": "admin-secret", "bob": "bob-secret"}
AUTHORIZED = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{name}="{password}"' for name, password in PASSWORDS.items())
        + ";"
    ),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


@contextlib.asynccontextmanager
async def authorized_broker(**extra: Any) -> AsyncIterator[Broker]:
    """A broker with Kafka's StandardAuthorizer: PLAINTEXT (User:ANONYMOUS) and
    SASL_PLAINTEXT (PLAIN users admin, a super user, and bob) listeners."""
    broker = await start_broker(broker_config(**{**AUTHORIZED, **extra}))
    try:
        yield broker
    finally:
        await broker.stop()


def client(broker: Broker, user: str) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` on the SASL_PLAINTEXT listener."""
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_AF = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
ANONYMOUS = "User:ANONYMOUS"
Op = am.AclOperation
Res = am.ResourceType


@dataclasses.dataclass
class Peers:
    broker: Broker
    wire: KafkaWire  # Kafka's protocol
    ours: Connection  # our protocol


@contextlib.asynccontextmanager
async def peers(**extra: Any) -> AsyncIterator[Peers]:
    async with authorized_broker(**extra) as broker:
        port = broker.ports["PLAINTEXT"]
        wire = await KafkaWire.open(port)
        ours = await Connection.open("127.0.0.1", port)
        try:
            yield Peers(broker, wire, ours)
        finally:
            await wire.close()
            await ours.close()


async def allow(
    broker: Broker, resource: Res, name: str, *ops: Op, principal: str = ANONYMOUS
) -> None:
    """ACLs written as the cluster would (the controller, no request to authorize)."""
    acls = [
        am.Acl(resource, name, am.PatternType.LITERAL, principal, "*", op, 3)  # 3: ALLOW
        for op in ops
    ]
    done = await broker.forwarding.create_acls(am.CreateAclsRequest(acls))
    assert [r.error_code for r in done.results] == [0] * len(acls)


async def create_topic(broker: Broker, name: str, partitions: int = 1) -> None:
    done = await broker.forwarding.create_topics(
        m.CreateTopicsRequest([m.CreatableTopic(name, partitions, 1)])
    )
    assert done.topics[0].error_code == 0


def body(api_key: ApiKey, version: int, **values: Any) -> Any:
    return entity(request_class(api_key, version), **values)


def entity(cls: type, **values: Any) -> Any:
    """A kio entity: ``values``, every other field a sample value (arrays empty)."""
    return dataclasses.replace(kafka_wire._sample(cls, 0), **values)


def log_end(broker: Broker, topic: str) -> int:
    return broker.replica_manager.partitions[(topic, 0)].log.log_end_offset


def kafka_produce(topic: str, transactional_id: str | None = None, **batch: Any) -> Any:
    s = schema(ApiKey.PRODUCE, 9)
    records = kafka_records.encode([(1000, None, b"v", [])], **batch)
    return body(
        ApiKey.PRODUCE,
        9,
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            entity(
                s.TopicProduceData,
                name=topic,
                partition_data=(entity(s.PartitionProduceData, index=0, records=records),),
            ),
        ),
    )


def our_produce(topic: str) -> m.ProduceRequest:
    batch = encode_batch([(None, b"v")])
    return m.ProduceRequest(
        -1, 5000, [m.TopicProduceData(topic, [m.PartitionProduceData(0, batch)])]
    )


def codes(response: Any, topics: str, parts: str, code: str = "error_code") -> list[int]:
    return [int(getattr(p, code)) for t in getattr(response, topics) for p in getattr(t, parts)]


# -- Produce -------------------------------------------------------------------------------


async def test_produce_needs_write_on_each_topic_unknown_ones_too() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        answer = await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("t"))
        assert codes(answer, "responses", "partition_responses") == [TAF]
        answer = await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("nowhere"))
        assert codes(answer, "responses", "partition_responses") == [TAF]
        ours = await p.ours.send(ApiKey.PRODUCE, our_produce("t"))
        assert codes(ours, "responses", "partitions") == [TAF]
        assert log_end(p.broker, "t") == 0
        assert "nowhere" not in p.broker.metadata.topics  # not auto-created either

        await allow(p.broker, Res.TOPIC, "t", Op.WRITE)
        answer = await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("t"))
        assert codes(answer, "responses", "partition_responses") == [0]
        ours = await p.ours.send(ApiKey.PRODUCE, our_produce("t"))
        assert codes(ours, "responses", "partitions") == [0]
        assert log_end(p.broker, "t") == 2

        # A produce to an unknown topic starts creating it only for who may CREATE it.
        await allow(p.broker, Res.TOPIC, "later", Op.WRITE)
        answer = await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("later"))
        assert codes(answer, "responses", "partition_responses") == [UNKNOWN]
        assert "later" not in p.broker.forwarding._auto_creating
        await allow(p.broker, Res.TOPIC, "later", Op.CREATE)
        answer = await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("later"))
        assert codes(answer, "responses", "partition_responses") == [UNKNOWN]
        await wait_until(lambda: "later" in p.broker.metadata.topics, message="later created")


async def test_a_transactional_produce_needs_write_on_its_transactional_id() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        await allow(p.broker, Res.TOPIC, "t", Op.WRITE)
        request = kafka_produce("t", "tx", producer_id=5, producer_epoch=0, transactional=True)
        answer = await p.wire.call(ApiKey.PRODUCE, 9, request)
        assert codes(answer, "responses", "partition_responses") == [TXN_AF]
        assert log_end(p.broker, "t") == 0


# -- Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers -------------


def kafka_fetch(topic: str) -> Any:
    s = schema(ApiKey.FETCH, 12)
    part = entity(
        s.FetchPartition,
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return body(
        ApiKey.FETCH,
        12,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(entity(s.FetchTopic, topic=topic, partitions=(part,)),),
        rack_id="",
    )


async def test_reading_a_topic_needs_read_and_describing_it_describe() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        await allow(p.broker, Res.TOPIC, "t", Op.WRITE, principal="User:writer")
        await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("t"))  # refused: nothing to read

        fetch = await p.wire.call(ApiKey.FETCH, 12, kafka_fetch("t"))
        assert codes(fetch, "responses", "partitions") == [TAF]
        ours = await p.ours.send(
            ApiKey.FETCH,
            m.FetchRequest(
                -1, 0, 0, 1 << 20, [m.FetchTopic("t", [m.FetchPartition(0, 0, 1 << 20)])]
            ),
            version=0,
        )
        assert codes(ours, "responses", "partitions") == [TAF]

        ls = schema(ApiKey.LIST_OFFSETS, 7)
        list_offsets = body(
            ApiKey.LIST_OFFSETS,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=(
                entity(
                    ls.ListOffsetsTopic,
                    name="t",
                    partitions=(
                        entity(
                            ls.ListOffsetsPartition,
                            partition_index=0,
                            current_leader_epoch=-1,
                            timestamp=-1,
                        ),
                    ),
                ),
            ),
        )
        answer = await p.wire.call(ApiKey.LIST_OFFSETS, 7, list_offsets)
        assert codes(answer, "topics", "partitions") == [TAF]
        ours = await p.ours.send(
            ApiKey.LIST_OFFSETS,
            m.ListOffsetsRequest(-1, [m.ListOffsetsTopic("t", [m.ListOffsetsPartition(0, -1)])]),
        )
        assert codes(ours, "topics", "partitions") == [TAF]

        es = schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
        epochs = body(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            replica_id=-1,
            topics=(
                entity(
                    es.OffsetForLeaderTopic,
                    topic="t",
                    partitions=(
                        entity(
                            es.OffsetForLeaderPartition,
                            partition=0,
                            current_leader_epoch=-1,
                            leader_epoch=0,
                        ),
                    ),
                ),
            ),
        )
        answer = await p.wire.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epochs)
        assert codes(answer, "topics", "partitions") == [TAF]
        ours = await p.ours.send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            m.OffsetForLeaderEpochRequest(
                -1, [m.OffsetForLeaderTopic("t", [m.OffsetForLeaderPartition(0, -1, 0)])]
            ),
        )
        assert codes(ours, "topics", "partitions") == [TAF]

        ps = schema(ApiKey.DESCRIBE_PRODUCERS, 0)
        producers = body(
            ApiKey.DESCRIBE_PRODUCERS,
            0,
            topics=(entity(ps.TopicRequest, name="t", partition_indexes=(0,)),),
        )
        answer = await p.wire.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers)
        assert codes(answer, "topics", "partitions") == [TAF]

        await allow(p.broker, Res.TOPIC, "t", Op.READ)  # READ implies DESCRIBE
        fetch = await p.wire.call(ApiKey.FETCH, 12, kafka_fetch("t"))
        assert codes(fetch, "responses", "partitions") == [0]
        answer = await p.wire.call(ApiKey.LIST_OFFSETS, 7, list_offsets)
        assert codes(answer, "topics", "partitions") == [0]
        answer = await p.wire.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epochs)
        assert codes(answer, "topics", "partitions") == [0]
        answer = await p.wire.call(ApiKey.DESCRIBE_PRODUCERS, 0, producers)
        assert codes(answer, "topics", "partitions") == [0]
        ours = await p.ours.send(
            ApiKey.LIST_OFFSETS,
            m.ListOffsetsRequest(-1, [m.ListOffsetsTopic("t", [m.ListOffsetsPartition(0, -1)])]),
        )
        assert codes(ours, "topics", "partitions") == [0]


async def test_delete_records_needs_delete_on_the_topic() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        await allow(p.broker, Res.TOPIC, "t", Op.WRITE)
        for _ in range(3):
            await p.wire.call(ApiKey.PRODUCE, 9, kafka_produce("t"))
        ds = schema(ApiKey.DELETE_RECORDS, 2)
        delete = body(
            ApiKey.DELETE_RECORDS,
            2,
            timeout=datetime.timedelta(seconds=5),
            topics=(
                entity(
                    ds.DeleteRecordsTopic,
                    name="t",
                    partitions=(entity(ds.DeleteRecordsPartition, partition_index=0, offset=1),),
                ),
            ),
        )
        answer = await p.wire.call(ApiKey.DELETE_RECORDS, 2, delete)
        assert codes(answer, "topics", "partitions") == [TAF]
        ours_request = m.DeleteRecordsRequest(
            [m.DeleteRecordsTopic("t", [m.DeleteRecordsPartition(0, 2)])]
        )
        ours = await p.ours.send(ApiKey.DELETE_RECORDS, ours_request)
        assert codes(ours, "topics", "partitions") == [TAF]
        assert p.broker.replica_manager.partitions[("t", 0)].log.log_start_offset == 0

        await allow(p.broker, Res.TOPIC, "t", Op.DELETE)
        answer = await p.wire.call(ApiKey.DELETE_RECORDS, 2, delete)
        assert codes(answer, "topics", "partitions") == [0]
        ours = await p.ours.send(ApiKey.DELETE_RECORDS, ours_request)
        assert codes(ours, "topics", "partitions") == [0]
        assert p.broker.replica_manager.partitions[("t", 0)].log.log_start_offset == 2


# -- Metadata, DescribeTopicPartitions -----------------------------------------------------


def kafka_metadata(*names: str | None, auto_create: bool = False) -> Any:
    ms = schema(ApiKey.METADATA, 12)
    topics = (
        None
        if names == (None,)
        else tuple(entity(ms.MetadataRequestTopic, topic_id=None, name=n) for n in names)
    )
    return body(
        ApiKey.METADATA,
        12,
        topics=topics,
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


async def test_metadata_hides_topics_the_principal_may_not_describe_and_creates_only_with_create() -> (
    None
):
    async with peers() as p:
        await create_topic(p.broker, "seen")
        await create_topic(p.broker, "hidden")
        await allow(p.broker, Res.TOPIC, "seen", Op.DESCRIBE)

        every = await p.wire.call(ApiKey.METADATA, 12, kafka_metadata(None))
        assert [(t.name, int(t.error_code)) for t in every.topics] == [("seen", 0)]
        named = await p.wire.call(ApiKey.METADATA, 12, kafka_metadata("seen", "hidden"))
        assert [(t.name, int(t.error_code)) for t in named.topics] == [("seen", 0), ("hidden", TAF)]
        ours = await p.ours.send(ApiKey.METADATA, m.MetadataRequest(None))
        assert [(t.name, t.error_code) for t in ours.topics] == [("seen", 0)]
        ours = await p.ours.send(ApiKey.METADATA, m.MetadataRequest(["seen", "hidden"]))
        assert [(t.name, t.error_code) for t in ours.topics] == [("seen", 0), ("hidden", TAF)]

        # Auto-creation: DESCRIBE is not enough, CREATE on the topic (or cluster) is.
        await allow(p.broker, Res.TOPIC, "new", Op.DESCRIBE)
        answer = await p.wire.call(ApiKey.METADATA, 12, kafka_metadata("new", auto_create=True))
        assert [int(t.error_code) for t in answer.topics] == [TAF]
        ours = await p.ours.send(ApiKey.METADATA, m.MetadataRequest(["new"], True))
        assert [t.error_code for t in ours.topics] == [TAF]
        assert "new" not in p.broker.metadata.topics
        await allow(p.broker, Res.TOPIC, "new", Op.CREATE)
        ours = await p.ours.send(ApiKey.METADATA, m.MetadataRequest(["new"], True))
        assert [t.error_code in (0, ErrorCode.LEADER_NOT_AVAILABLE) for t in ours.topics] == [True]
        assert "new" in p.broker.metadata.topics

        dt = schema(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)

        def describe(*names: str) -> Any:
            return body(
                ApiKey.DESCRIBE_TOPIC_PARTITIONS,
                0,
                topics=tuple(entity(dt.TopicRequest, name=n) for n in names),
                response_partition_limit=100,
                cursor=None,
            )

        answer = await p.wire.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, describe())
        assert [t.name for t in answer.topics] == ["new", "seen"]
        answer = await p.wire.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, describe("hidden", "seen"))
        assert [(t.name, int(t.error_code)) for t in answer.topics] == [
            ("seen", 0),
            ("hidden", TAF),
        ]


# -- CreateTopics, DeleteTopics, CreatePartitions ------------------------------------------


def kafka_create_topics(name: str) -> Any:
    cs = schema(ApiKey.CREATE_TOPICS, 7)
    return body(
        ApiKey.CREATE_TOPICS,
        7,
        topics=(
            entity(
                cs.CreatableTopic,
                name=name,
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    )


def kafka_delete_topics(name: str) -> Any:
    return body(
        ApiKey.DELETE_TOPICS,
        5,
        topic_names=(name,),
        timeout=datetime.timedelta(seconds=10),
    )


def kafka_create_partitions(name: str, count: int) -> Any:
    cs = schema(ApiKey.CREATE_PARTITIONS, 3)
    return body(
        ApiKey.CREATE_PARTITIONS,
        3,
        topics=(entity(cs.CreatePartitionsTopic, name=name, count=count, assignments=None),),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    )


async def test_topic_changes_need_create_delete_and_alter() -> None:
    async with peers() as p:
        answer = await p.wire.call(ApiKey.CREATE_TOPICS, 7, kafka_create_topics("a"))
        assert [(int(t.error_code), t.error_message) for t in answer.topics] == [
            (TAF, "Authorization failed.")
        ]
        ours = await p.ours.send(
            ApiKey.CREATE_TOPICS, m.CreateTopicsRequest([m.CreatableTopic("b", 1, 1)])
        )
        assert [t.error_code for t in ours.topics] == [TAF]
        assert "a" not in p.broker.metadata.topics and "b" not in p.broker.metadata.topics
        await allow(p.broker, Res.TOPIC, "a", Op.CREATE)
        await allow(p.broker, Res.CLUSTER, "kafka-cluster", Op.CREATE, principal="User:x")
        answer = await p.wire.call(ApiKey.CREATE_TOPICS, 7, kafka_create_topics("a"))
        # Created; its configs only to who may DESCRIBE_CONFIGS it, as Kafka's controller.
        assert [
            (int(t.error_code), int(t.topic_config_error_code), t.num_partitions, t.configs)
            for t in answer.topics
        ] == [(0, TAF, -1, ())]
        await allow(p.broker, Res.TOPIC, "b", Op.CREATE)
        ours = await p.ours.send(
            ApiKey.CREATE_TOPICS, m.CreateTopicsRequest([m.CreatableTopic("b", 1, 1)])
        )
        assert [t.error_code for t in ours.topics] == [0]

        # CreatePartitions: ALTER.
        answer = await p.wire.call(ApiKey.CREATE_PARTITIONS, 3, kafka_create_partitions("a", 2))
        assert [int(r.error_code) for r in answer.results] == [TAF]
        ours = await p.ours.send(
            ApiKey.CREATE_PARTITIONS, m.CreatePartitionsRequest([m.CreatePartitionsTopic("b", 2)])
        )
        assert [r.error_code for r in ours.results] == [TAF]
        assert len(p.broker.metadata.topics["a"].partitions) == 1
        await allow(p.broker, Res.TOPIC, "a", Op.ALTER)
        await allow(p.broker, Res.TOPIC, "b", Op.ALTER)
        answer = await p.wire.call(ApiKey.CREATE_PARTITIONS, 3, kafka_create_partitions("a", 2))
        assert [int(r.error_code) for r in answer.results] == [0]
        ours = await p.ours.send(
            ApiKey.CREATE_PARTITIONS, m.CreatePartitionsRequest([m.CreatePartitionsTopic("b", 2)])
        )
        assert [r.error_code for r in ours.results] == [0]

        # DeleteTopics: DELETE; an unknown topic is UNKNOWN only to who may describe it.
        answer = await p.wire.call(ApiKey.DELETE_TOPICS, 5, kafka_delete_topics("a"))
        assert [int(r.error_code) for r in answer.responses] == [TAF]
        answer = await p.wire.call(ApiKey.DELETE_TOPICS, 5, kafka_delete_topics("ghost"))
        assert [int(r.error_code) for r in answer.responses] == [TAF]
        ours = await p.ours.send(ApiKey.DELETE_TOPICS, m.DeleteTopicsRequest(["b", "ghost"]))
        assert [(r.name, r.error_code) for r in ours.responses] == [("b", TAF), ("ghost", TAF)]
        assert {"a", "b"} <= set(p.broker.metadata.topics)
        await allow(p.broker, Res.TOPIC, "ghost", Op.DESCRIBE)
        ours = await p.ours.send(ApiKey.DELETE_TOPICS, m.DeleteTopicsRequest(["ghost"]))
        assert [r.error_code for r in ours.responses] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        await allow(p.broker, Res.TOPIC, "a", Op.DELETE)
        await allow(p.broker, Res.TOPIC, "b", Op.DELETE)
        answer = await p.wire.call(ApiKey.DELETE_TOPICS, 5, kafka_delete_topics("a"))
        assert [int(r.error_code) for r in answer.responses] == [0]
        ours = await p.ours.send(ApiKey.DELETE_TOPICS, m.DeleteTopicsRequest(["b"]))
        assert [r.error_code for r in ours.responses] == [0]
        assert not {"a", "b"} & set(p.broker.metadata.topics)


async def test_confluent_kafka_creates_topics_only_with_create() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    async with peers() as p:

        def create(user: str) -> Any:
            admin = AdminClient(client(p.broker, user))  # alive until the answer
            futures = admin.create_topics([NewTopic("c", 1, 1)], request_timeout=15)
            try:
                futures["c"].result(15)
            except Exception as exc:  # KafkaException carrying the KafkaError
                return exc.args[0].code()
            return 0

        from confluent_kafka import KafkaError

        assert await asyncio.to_thread(create, "bob") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert "c" not in p.broker.metadata.topics
        assert await asyncio.to_thread(create, "admin") == 0  # a super user


# -- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs --------------------------------


async def test_configs_need_describe_configs_and_alter_configs() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        broker_id = str(p.broker.broker_id)
        ds = schema(ApiKey.DESCRIBE_CONFIGS, 4)
        describe = body(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=(
                entity(
                    ds.DescribeConfigsResource,
                    resource_type=2,
                    resource_name="t",
                    configuration_keys=None,
                ),
                entity(
                    ds.DescribeConfigsResource,
                    resource_type=4,
                    resource_name=broker_id,
                    configuration_keys=None,
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )
        answer = await p.wire.call(ApiKey.DESCRIBE_CONFIGS, 4, describe)
        assert [(r.resource_name, int(r.error_code), r.configs) for r in answer.results] == [
            ("t", TAF, ()),
            (broker_id, CAF, ()),
        ]

        ias = schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
        alter = body(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=(
                entity(
                    ias.AlterConfigsResource,
                    resource_type=2,
                    resource_name="t",
                    configs=(
                        entity(
                            ias.AlterableConfig,
                            name="retention.ms",
                            config_operation=0,
                            value="1000",
                        ),
                    ),
                ),
            ),
            validate_only=False,
        )
        answer = await p.wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
        assert [int(r.error_code) for r in answer.responses] == [TAF]
        ours_request = m.IncrementalAlterConfigsRequest(
            [
                m.AlterConfigsResource(
                    m.TOPIC_RESOURCE, "t", [m.AlterableConfig("retention.ms", 0, "2000")]
                ),
                m.AlterConfigsResource(
                    m.BROKER_RESOURCE, "", [m.AlterableConfig("log.retention.ms", 0, "5000")]
                ),
            ]
        )
        ours = await p.ours.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, ours_request)
        assert [r.error_code for r in ours.responses] == [TAF, CAF]
        ours = await p.ours.send(ApiKey.ALTER_CONFIGS, ours_request)
        assert [r.error_code for r in ours.responses] == [TAF, CAF]
        assert "retention.ms" not in p.broker.metadata.topics["t"].configs

        await allow(p.broker, Res.TOPIC, "t", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
        answer = await p.wire.call(ApiKey.DESCRIBE_CONFIGS, 4, describe)
        assert [int(r.error_code) for r in answer.results] == [0, CAF]
        answer = await p.wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
        assert [int(r.error_code) for r in answer.responses] == [0]
        assert p.broker.metadata.topics["t"].configs["retention.ms"] == "1000"
        ours = await p.ours.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, ours_request)
        assert [r.error_code for r in ours.responses] == [0, CAF]
        assert p.broker.metadata.topics["t"].configs["retention.ms"] == "2000"


async def test_confluent_kafka_reads_and_changes_configs_only_with_their_acls() -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    async with peers() as p:
        await create_topic(p.broker, "t")

        def configs(user: str) -> tuple[int, int]:
            admin = AdminClient(client(p.broker, user))  # alive until the answers
            change = ConfigResource(
                "topic",
                "t",
                incremental_configs=[
                    ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
                ],
            )
            codes = []
            for futures in (
                admin.describe_configs([ConfigResource("topic", "t")], request_timeout=15),
                admin.incremental_alter_configs([change], request_timeout=15),
            ):
                try:
                    next(iter(futures.values())).result(15)
                    codes.append(0)
                except KafkaException as exc:
                    codes.append(exc.args[0].code())
            return codes[0], codes[1]

        denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert await asyncio.to_thread(configs, "bob") == (denied, denied)
        assert "retention.ms" not in p.broker.metadata.topics["t"].configs
        await allow(p.broker, Res.TOPIC, "t", Op.ALTER_CONFIGS, principal="User:bob")
        assert await asyncio.to_thread(configs, "bob") == (0, 0)
        assert p.broker.metadata.topics["t"].configs["retention.ms"] == "1000"


# -- InitProducerId ------------------------------------------------------------------------


def kafka_init_producer_id(transactional_id: str | None) -> Any:
    return body(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )


async def test_init_producer_id_needs_idempotent_write_or_write_on_the_transactional_id() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        answer = await p.wire.call(ApiKey.INIT_PRODUCER_ID, 4, kafka_init_producer_id(None))
        assert (int(answer.error_code), answer.producer_id) == (CAF, -1)
        answer = await p.wire.call(ApiKey.INIT_PRODUCER_ID, 4, kafka_init_producer_id("tx"))
        assert int(answer.error_code) == TXN_AF
        ours = await p.ours.send(ApiKey.INIT_PRODUCER_ID, m.InitProducerIdRequest())
        assert (ours.error_code, ours.producer_id) == (CAF, -1)

        # KIP-679: WRITE on any topic is enough for an idempotent producer.
        await allow(p.broker, Res.TOPIC, "t", Op.WRITE)
        answer = await p.wire.call(ApiKey.INIT_PRODUCER_ID, 4, kafka_init_producer_id(None))
        assert int(answer.error_code) == 0 and answer.producer_id >= 0
        ours = await p.ours.send(ApiKey.INIT_PRODUCER_ID, m.InitProducerIdRequest())
        assert ours.error_code == 0 and ours.producer_id >= 0
        await allow(p.broker, Res.TRANSACTIONAL_ID, "tx", Op.WRITE)

        answer = await p.wire.call(ApiKey.INIT_PRODUCER_ID, 4, kafka_init_producer_id("tx"))
        # Past authorization: the coordinator's answer (none found yet: no FindCoordinator).
        assert int(answer.error_code) == ErrorCode.NOT_COORDINATOR


# -- The cluster's: ElectLeaders, DescribeQuorum, DescribeLogDirs, SCRAM credentials -------


async def test_cluster_apis_need_their_operation_on_the_cluster() -> None:
    async with peers() as p:
        await create_topic(p.broker, "t")
        es = schema(ApiKey.ELECT_LEADERS, 2)
        elect = body(
            ApiKey.ELECT_LEADERS,
            2,
            election_type=0,
            topic_partitions=(entity(es.TopicPartitions, topic="t", partitions=(0,)),),
            timeout=datetime.timedelta(seconds=5),
        )
        answer = await p.wire.call(ApiKey.ELECT_LEADERS, 2, elect)
        assert int(answer.error_code) == CAF
        assert codes(answer, "replica_election_results", "partition_result") == [CAF]
        ours = await p.ours.send(
            ApiKey.ELECT_LEADERS,
            m.ElectLeadersRequest(0, [m.TopicPartitions("t", [0])], 5000),
        )
        assert ours.error_code == CAF

        answer = await p.wire.call(ApiKey.DESCRIBE_QUORUM, 1, body(ApiKey.DESCRIBE_QUORUM, 1))
        assert (int(answer.error_code), answer.topics) == (CAF, ())
        ours = await p.ours.send(ApiKey.DESCRIBE_QUORUM, rm.DescribeQuorumRequest())
        assert ours.error_code == CAF

        logs = body(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
        answer = await p.wire.call(ApiKey.DESCRIBE_LOG_DIRS, 4, logs)
        assert (int(answer.error_code), answer.results) == (CAF, ())

        scram = body(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None)
        answer = await p.wire.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, scram)
        assert int(answer.error_code) == CAF
        ours = await p.ours.send(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, sm.DescribeUserScramCredentialsRequest(None)
        )
        assert ours.error_code == CAF
        upsert = sm.ScramCredentialUpsertion("carol", 2, 8192, b"salt", b"x" * 64)
        ours = await p.ours.send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, sm.AlterUserScramCredentialsRequest([], [upsert])
        )
        assert [(r.user, r.error_code) for r in ours.results] == [("carol", CAF)]
        assert p.broker.metadata.scram_credential("SCRAM-SHA-512", "carol") is None

        await allow(p.broker, Res.CLUSTER, "kafka-cluster", Op.ALTER)  # implies DESCRIBE
        answer = await p.wire.call(ApiKey.DESCRIBE_QUORUM, 1, body(ApiKey.DESCRIBE_QUORUM, 1))
        assert int(answer.error_code) == 0 and answer.topics
        answer = await p.wire.call(ApiKey.DESCRIBE_LOG_DIRS, 4, logs)
        assert int(answer.error_code) == 0 and answer.results
        ours = await p.ours.send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, sm.AlterUserScramCredentialsRequest([], [upsert])
        )
        assert [(r.user, r.error_code) for r in ours.results] == [("carol", 0)]
        answer = await p.wire.call(ApiKey.ELECT_LEADERS, 2, elect)
        assert int(answer.error_code) == 0


# -- without an authorizer ------------------------------------------------------------------


async def test_without_an_authorizer_anonymous_may_do_everything() -> None:
    async with authorized_broker(**{"authorizer.class.name": ""}) as broker:
        assert not broker.auth.enabled
        wire = await KafkaWire.open(broker.ports["PLAINTEXT"])
        try:
            answer = await wire.call(ApiKey.CREATE_TOPICS, 7, kafka_create_topics("free"))
            assert [int(t.error_code) for t in answer.topics] == [0]
            answer = await wire.call(ApiKey.PRODUCE, 9, kafka_produce("free"))
            assert codes(answer, "responses", "partition_responses") == [0]
            answer = await wire.call(ApiKey.INIT_PRODUCER_ID, 4, kafka_init_producer_id(None))
            assert int(answer.error_code) == 0
        finally:
            await wire.close()
