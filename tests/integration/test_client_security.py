"""Our own clients on SSL and SASL listeners (issue 47): Producer, Consumer and AdminClient
with Kafka's client security configs over SASL_SSL (SCRAM-SHA-512, PLAIN, a JAAS config),
SASL_PLAINTEXT (SCRAM-SHA-256, OAUTHBEARER) and SSL with mutual TLS, each acting as its
principal on the broker; a wrong password is one authentication error, not retried; the
`purgatory` tools take the same configs from ``--command-config`` (``--producer.config``,
``--consumer.config``)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.security.kafka_principal import user
from purgatory.broker.server import start_broker
from purgatory.clients.admin import AdminClient
from purgatory.clients.consumer import Consumer
from purgatory.clients.producer import Producer
from purgatory.clients.security import AuthenticationError, SecurityConfigError, SecurityKeywords
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.testing.certs import write_certs
from tests.integration.test_admin_http import purgatory_cli
from tests.integration.test_security import (
    Secured,
    _authentications,
    _principals,
    secured_broker,
    security_settings,
)
from tests.support import broker_config

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="alice-secret";'
)


def settings(secured: Secured, listener: str, **extra: Any) -> dict[str, Any]:
    """Keyword arguments of our clients for ``listener`` (the test CA trusted on TLS)."""
    out: dict[str, Any] = {"security_protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        out["ssl_ca_location"] = str(secured.certs.ca)
    return {**out, **extra}


async def round_trip(secured: Secured, listener: str, security: dict[str, Any]) -> set[Any]:
    """Create a topic, produce 10 records and consume them in a group, all over
    ``listener``; the principals the broker's connections on it act as meanwhile."""
    bootstrap = secured.bootstrap(listener)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    async with AdminClient(bootstrap, **security) as admin:
        await admin.create_topic(topic, partitions=2)
    async with Producer(bootstrap, acks="all", **security) as producer:
        for i in range(10):
            await producer.send_and_wait(topic, f"v{i}".encode())
    values: list[bytes] = []
    async with Consumer(
        bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest", **security
    ) as consumer:
        consumer.subscribe([topic])
        async with asyncio.timeout(30):
            while len(values) < 10:
                values += [r.value for r in await consumer.poll(timeout_ms=500) if r.value]
        principals = _principals(secured.broker, listener)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(10))
    return principals


@pytest.mark.parametrize(
    ("listener", "sasl", "principal"),
    [
        (
            "SASL_SSL",
            {"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "alice"},
            "alice",
        ),
        ("SASL_SSL", {"sasl_mechanism": "PLAIN", "sasl_username": "bob"}, "bob"),
        ("SASL_SSL", {"sasl_mechanism": "SCRAM-SHA-256", "sasl_jaas_config": SCRAM_JAAS}, "alice"),
        (
            "SASL_PLAINTEXT",
            {"sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "alice"},
            "alice",
        ),
        (
            "SASL_PLAINTEXT",
            {"sasl_mechanism": "OAUTHBEARER", "sasl_oauthbearer_config": "principal=carol"},
            "carol",
        ),
    ],
    ids=["sasl_ssl-scram-512", "sasl_ssl-plain", "sasl_ssl-jaas", "sasl_plaintext", "oauthbearer"],
)
async def test_our_clients_produce_consume_and_administer_over_sasl(
    tmp_path: Path, listener: str, sasl: dict[str, str], principal: str
) -> None:
    async with secured_broker(tmp_path) as secured:
        passwords = {"alice": "alice-secret", "bob": "bob-secret"}
        if "sasl_username" in sasl:
            sasl = {**sasl, "sasl_password": passwords[sasl["sasl_username"]]}
        principals = await round_trip(secured, listener, settings(secured, listener, **sasl))
        assert principals == {user(principal)}


async def test_our_clients_over_mutual_tls_act_as_their_certificate(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        alice = str(secured.certs.clients["alice"])
        principals = await round_trip(
            secured, "SSL", settings(secured, "SSL", ssl_keystore_location=alice)
        )
        # ssl.principal.mapping.rules took the CN of CN=alice,OU=...,O=...
        assert principals == {user("alice")}


async def test_a_certificate_for_another_host_is_refused_unless_host_names_go_unchecked(
    tmp_path: Path,
) -> None:
    """The broker's certificate names broker.invalid only: reached as 127.0.0.1 it does
    not match (one error, at once), until ssl.endpoint.identification.algorithm is empty."""
    certs = write_certs(tmp_path / "certs", broker_hosts=["broker.invalid"])
    broker = await start_broker(broker_config(**security_settings(certs)))
    try:
        bootstrap = f"127.0.0.1:{broker.ports['SASL_SSL']}"
        sasl: SecurityKeywords = {
            "security_protocol": "SASL_SSL",
            "ssl_ca_location": str(certs.ca),
            "sasl_mechanism": "PLAIN",
            "sasl_username": "bob",
            "sasl_password": "bob-secret",
        }
        async with AdminClient(bootstrap, **sasl) as admin:
            with pytest.raises(ConnectionError, match="IP address mismatch"):
                await admin.list_topics()
        unchecked: SecurityKeywords = {**sasl, "ssl_endpoint_identification_algorithm": ""}
        async with AdminClient(bootstrap, **unchecked) as admin:
            assert await admin.list_topics() == []
    finally:
        await broker.stop()


@pytest.mark.parametrize(
    ("mechanism", "name", "message"),
    [
        ("PLAIN", "bob", "Invalid username or password"),
        ("SCRAM-SHA-512", "alice", "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ],
)
async def test_a_wrong_password_is_one_authentication_error_never_retried(
    tmp_path: Path, mechanism: str, name: str, message: str
) -> None:
    async with secured_broker(tmp_path) as secured:
        wrong = settings(
            secured,
            "SASL_SSL",
            sasl_mechanism=mechanism,
            sasl_username=name,
            sasl_password="wrong",
        )
        bootstrap = secured.bootstrap("SASL_SSL")
        async with AdminClient(bootstrap, **wrong) as admin:
            with pytest.raises(AuthenticationError, match=message) as raised:
                await admin.list_topics()
        assert raised.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert not raised.value.retriable
        with pytest.raises(AuthenticationError, match=message):
            async with Producer(bootstrap, **wrong) as producer:
                await producer.send_and_wait("t", b"v")
        # Two clients, one attempt each: nothing retried the refused credentials.
        failures = _authentications(secured.broker)[("SASL_SSL", mechanism, "failure", "false")]
        assert failures == 2


async def test_a_client_without_credentials_is_told_to_authenticate(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        async with AdminClient(secured.bootstrap("SASL_PLAINTEXT")) as admin:
            with pytest.raises(KafkaError, match="authenticate first") as raised:
                await admin.list_topics()
        assert raised.value.code == ErrorCode.ILLEGAL_SASL_STATE
        with pytest.raises(SecurityConfigError, match=r"sasl\.mechanism 'GSSAPI'"):
            AdminClient(secured.bootstrap("SASL_SSL"), security_protocol="SASL_SSL")


# -- the `purgatory` tools: --command-config, --producer.config, --consumer.config ----------


def client_properties(secured: Secured, path: Path, password: str = "alice-secret") -> Path:
    """A client.properties for SASL_SSL with SCRAM-SHA-512, as Kafka's docs write one (the
    JAAS config continued over lines)."""
    path.write_text(
        "# alice on the SASL_SSL listener\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="alice" \\\n    password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.certs.ca}\n"
    )
    return path


async def purgatory_with_input(*args: str, stdin: bytes) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "purgatory", *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_tools_take_a_sasl_ssl_listeners_configs_from_command_config(
    tmp_path: Path,
) -> None:
    async with secured_broker(tmp_path) as secured:
        config = str(client_properties(secured, tmp_path / "client.properties"))
        server = ("--bootstrap-server", secured.bootstrap("SASL_SSL"))
        secure = (*server, "--command-config", config)
        code, out = await purgatory_cli("topics", "create", "cli-t", "--partitions", "1", *secure)
        assert code == 0, out
        code, out = await purgatory_cli("topics", "list", *secure)
        assert (code, out.split()) == (0, ["cli-t"]), out
        code, out = await purgatory_with_input(
            "produce", "cli-t", *server, "--producer.config", config, stdin=b"a\nb\nc\n"
        )
        assert code == 0, out
        code, out = await purgatory_cli(
            "consume", "cli-t", *server, "--consumer.config", config,
            "--from-beginning", "--max-messages", "3", "--group", "cli-g",
        )  # fmt: skip
        assert code == 0 and out.splitlines()[:3] == ["a", "b", "c"], out
        code, out = await purgatory_cli("consumer-groups", "--list", *secure)
        assert code == 0 and "cli-g" in out, out
        code, out = await purgatory_cli(
            "configs", "--describe", "--entity-type", "topics", "--entity-name", "cli-t", *secure
        )
        assert code == 0 and "Dynamic configs for topic cli-t" in out, out
        # The same names one by one, with --producer-property.
        properties = [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=PLAIN",
            "sasl.username=bob",
            "sasl.password=bob-secret",
            f"ssl.ca.location={secured.certs.ca}",
        ]
        code, out = await purgatory_with_input(
            "produce", "cli-t", *server,
            *(arg for p in properties for arg in ("--producer-property", p)),
            stdin=b"d\n",
        )  # fmt: skip
        assert code == 0, out
        assert user("bob") not in _principals(secured.broker, "SASL_SSL")  # it has gone


async def test_a_wrong_password_in_command_config_is_one_line_and_exit_1(tmp_path: Path) -> None:
    async with secured_broker(tmp_path) as secured:
        config = client_properties(secured, tmp_path / "wrong.properties", password="nope")
        server = ("--bootstrap-server", secured.bootstrap("SASL_SSL"))
        for args in (
            ("topics", "list", "--command-config", str(config)),
            ("consumer-groups", "--list", "--command-config", str(config)),
        ):
            code, out = await purgatory_cli(*args, *server)
            assert code == 1, out
            assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
            assert "SASL_AUTHENTICATION_FAILED" in out and "invalid credentials" in out, out
        code, out = await purgatory_with_input(
            "produce", "t", *server, "--producer.config", str(config), stdin=b"x\n"
        )
        assert code == 1 and "Traceback" not in out, out
        assert "SASL_AUTHENTICATION_FAILED" in out, out
        code, out = await purgatory_cli(
            "topics", "list", *server, "--command-config", str(tmp_path / "missing.properties")
        )
        assert code == 1 and "missing.properties" in out and "Traceback" not in out, out
