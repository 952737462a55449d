"""ACLs with real Kafka clients (issue 47): with Kafka's StandardAuthorizer a super user
manages ACLs through confluent-kafka's AdminClient (CreateAcls, DescribeAcls, DeleteAcls,
held in the metadata log on every broker); a principal allowed to write and read a topic
produces and consumes; one without ACLs gets TOPIC_AUTHORIZATION_FAILED as producer and
as consumer, GROUP_AUTHORIZATION_FAILED for a group it may not read, and
CLUSTER_AUTHORIZATION_FAILED for the ACL APIs; without an authorizer the ACL APIs answer
SECURITY_DISABLED."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.server import Broker, start_broker
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.integration.test_admin_http import purgatory_cli
from tests.kafka_wire import KafkaWire, request
from tests.support import broker_config

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    + ";"
)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@contextlib.asynccontextmanager
async def authorized_broker(**extra: Any) -> AsyncIterator[Broker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        **extra,
    }
    broker = await start_broker(broker_config(**settings))
    try:
        yield broker
    finally:
        await broker.stop()


def client(broker: Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def acl_binding(
    kind: Any, name: str, operation: Any, principal: str = "User:alice", pattern: Any = None
) -> Any:
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    return AclBinding(
        kind,
        name,
        pattern or ResourcePatternType.LITERAL,
        principal,
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def create_acls(settings: dict[str, Any], bindings: list[Any]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(settings)
    for future in admin.create_acls(bindings, request_timeout=15).values():
        future.result()


def produce(settings: dict[str, Any], topic: str, n: int = 5) -> list[Any]:
    from confluent_kafka import Producer

    producer = Producer({**settings, "message.timeout.ms": 10000})
    errors: list[Any] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, _m: errors.append(e))
    producer.flush(15)
    return errors


def consume(
    settings: dict[str, Any], topic: str, group: str, n: int = 5
) -> tuple[list[bytes], list[Any]]:
    from confluent_kafka import Consumer

    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[Any] = []
    deadline = time.monotonic() + 15
    try:
        while len(values) < n and not errors and time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
            else:
                values.append(message.value())
    finally:
        consumer.close()
    return values, errors


async def test_acls_decide_who_may_produce_and_consume() -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AclOperation, NewTopic, ResourcePatternType, ResourceType

    async with authorized_broker() as broker:
        admin = client(broker, "admin")

        def setup() -> None:
            from confluent_kafka.admin import AdminClient

            topics = AdminClient(admin)  # alive until the answer (or librdkafka drops it)
            created = topics.create_topics([NewTopic("orders", 1, 1)])
            for future in created.values():
                future.result(15)
            create_acls(
                admin,
                [
                    acl_binding(ResourceType.TOPIC, "orders", AclOperation.WRITE),
                    acl_binding(
                        ResourceType.TOPIC,
                        "ord",
                        AclOperation.READ,
                        pattern=ResourcePatternType.PREFIXED,
                    ),
                    acl_binding(
                        ResourceType.GROUP,
                        "alice-",
                        AclOperation.READ,
                        pattern=ResourcePatternType.PREFIXED,
                    ),
                ],
            )

        await asyncio.to_thread(setup)
        # Every broker's image holds them; described back, grouped by resource.
        assert len(broker.metadata.image.acls.acls) == 3

        alice = client(broker, "alice")
        assert await asyncio.to_thread(produce, alice, "orders") == [None] * 5
        values, errors = await asyncio.to_thread(consume, alice, "orders", "alice-group")
        assert (values, errors) == ([f"v{i}".encode() for i in range(5)], [])

        bob = client(broker, "bob")
        errors = await asyncio.to_thread(produce, bob, "orders", 1)
        assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        _, errors = await asyncio.to_thread(consume, bob, "orders", "alice-bob")
        assert errors and errors[0].code() in (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.GROUP_AUTHORIZATION_FAILED,
        )
        # alice may read the topic but not as a group she has no ACL for.
        _, errors = await asyncio.to_thread(consume, alice, "orders", "other-group")
        assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


async def test_the_acl_apis_are_the_cluster_admins_and_disabled_without_an_authorizer() -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    async with authorized_broker() as broker:
        admin = client(broker, "admin")
        await asyncio.to_thread(
            create_acls, admin, [acl_binding(ResourceType.TOPIC, "t", AclOperation.READ)]
        )

        def describe(settings: dict[str, Any]) -> Any:
            admin = AdminClient(settings)  # alive until the answer (or librdkafka drops it)
            return admin.describe_acls(every, request_timeout=15).result()

        described = await asyncio.to_thread(describe, admin)
        assert [(b.name, b.principal, b.operation) for b in described] == [
            ("t", "User:alice", AclOperation.READ)
        ]
        # librdkafka drops DescribeAcls' error code (an empty list), so bob's refusal is
        # seen on CreateAcls, and DescribeAcls' on the wire.
        bob = client(broker, "bob")
        binding = acl_binding(ResourceType.TOPIC, "t", AclOperation.WRITE, "User:bob")
        with pytest.raises(KafkaException) as refused:
            await asyncio.to_thread(create_acls, bob, [binding])
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert await asyncio.to_thread(describe, bob) == []
        assert await describe_acls_error(broker.ports["PLAINTEXT"]) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )

        def delete(settings: dict[str, Any]) -> Any:
            admin = AdminClient(settings)
            futures = admin.delete_acls([every], request_timeout=15)
            return [f.result() for f in futures.values()]

        (deleted,) = await asyncio.to_thread(delete, admin)
        assert [b.name for b in deleted] == ["t"]
        assert not broker.metadata.image.acls.acls

    plain = await start_broker(broker_config())
    try:
        settings = {"bootstrap.servers": f"127.0.0.1:{plain.port}"}
        with pytest.raises(KafkaException) as disabled:
            binding = acl_binding(ResourceType.TOPIC, "t", AclOperation.READ)
            await asyncio.to_thread(create_acls, settings, [binding])
        assert disabled.value.args[0].code() == KafkaError.SECURITY_DISABLED
        assert await describe_acls_error(plain.port) == ErrorCode.SECURITY_DISABLED
    finally:
        await plain.stop()


async def describe_acls_error(port: int) -> int:
    """The error code of a DescribeAcls of everything, sent as User:ANONYMOUS."""
    wire = await KafkaWire.open(port)
    try:
        answer = await wire.call(
            ApiKey.DESCRIBE_ACLS,
            3,
            request(
                ApiKey.DESCRIBE_ACLS,
                3,
                resource_type_filter=1,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
        )
    finally:
        await wire.close()
    return int(answer.error_code)


async def test_kafka_python_producer_and_consumer_are_denied_a_topic() -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    async with authorized_broker(**{"allow.everyone.if.no.acl.found": "false"}) as broker:
        settings = {
            "bootstrap_servers": f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret",
        }
        topic = f"denied-{uuid.uuid4().hex[:6]}"
        admin = client(broker, "admin")

        def setup() -> None:
            from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

            created = AdminClient(admin)
            for future in created.create_topics([NewTopic(topic, 1, 1)]).values():
                future.result(15)
            # bob may see the topic (Metadata), not write or read it.
            binding = acl_binding(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, "User:bob")
            create_acls(admin, [binding])

        await asyncio.to_thread(setup)

        def write(idempotent: bool) -> Exception | None:
            producer = KafkaProducer(**settings, max_block_ms=5000, enable_idempotence=idempotent)
            try:
                producer.send(topic, b"v").get(timeout=10)
            except Exception as exc:  # the error kafka-python raises is the point
                return exc
            finally:
                producer.close()
            return None

        def read() -> Exception | None:
            consumer = KafkaConsumer(**settings)
            try:
                consumer.assign([TopicPartition(topic, 0)])
                consumer.poll(timeout_ms=3000)
            except Exception as exc:
                return exc
            finally:
                consumer.close()
            return None

        assert isinstance(await asyncio.to_thread(write, False), TopicAuthorizationFailedError)
        # Idempotent (kafka-python's default), it needs IDEMPOTENT_WRITE or WRITE on some
        # topic first (KIP-679): InitProducerId is refused, as Kafka refuses it.
        assert "ClusterAuthorizationFailed" in str(await asyncio.to_thread(write, True))
        assert isinstance(await asyncio.to_thread(read), TopicAuthorizationFailedError)


async def test_purgatory_acls_adds_lists_and_removes_as_kafka_acls_does(tmp_path: Any) -> None:
    async with authorized_broker() as broker:
        properties = tmp_path / "admin.properties"
        properties.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.username=admin\nsasl.password=admin-secret\n"
        )
        common = (
            "--bootstrap-server",
            f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
            "--command-config",
            str(properties),
        )
        code, out = await purgatory_cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "Describe", "--topic", "orders", *common,
        )  # fmt: skip
        assert code == 0, out
        assert (
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
            "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
            "permissionType=ALLOW) \n"
        ) in out
        code, out = await purgatory_cli(
            "acls", "--add", "--consumer", "--allow-principal", "User:bob", "--topic", "t",
            "--group", "g", "--resource-pattern-type", "prefixed", *common,
        )  # fmt: skip
        assert code == 0, out
        code, out = await purgatory_cli("acls", "--list", *common)
        assert code == 0, out
        assert out.count("Current ACLs for resource") == 3  # orders, t* and g*
        assert (
            "name=g, patternType=PREFIXED)`: \n \t(principal=User:bob, host=*, operation=READ"
            in out
        )
        code, out = await purgatory_cli("acls", "--list", "--principal", "User:bob", *common)
        assert "User:alice" not in out and "User:bob" in out
        code, out = await purgatory_cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite",
            "--topic", "orders", *common,
        )  # fmt: skip
        assert code == 1 and "only supports operations" in out, out
        code, out = await purgatory_cli(
            "acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read",
            "--topic", "orders", *common,
        )  # fmt: skip
        assert code == 1 and "--force" in out  # no terminal to ask
        code, out = await purgatory_cli(
            "acls", "--remove", "--force", "--allow-principal", "User:alice", "--operation",
            "Read", "--topic", "orders", *common,
        )  # fmt: skip
        assert code == 0, out
        remaining = {
            (a.resource_name, a.operation) for a in broker.metadata.image.acls.acls.values()
        }
        assert ("orders", 3) not in remaining and ("orders", 8) in remaining
        # Without the admin's credentials: the broker's refusal, one line.
        code, out = await purgatory_cli(
            "acls", "--list", "--bootstrap-server", f"127.0.0.1:{broker.ports['PLAINTEXT']}"
        )
        assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out and "Traceback" not in out
