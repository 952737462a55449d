"""Kafka's client security configs as our clients read them (clients/security.py) and the
properties files of ``--command-config`` (clients/cli/client_config.py): no sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from purgatory.broker.security.sasl.oauthbearer import OAuthBearerSaslServer
from purgatory.clients.cli.client_config import file_properties, read_properties
from purgatory.clients.cli.properties import ADMIN_PROPERTIES
from purgatory.clients.security import ClientSecurity, SecurityConfigError, unsecured_jwt


def test_a_properties_file_is_read_as_java_reads_it() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\n"
        "client.id purgatory-cli\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="a\\\\b";\n'
        "ssl.ca.location=C\\:\\\\certs\\\\ca.pem\n"
    )
    assert read_properties(text) == [
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        "client.id=purgatory-cli",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="a\\b";',
        "ssl.ca.location=C:\\certs\\ca.pem",
    ]


def test_a_command_config_file_becomes_admin_keywords_and_names_an_unknown_config(
    tmp_path: Path,
) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nssl.truststore.location=/ca.pem\n")
    assert file_properties("--command-config", str(path), ADMIN_PROPERTIES, "client") == {
        "security_protocol": "SASL_SSL",
        "ssl_ca_location": "/ca.pem",
    }
    path.write_text("sasl.mechanisms=PLAIN\n")
    with pytest.raises(ValueError, match=r"'sasl\.mechanisms' is not a client config"):
        file_properties("--command-config", str(path), ADMIN_PROPERTIES, "client")


def test_a_jaas_config_gives_the_username_and_password() -> None:
    security = ClientSecurity.from_keywords(
        {
            "security_protocol": "sasl_plaintext",
            "sasl_mechanism": "PLAIN",
            "sasl_jaas_config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="bob" password="bob-secret";',
        }
    )
    assert (security.protocol, security.username, security.password) == (
        "SASL_PLAINTEXT",
        "bob",
        "bob-secret",
    )
    assert security.ssl_context is None
    assert "bob-secret" not in repr(security)


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"security_protocol": "TLS"}, "security.protocol 'TLS' is not one of"),
        ({"security_protocol": "SASL_PLAINTEXT"}, "sasl.mechanism 'GSSAPI'"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
            "needs sasl.username and sasl.password",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"},
            "needs sasl.oauthbearer.config with principal=NAME",
        ),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_jaas_config": "PlainLoginModule required username=",
            },
            "sasl.jaas.config: JAAS",
        ),
        ({"security_protocol": "SSL", "ssl_ca_location": "/nonexistent.pem"}, "ssl.ca.location"),
        ({"security_protocol": "SSL", "ssl_keystore_type": "JKS"}, "only PEM stores"),
        (
            {"security_protocol": "SSL", "ssl_endpoint_identification_algorithm": "x"},
            "is not https or empty",
        ),
    ],
)
def test_a_config_that_cannot_be_used_is_named(keywords: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        ClientSecurity.from_keywords(keywords)  # type: ignore[arg-type]


def test_an_empty_endpoint_identification_algorithm_stops_checking_host_names() -> None:
    checked = ClientSecurity.from_keywords({"security_protocol": "SSL"})
    unchecked = ClientSecurity.from_keywords(
        {"security_protocol": "SSL", "ssl_endpoint_identification_algorithm": ""}
    )
    assert checked.ssl_context is not None and checked.ssl_context.check_hostname
    assert unchecked.ssl_context is not None and not unchecked.ssl_context.check_hostname


def test_the_unsecured_token_is_one_the_brokers_validator_accepts() -> None:
    security = ClientSecurity.from_keywords(
        {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauthbearer_config": "principal=carol scope=read,write lifeSeconds=60",
        }
    )
    token = unsecured_jwt(security.oauthbearer, now=1_000)
    server = OAuthBearerSaslServer(
        {"unsecuredValidatorRequiredScope": "write"}, now_ms=lambda: 1_030_000
    )
    assert server.evaluate_response(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b""
    assert (server.authorization_id, server.expires_at_ms) == ("carol", 1_060_000)
