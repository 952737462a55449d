"""SSL and SASL listeners with real Kafka clients (issue 47): confluent-kafka, kafka-python
and aiokafka produce and consume over SASL_SSL with PLAIN and SCRAM-SHA-512 and over SSL
with mutual TLS; a wrong password fails at once with the authentication error; a listener
whose protocol cannot be served refuses to start; SASL sessions expire and re-authenticate
(KIP-368)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.security.kafka_principal import user
from purgatory.broker.server import Broker, start_broker
from purgatory.experiments.processes import free_ports
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.testing.certs import CertFiles, write_certs
from tests.kafka_wire import KafkaWire, request
from tests.support import broker_config, running_cluster

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


@dataclass
class Secured:
    broker: Broker
    certs: CertFiles

    def port(self, listener: str) -> int:
        return self.broker.ports[listener]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.port(listener)}"


def security_settings(certs: CertFiles, **extra: Any) -> dict[str, Any]:
    listeners = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        **extra,
    }


@contextlib.asynccontextmanager
async def secured_broker(tmp_path: Path, **extra: Any) -> AsyncIterator[Secured]:
    certs = write_certs(tmp_path / "certs", clients=["alice", "mallory"])
    broker = await start_broker(broker_config(**security_settings(certs, **extra)))
    try:
        await add_scram_user(broker.ports["PLAINTEXT"], "alice", "alice-secret")
        yield Secured(broker, certs)
    finally:
        await broker.stop()


async def add_scram_user(port: int, name: str, password: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    def alter() -> None:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        # One request per mechanism: Kafka refuses a user altered twice in one request.
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upsert = UserScramCredentialUpsertion(
                name, ScramCredentialInfo(mechanism, 8192), password.encode()
            )
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=15)

    await asyncio.to_thread(alter)


def confluent_settings(secured: Secured, listener: str, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": secured.bootstrap(listener),
        "security.protocol": listener,
    }
    if listener in ("SSL", "SASL_SSL"):
        settings["ssl.ca.location"] = str(secured.certs.ca)
    return {**settings, **extra}


def confluent_round_trip(
    settings: dict[str, Any],
    topic: str,
    n: int = 20,
    while_connected: Callable[[], None] = lambda: None,
) -> list[bytes]:
    """Produce ``n`` records and consume them back with one client config; call
    ``while_connected`` before the consumer closes."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({**settings, "message.timeout.ms": 20000})
    errors: list[Any] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None] * n
    consumer = Consumer(
        {**settings, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < n and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        while_connected()
    finally:
        consumer.close()
    return values


def expected(n: int = 20) -> list[bytes]:
    return [f"v{i}".encode() for i in range(n)]


@pytest.mark.parametrize(
    ("listener", "mechanism", "username", "password"),
    [
        ("SASL_SSL", "PLAIN", "bob", "bob-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret"),
    ],
)
async def test_confluent_kafka_produces_and_consumes_over_sasl(
    tmp_path: Path, listener: str, mechanism: str, username: str, password: str
) -> None:
    async with secured_broker(tmp_path) as secured:
        settings = confluent_settings(
            secured,
            listener,
            **{"sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password},
        )
        seen = Principals(secured.broker, listener)
        values = await asyncio.to_thread(confluent_round_trip, settings, "sasl-topic", 20, seen)
        assert values == expected()
        assert user(username) in seen.principals


async def test_confluent_kafka_over_mutual_tls_acts_as_its_certificate(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        alice = str(secured.certs.clients["alice"])
        settings = confluent_settings(
            secured, "SSL", **{"ssl.certificate.location": alice, "ssl.key.location": alice}
        )
        seen = Principals(secured.broker, "SSL")
        values = await asyncio.to_thread(confluent_round_trip, settings, "tls-topic", 20, seen)
        assert values == expected()
        # ssl.principal.mapping.rules took the CN of CN=alice,OU=...,O=...
        assert seen.principals == {user("alice")}


async def test_a_client_without_a_certificate_cannot_connect_where_one_is_required(
    tmp_path: Path,
) -> None:
    async with secured_broker(tmp_path) as secured:
        from confluent_kafka.admin import AdminClient

        settings = confluent_settings(secured, "SSL")

        def metadata() -> None:
            admin = AdminClient(settings)
            with contextlib.suppress(Exception):
                admin.list_topics(timeout=3)

        await asyncio.to_thread(metadata)
        assert not _principals(secured.broker, "SSL")
        assert _authentications(secured.broker)[("SSL", "SSL", "failure", "false")] >= 1


async def test_a_wrong_password_fails_at_once_with_the_authentication_error(
    tmp_path: Path,
) -> None:
    from confluent_kafka import KafkaError, Producer

    async with secured_broker(tmp_path) as secured:
        for mechanism, name in (("PLAIN", "bob"), ("SCRAM-SHA-512", "alice")):
            errors: list[Any] = []
            settings = confluent_settings(
                secured,
                "SASL_SSL",
                **{
                    "sasl.mechanism": mechanism,
                    "sasl.username": name,
                    "sasl.password": "wrong",
                    "error_cb": errors.append,
                },
            )

            def produce(settings: dict[str, Any] = settings, errors: list[Any] = errors) -> float:
                producer = Producer({**settings, "message.timeout.ms": 60000})
                producer.produce("t", b"v")
                start = time.monotonic()
                while not errors and time.monotonic() - start < 10:
                    producer.poll(0.05)
                took = time.monotonic() - start
                producer.purge()
                producer.flush(1)
                return took

            took = await asyncio.to_thread(produce)
            assert errors, f"{mechanism}: no error within 10 s (message.timeout.ms is 60 s)"
            assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]
            assert "Invalid username or password" in errors[0].str() or (
                "invalid credentials" in errors[0].str()
            )
            # Answered after connection.failed.authentication.delay.ms (100 ms), not the
            # message timeout: how long it took is reported, not held to a wall clock.
            print(f"{mechanism}: authentication error after {took:.3f} s")
        failed = {
            key[1] for key, n in _authentications(secured.broker).items() if key[2] == "failure"
        }
        assert failed == {"PLAIN", "SCRAM-SHA-512"}


@pytest.mark.parametrize(
    ("listener", "mechanism", "username"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", "alice"),
        ("SASL_SSL", "PLAIN", "bob"),
        ("SSL", None, "alice"),
    ],
)
async def test_kafka_python_produces_and_consumes_over_sasl_and_mutual_tls(
    tmp_path: Path, listener: str, mechanism: str | None, username: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    async with secured_broker(tmp_path) as secured:
        alice = str(secured.certs.clients["alice"])
        settings: dict[str, Any] = {
            "bootstrap_servers": secured.bootstrap(listener),
            "security_protocol": listener,
            "ssl_cafile": str(secured.certs.ca),
        }
        if mechanism is not None:
            settings.update(
                sasl_mechanism=mechanism,
                sasl_plain_username=username,
                sasl_plain_password=f"{username}-secret",
            )
        else:
            settings.update(ssl_certfile=alice, ssl_keyfile=alice)

        def round_trip() -> list[bytes]:
            producer = KafkaProducer(**settings)
            for i in range(20):
                producer.send("kp-topic", f"v{i}".encode())
            producer.flush(30)
            producer.close()
            consumer = KafkaConsumer(
                "kp-topic",
                auto_offset_reset="earliest",
                consumer_timeout_ms=10000,
                **settings,
            )
            try:
                values = [record.value for _, record in zip(range(20), consumer, strict=False)]
                seen()
                return values
            finally:
                consumer.close()

        seen = Principals(secured.broker, listener)
        assert await asyncio.to_thread(round_trip) == expected()
        assert user(username) in seen.principals


async def test_aiokafka_produces_and_consumes_over_sasl_plain_and_mutual_tls(
    tmp_path: Path,
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async with secured_broker(tmp_path) as secured:
        alice = str(secured.certs.clients["alice"])
        for listener, extra in (
            (
                "SASL_SSL",
                {
                    "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_plain_username": "alice",
                    "sasl_plain_password": "alice-secret",
                    "ssl_context": create_ssl_context(cafile=str(secured.certs.ca)),
                },
            ),
            (
                "SASL_SSL",
                {
                    "sasl_mechanism": "PLAIN",
                    "sasl_plain_username": "bob",
                    "sasl_plain_password": "bob-secret",
                    "ssl_context": create_ssl_context(cafile=str(secured.certs.ca)),
                },
            ),
            (
                "SSL",
                {
                    "ssl_context": create_ssl_context(
                        cafile=str(secured.certs.ca), certfile=alice, keyfile=alice
                    )
                },
            ),
        ):
            settings = {
                "bootstrap_servers": secured.bootstrap(listener),
                "security_protocol": listener,
                **extra,
            }
            topic = f"aio-{listener.lower()}-{extra.get('sasl_mechanism', 'tls').lower()}"
            producer = AIOKafkaProducer(**settings)
            await producer.start()
            try:
                for i in range(20):
                    await producer.send_and_wait(topic, f"v{i}".encode())
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
            await consumer.start()
            values: list[bytes] = []
            try:
                async with asyncio.timeout(20):
                    while len(values) < 20:
                        batch = await consumer.getmany(timeout_ms=500)
                        values += [r.value for records in batch.values() for r in records]
                principals = _principals(secured.broker, listener)
            finally:
                await consumer.stop()
            assert values == expected()
            assert principals == {user(extra.get("sasl_plain_username", "alice"))}


def unsecured_jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


async def sasl_exchange(
    port: int, mechanism: str, tokens: list[bytes], version: int = 2
) -> tuple[KafkaWire, list[Any]]:
    wire = await KafkaWire.open(port)
    answer = await wire.call(
        ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
    )
    assert answer.error_code == ErrorCode.NONE, answer
    answers = []
    for token in tokens:
        answers.append(
            await wire.call(
                ApiKey.SASL_AUTHENTICATE,
                version,
                request(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token),
            )
        )
    return wire, answers


def metadata_request() -> Any:
    return request(
        ApiKey.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def test_oauthbearer_takes_an_unsecured_jwt_and_refuses_an_expired_one(
    tmp_path: Path,
) -> None:
    async with secured_broker(tmp_path) as secured:
        port = secured.port("SASL_PLAINTEXT")
        fresh = unsecured_jwt({"sub": "carol", "exp": time.time() + 3600})
        token = f"n,,\x01auth=Bearer {fresh}\x01\x01".encode()
        wire, (answer,) = await sasl_exchange(port, "OAUTHBEARER", [token])
        assert answer.error_code == ErrorCode.NONE
        # The session lasts no longer than the token (KIP-368).
        assert 0 < answer.session_lifetime.total_seconds() <= 3600
        assert (await wire.call(ApiKey.METADATA, 12, metadata_request())).brokers
        assert user("carol") in _principals(secured.broker, "SASL_PLAINTEXT")
        await wire.close()

        stale = unsecured_jwt({"sub": "carol", "exp": time.time() - 60})
        token = f"n,,\x01auth=Bearer {stale}\x01\x01".encode()
        wire, (challenge, failure) = await sasl_exchange(port, "OAUTHBEARER", [token, b"\x01"])
        assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
        assert failure.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert await wire.closed()


async def test_requests_before_authentication_close_the_connection(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        wire = await KafkaWire.open(secured.port("SASL_PLAINTEXT"))
        await wire.send_raw(_frame(metadata_request()))
        assert await wire.closed()
        # An unknown mechanism is answered with the enabled ones, then the connection closes.
        wire = await KafkaWire.open(secured.port("SASL_PLAINTEXT"))
        answer = await wire.call(
            ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        )
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == MECHANISMS.split(",")
        assert await wire.closed()
        # On a PLAINTEXT listener SaslHandshake is ILLEGAL_SASL_STATE, as Kafka answers it.
        wire = await KafkaWire.open(secured.port("PLAINTEXT"))
        answer = await wire.call(
            ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        )
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        await wire.close()


async def test_a_session_expires_unless_the_client_re_authenticates(tmp_path: Path) -> None:
    async with secured_broker(tmp_path, **{"connections.max.reauth.ms": 300}) as secured:
        port = secured.port("SASL_PLAINTEXT")
        plain = b"\x00bob\x00bob-secret"
        wire, (answer,) = await sasl_exchange(port, "PLAIN", [plain])
        assert answer.session_lifetime.total_seconds() == pytest.approx(0.3)
        # Re-authenticating (SaslHandshake again, same mechanism and principal) renews it.
        renewed = await wire.call(
            ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        )
        assert renewed.error_code == ErrorCode.NONE
        answer = await wire.call(
            ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=plain)
        )
        assert answer.error_code == ErrorCode.NONE
        # Without re-authenticating, the first request after the session ends closes it.
        async with asyncio.timeout(10):
            while True:
                try:
                    await wire.call(ApiKey.METADATA, 12, metadata_request())
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                await asyncio.sleep(0.05)
        counted = _authentications(secured.broker)
        assert counted[("SASL_PLAINTEXT", "PLAIN", "success", "true")] == 1


async def test_librdkafka_re_authenticates_before_its_session_ends(tmp_path: Path) -> None:
    async with secured_broker(tmp_path, **{"connections.max.reauth.ms": 1000}) as secured:
        from confluent_kafka import Producer

        settings = confluent_settings(
            secured,
            "SASL_PLAINTEXT",
            **{
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            },
        )

        def produce_for_a_while() -> list[Any]:
            producer = Producer(settings)
            errors: list[Any] = []
            deadline = time.monotonic() + 3.5  # past three session lifetimes
            while time.monotonic() < deadline:
                producer.produce("reauth", b"v", on_delivery=lambda e, _m: errors.append(e))
                producer.poll(0.05)
            producer.flush(20)
            return errors

        errors = await asyncio.to_thread(produce_for_a_while)
        assert errors and all(e is None for e in errors)
        counted = _authentications(secured.broker)
        assert counted[("SASL_PLAINTEXT", "SCRAM-SHA-512", "success", "true")] >= 2


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI, which is not served"),
        ({"listener.name.sasl_ssl.plain.sasl.jaas.config": None}, "enables PLAIN"),
        ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "ssl.keystore.location"),
        ({"listener.name.other.ssl.client.auth": "required"}, "listener OTHER"),
    ],
)
async def test_a_listener_that_cannot_be_served_refuses_to_start(
    tmp_path: Path, extra: dict[str, Any], complaint: str
) -> None:
    certs = write_certs(tmp_path / "certs")
    settings = {k: v for k, v in {**security_settings(certs), **extra}.items() if v is not None}
    with pytest.raises(ValueError, match=complaint):
        await start_broker(broker_config(**settings))


class Principals:
    """Called from a client's thread while it is connected: whom the broker's connections
    on ``listener`` act as then (read on the broker's loop)."""

    def __init__(self, broker: Broker, listener: str) -> None:
        self.broker, self.listener = broker, listener
        self.loop = asyncio.get_running_loop()
        self.principals: set[Any] = set()

    def __call__(self) -> None:
        async def read() -> set[Any]:
            return _principals(self.broker, self.listener)

        self.principals = asyncio.run_coroutine_threadsafe(read(), self.loop).result(10)


def _principals(broker: Broker, listener: str) -> set[Any]:
    """Whom the broker's open connections on ``listener`` act as (but User:ANONYMOUS)."""
    return {
        conn.principal
        for conn in broker.socket_server.connections
        if conn.listener.name == listener and conn.principal.name != "ANONYMOUS"
    }


def _authentications(broker: Broker) -> dict[tuple[str, ...], float]:
    """purgatory_authentications_total by its labels."""
    families = {m.name: m for m in broker.metrics.registry.collect()}
    family = families.get("purgatory_authentications")  # none before the first one
    samples = family.samples if family is not None else []
    labels = ("listener", "mechanism", "result", "reauthentication")
    return {tuple(s.labels[k] for k in labels): s.value for s in samples}


def _frame(body: Any) -> bytes:
    from tests.kafka_wire import request_frame

    return request_frame(ApiKey.METADATA, 12, 1, body)


async def test_brokers_replicate_and_form_the_quorum_over_tls_listeners(tmp_path: Path) -> None:
    """Three brokers whose inter-broker listener is SSL with client certificates required
    and whose controller listener is SASL_SSL: brokers connect to each other over TLS
    (their truststore checks the others' certificates, their keystore answers
    ssl.client.auth) and prove cluster.secret; an acks=all client on SASL_SSL reads back
    what it wrote."""
    certs = write_certs(tmp_path / "certs")
    names = ("CLIENT", "BROKER", "CONTROLLER")
    flat = free_ports(9)
    ports = [dict(zip(names, flat[3 * i : 3 * i + 3], strict=True)) for i in range(3)]

    def listeners(i: int) -> tuple[int, dict[str, Any]]:
        return ports[i]["CONTROLLER"], {
            "listeners": ",".join(f"{n}://127.0.0.1:{ports[i][n]}" for n in names),
            "listener.security.protocol.map": "CLIENT:SASL_SSL,BROKER:SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "BROKER",
            "controller.listener.names": "CONTROLLER",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.location": str(certs.broker),
            "ssl.truststore.location": str(certs.ca),
            "listener.name.broker.ssl.client.auth": "required",
        }

    async with running_cluster(3, listeners, **{"default.replication.factor": 3}) as brokers:
        settings = {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p['CLIENT']}" for p in ports),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-secret",
            "acks": "all",
        }
        values = await asyncio.to_thread(confluent_round_trip, settings, "replicated")
        assert values == expected()
        leader = brokers[brokers[0].metadata.partition("replicated", 0).leader_id]
        followers = {
            c.authenticated_broker
            for c in leader.socket_server.connections
            if c.listener.name == "BROKER"
        }
        assert followers >= {b.broker_id for b in brokers if b is not leader}
        handshakes = _authentications(leader)
        assert handshakes[("BROKER", "SSL", "success", "false")] >= 2


async def test_hostile_frames_on_a_sasl_listener_close_connections_not_the_broker(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Mutated SaslHandshake and SaslAuthenticate frames (and what follows them), before
    and during an exchange, on both protocols: the broker closes or answers, logs no
    traceback, and still authenticates a good client afterwards."""
    import random

    from tests.kafka_wire import request_frame

    async with secured_broker(tmp_path) as secured:
        port = secured.port("SASL_PLAINTEXT")
        rng = random.Random(47)
        handshake = request_frame(
            ApiKey.SASL_HANDSHAKE,
            1,
            1,
            request(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512"),
        )
        tokens = [
            b"n,,n=alice,r=" + bytes(rng.randrange(256) for _ in range(24)),
            b"\x00alice\x00alice-secret",
            b"n,,\x01auth=Bearer x.y.\x01\x01",
        ]
        for i in range(150):
            token = rng.choice(tokens)
            frames = [
                handshake,
                request_frame(
                    ApiKey.SASL_AUTHENTICATE,
                    rng.choice([0, 1, 2]),
                    2,
                    request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token),
                ),
            ]
            data = bytearray(b"".join(frames))
            for _ in range(rng.randrange(1, 6)):  # flip, cut or grow
                at = rng.randrange(len(data))
                data[at] = rng.randrange(256)
            if i % 3 == 0:
                data += bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
            wire = await KafkaWire.open(port)
            with contextlib.suppress(ConnectionError):
                await wire.send_raw(bytes(data))
            with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
                await wire.closed(timeout_s=0.2)
            await wire.close()
        # Still serving: a good client authenticates and produces.
        settings = confluent_settings(
            secured,
            "SASL_PLAINTEXT",
            **{"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"},
        )
        assert await asyncio.to_thread(confluent_round_trip, settings, "after", 3) == expected(3)
    logged = capfd.readouterr()
    assert "Traceback" not in logged.out + logged.err


async def test_brokers_log_in_with_sasl_instead_of_proving_a_cluster_secret(
    tmp_path: Path,
) -> None:
    """No cluster.secret: the brokers log in to each other's controller listener with
    PLAIN and to their inter-broker listener with SCRAM-SHA-512 (users seeded in the new
    metadata log), as Kafka's sasl.mechanism.controller.protocol and
    sasl.mechanism.inter.broker.protocol say; a client that logs in as another user, even
    under a broker's client id, is served no inter-broker API."""
    from purgatory.clients.security import ClientSecurity
    from purgatory.protocol import inter_broker_messages as ib

    certs = write_certs(tmp_path / "certs")
    names = ("CLIENT", "BROKER", "CONTROLLER")
    flat = free_ports(9)
    ports = [dict(zip(names, flat[3 * i : 3 * i + 3], strict=True)) for i in range(3)]
    broker_jaas = {
        "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-secret" user_broker="broker-secret" '
        'user_bob="bob-secret";',
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";',
    }

    def listeners(i: int) -> tuple[int, dict[str, Any]]:
        return ports[i]["CONTROLLER"], {
            "listeners": ",".join(f"{n}://127.0.0.1:{ports[i][n]}" for n in names),
            "listener.security.protocol.map": (
                "CLIENT:SASL_PLAINTEXT,BROKER:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"
            ),
            "inter.broker.listener.name": "BROKER",
            "controller.listener.names": "CONTROLLER",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.controller.plain.sasl.jaas.config": broker_jaas["PLAIN"],
            "listener.name.broker.plain.sasl.jaas.config": broker_jaas["PLAIN"],
            "listener.name.broker.scram-sha-512.sasl.jaas.config": broker_jaas["SCRAM-SHA-512"],
            "bootstrap.scram.credentials": "SCRAM-SHA-512=[name=broker,password=broker-secret]",
            "ssl.keystore.location": str(certs.broker),
            "ssl.truststore.location": str(certs.ca),
            "cluster.secret": "",
        }

    async with running_cluster(3, listeners, **{"default.replication.factor": 3}) as brokers:
        settings = {
            "bootstrap.servers": ",".join(f"127.0.0.1:{p['CLIENT']}" for p in ports),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-secret",
            "acks": "all",
        }
        assert await asyncio.to_thread(confluent_round_trip, settings, "sasl-brokers") == expected()
        leader = brokers[brokers[0].metadata.partition("sasl-brokers", 0).leader_id]
        followers = {
            c.authenticated_broker
            for c in leader.socket_server.connections
            if c.listener.name == "BROKER"
        }
        assert followers >= {b.broker_id for b in brokers if b is not leader}
        counted = _authentications(leader)
        assert counted[("BROKER", "SCRAM-SHA-512", "success", "false")] >= 2
        # bob logs in on the controller listener under a broker's client id: no broker.
        bob = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "bob", "bob-secret")
        conn = await bob.connect("127.0.0.1", ports[0]["CONTROLLER"], client_id="broker-1")
        try:
            with pytest.raises(KafkaError) as refused:
                await conn.send(ApiKey.BROKER_HEARTBEAT, ib.BrokerHeartbeatRequest(1, 1, 0))
        finally:
            await conn.close()
        assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "log in as User:broker" in str(refused.value)


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "does not enable"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "set username and password"),
        ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "brokers log in with PLAIN"),
        (
            {
                "controller.listener.names": "SASL_SSL",
                "process.roles": "broker,controller",
                "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
            },
            "brokers log in with PLAIN here",
        ),
    ],
)
async def test_a_broker_login_that_cannot_work_refuses_to_start(
    tmp_path: Path, extra: dict[str, Any], complaint: str
) -> None:
    certs = write_certs(tmp_path / "certs")
    settings = {
        **security_settings(certs),
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        **extra,
    }
    with pytest.raises(ValueError, match=complaint):
        await start_broker(broker_config(**settings))
