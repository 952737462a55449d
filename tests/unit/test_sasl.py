"""The SASL mechanisms served (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), the per-connection
exchange (SaslServerAuthenticator) on a manual clock, JAAS configs and listener-scoped
configs. Hostile tokens never raise anything but SaslAuthenticationError."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import scramp
from hypothesis import given
from hypothesis import strategies as st

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.security.kafka_principal import user
from purgatory.broker.security.sasl import SaslAuthenticationError
from purgatory.broker.security.sasl.oauthbearer import OAuthBearerSaslServer
from purgatory.broker.security.sasl.plain import PlainSaslServer, plain_users
from purgatory.broker.security.sasl.scram import ScramSaslServer
from purgatory.broker.security.sasl_server_authenticator import (
    SaslListener,
    SaslServerAuthenticator,
    SaslState,
    SaslStateError,
)
from purgatory.broker.security.scram_credential import ScramCredential
from purgatory.common.jaas import parse_jaas_config
from purgatory.protocol.errors import ErrorCode

NOW_MS = 1_800_000_000_000


def credentials(mechanism: str, password: str = "alice-secret") -> Any:
    salt, stored, server, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=4096
    )
    known = {("alice", mechanism): ScramCredential(salt, stored, server, iterations)}
    return lambda mech, name: known.get((name, mech))


def scram_exchange(mechanism: str, password: str) -> tuple[ScramSaslServer, bytes]:
    server = ScramSaslServer(mechanism, credentials(mechanism))
    client = scramp.ScramClient([mechanism], "alice", password)
    first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's proof
    return server, final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_a_user_who_knows_the_password(mechanism: str) -> None:
    server, _ = scram_exchange(mechanism, "alice-secret")
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_refuses_a_wrong_password_and_an_unknown_user_alike(mechanism: str) -> None:
    with pytest.raises(SaslAuthenticationError, match="invalid credentials") as wrong:
        scram_exchange(mechanism, "wrong")
    server = ScramSaslServer(mechanism, credentials(mechanism))
    client = scramp.ScramClient([mechanism], "mallory", "x")
    with pytest.raises(SaslAuthenticationError) as unknown:
        server.evaluate_response(client.get_client_first().encode())
    assert str(wrong.value) == str(unknown.value)  # nothing tells which it was


def test_scram_refuses_delegation_tokens_and_another_authorization_id() -> None:
    server = ScramSaslServer("SCRAM-SHA-256", credentials("SCRAM-SHA-256"))
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        server.evaluate_response(b"n,,n=alice,r=abcdef,tokenauth=true")
    server = ScramSaslServer("SCRAM-SHA-256", credentials("SCRAM-SHA-256"))
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        server.evaluate_response(b"n,a=bob,n=alice,r=abcdef")


def test_plain_checks_the_jaas_users() -> None:
    options = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_alice="alice-secret";'
    ).options
    users = plain_users(options)
    assert users == {"alice": "alice-secret"}
    server = PlainSaslServer(users)
    assert server.evaluate_response(b"\x00alice\x00alice-secret") == b""
    assert server.authorization_id == "alice"
    for token, complaint in (
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00admin\x00admin-secret", "Invalid username or password"),  # not a user_ option
        (b"bob\x00alice\x00alice-secret", "authorization id"),
        (b"\x00alice", "expected 3 tokens"),
        (b"\x00\x00x", "username not specified"),
    ):
        with pytest.raises(SaslAuthenticationError, match=complaint):
            PlainSaslServer(users).evaluate_response(token)


def jwt(header: dict[str, Any], claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part(header)}.{part(claims)}."


def bearer(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_validates_an_unsecured_jwt_as_kafka_does() -> None:
    options = {
        "unsecuredValidatorRequiredScope": "read",
        "unsecuredValidatorAllowableClockSkewMs": "1000",
    }
    valid = {"sub": "carol", "exp": NOW_MS / 1000 + 60, "scope": ["read", "write"]}
    server = OAuthBearerSaslServer(options, now_ms=lambda: NOW_MS)
    assert server.evaluate_response(bearer(jwt({"alg": "none"}, valid))) == b""
    assert server.authorization_id == "carol"
    assert server.expires_at_ms == NOW_MS + 60_000
    for header, claims, status in (
        ({"alg": "none"}, {**valid, "exp": NOW_MS / 1000 - 2}, "invalid_token"),  # past the skew
        ({"alg": "HS256"}, valid, "invalid_token"),
        ({"alg": "none"}, {"exp": NOW_MS / 1000 + 60}, "invalid_token"),  # no sub
        ({"alg": "none"}, {**valid, "scope": "write"}, "insufficient_scope"),
        ({"alg": "none"}, {**valid, "iat": NOW_MS / 1000 + 10}, "invalid_token"),
    ):
        server = OAuthBearerSaslServer(options, now_ms=lambda: NOW_MS)
        challenge = server.evaluate_response(bearer(jwt(header, claims)))
        assert json.loads(challenge)["status"] == status
        with pytest.raises(SaslAuthenticationError, match=status):
            server.evaluate_response(b"\x01")  # the client's reply to the error
    server = OAuthBearerSaslServer(options, now_ms=lambda: NOW_MS)
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server.evaluate_response(bearer(jwt({"alg": "none"}, valid), authzid="dave"))
    with pytest.raises(ValueError, match="ClockSkew"):
        OAuthBearerSaslServer({"unsecuredValidatorAllowableClockSkewMs": "soon"})


@given(st.binary(max_size=300))
def test_hostile_tokens_only_fail_authentication(token: bytes) -> None:
    servers = [
        PlainSaslServer({"alice": "alice-secret"}),
        ScramSaslServer("SCRAM-SHA-512", credentials("SCRAM-SHA-512")),
        OAuthBearerSaslServer({}, now_ms=lambda: NOW_MS),
    ]
    for server in servers:
        for _ in range(3):  # the same bytes at each step of the exchange
            try:
                server.evaluate_response(token)
            except SaslAuthenticationError:
                break


class Clock:
    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> float:
        return self.s


def authenticator(max_reauth_ms: int = 0, clock: Clock | None = None) -> SaslServerAuthenticator:
    listener = SaslListener(
        ["PLAIN", "OAUTHBEARER"],
        lambda mechanism: (
            PlainSaslServer({"alice": "a", "bob": "b"})
            if mechanism == "PLAIN"
            else OAuthBearerSaslServer({}, now_ms=lambda: NOW_MS)
        ),
        max_reauth_ms=max_reauth_ms,
    )
    return SaslServerAuthenticator(listener, clock or Clock(), lambda: NOW_MS)


def test_the_exchange_goes_handshake_then_authenticate() -> None:
    sasl = authenticator()
    assert sasl.handshake("SCRAM-SHA-512") == (
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ["PLAIN", "OAUTHBEARER"],
    )
    with pytest.raises(SaslStateError):
        sasl.authenticate(b"\x00alice\x00a")
    assert sasl.handshake("PLAIN") == (ErrorCode.NONE, ["PLAIN", "OAUTHBEARER"])
    # One handshake per exchange: Kafka answers another ILLEGAL_SASL_STATE (then closes).
    assert sasl.handshake("PLAIN") == (ErrorCode.ILLEGAL_SASL_STATE, [])
    outcome = sasl.authenticate(b"\x00alice\x00a")
    assert outcome.complete and outcome.session_lifetime_ms == 0
    assert sasl.principal == user("alice") and sasl.state is SaslState.COMPLETE
    assert not sasl.reauthenticates()  # no session lifetime: nothing to renew
    assert not sasl.expired(1e12)


def test_a_session_expires_and_re_authenticates_as_the_same_principal() -> None:
    clock = Clock()
    sasl = authenticator(max_reauth_ms=5000, clock=clock)
    sasl.handshake("PLAIN")
    assert sasl.authenticate(b"\x00alice\x00a").session_lifetime_ms == 5000
    clock.s += 4.9
    assert not sasl.expired(clock.s)
    clock.s += 0.1
    assert sasl.expired(clock.s)
    sasl.handshake("PLAIN")
    assert sasl.reauthenticating and sasl.state is SaslState.REAUTHENTICATE
    sasl.authenticate(b"\x00alice\x00a")
    assert not sasl.expired(clock.s) and sasl.expired(clock.s + 5)
    # Not again within a second of the last one's start (Kafka's KafkaChannel).
    assert not sasl.reauthenticates()
    clock.s += 1
    assert sasl.reauthenticates()
    sasl.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationError, match=r"from User\.alice: User\.bob"):
        sasl.authenticate(b"\x00bob\x00b")


def test_re_authentication_with_another_mechanism_is_answered_then_refused() -> None:
    sasl = authenticator(max_reauth_ms=5000)
    sasl.handshake("PLAIN")
    sasl.authenticate(b"\x00alice\x00a")
    # Kafka answers the handshake, and closes the connection at its next request.
    assert sasl.handshake("OAUTHBEARER") == (ErrorCode.NONE, ["PLAIN", "OAUTHBEARER"])
    with pytest.raises(SaslStateError, match="not supported for re-authentication"):
        sasl.authenticate(b"n,,\x01auth=Bearer x\x01\x01")


def test_a_token_shortens_the_session_to_its_expiry() -> None:
    sasl = authenticator(max_reauth_ms=60_000)
    sasl.handshake("OAUTHBEARER")
    token = jwt({"alg": "none"}, {"sub": "carol", "exp": NOW_MS / 1000 + 10})
    assert sasl.authenticate(bearer(token)).session_lifetime_ms == 10_000
    # Without connections.max.reauth.ms the token's expiry alone sets it (Kafka's rule).
    sasl = authenticator()
    sasl.handshake("OAUTHBEARER")
    assert sasl.authenticate(bearer(token)).session_lifetime_ms == 10_000


def test_jaas_configs_parse_as_kafka_writes_them() -> None:
    config = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED username=admin "
        'password="p;a\\"ss" ;'
    )
    assert config.flag == "required"
    assert config.options == {"username": "admin", "password": 'p;a"ss'}
    for text, complaint in (
        ("Module required user=x", "must end with ';'"),
        ("Module always;", "control flag"),
        ("Module required user;", "name=value"),
        ("A required; B required;", "one login module"),
        ("required;", "LoginModule"),
    ):
        with pytest.raises(ValueError, match=complaint):
            parse_jaas_config(text)


def test_listener_scoped_configs_from_set_and_the_environment() -> None:
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required;"
    config = load_config(
        environ={"PURGATORY_LISTENER_NAME_SASL_SSL_SCRAM_SHA_512_SASL_JAAS_CONFIG": jaas},
        overrides={
            "listener.name.sasl_ssl.ssl.client.auth": "required",
            "listener.name.INTERNAL.sasl.enabled.mechanisms": "PLAIN",
            "ssl.client.auth": "requested",
        },
    )
    sasl_ssl = config.listener_values("SASL_SSL")
    assert sasl_ssl["ssl.client.auth"] == "required"
    assert sasl_ssl["scram-sha-512.sasl.jaas.config"] == jaas
    assert config.listener_values("OTHER")["ssl.client.auth"] == "requested"
    assert config.listener_values("INTERNAL")["sasl.enabled.mechanisms"] == "PLAIN"
    for name, value, complaint in (
        ("listener.name.x.log.retention.ms", "1", "scopes only"),
        ("listener.name.x.ssl.client.auth", "sometimes", "not one of"),
    ):
        with pytest.raises(ConfigError, match=complaint):
            load_config(environ={}, overrides={name: value})
