"""Scenarios of SASL (secured pair): SaslHandshake's mechanisms, the SASL APIs where no
exchange is under way, requests before authentication (the connection closes), PLAIN's
passwords, SCRAM-SHA-256/512 exchanges with scramp as the client, OAUTHBEARER's unsecured
JWTs, and SaslAuthenticate's session lifetime (KIP-368) at each version.

SASL answers are recorded through views: the error code, the error message (SASL's
messages are what a client shows its user, so they are compared, unlike other APIs'), the
server's token with its random parts (SCRAM nonces, salts, signatures) checked and
replaced by symbols, and the session lifetime."""

from __future__ import annotations

import base64
import datetime
import json
import re
import time
from collections.abc import Callable
from typing import Any

import scramp

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client, body
from tests.differential.scenarios.base import API_VERSIONS, metadata, secured_scenario

# The secured pair's settings (tests/cluster/test_differential.py's SECURED).
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items())
    + ";"
)
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# Kafka's broker logs in with each enabled mechanism: OAUTHBEARER's login needs a subject.
OAUTHBEARER_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin";'
)
SCRAM_PASSWORDS = {"alice": "alice-scram", "admin": "admin-scram"}
SCRAM_USERS = [
    f"SCRAM-SHA-{bits}=[name={name},iterations=8192,password={password}]"
    for name, password in SCRAM_PASSWORDS.items()
    for bits in (256, 512)
]
REAUTH_MS = 60_000
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS = "User:admin;User:ANONYMOUS"
SASL = "SASL_PLAINTEXT"

SASL_HANDSHAKE = 1
SASL_AUTHENTICATE = 2


def sasl_view(token: Callable[[bytes], Any] = bytes.hex) -> Callable[[Any], dict[str, Any]]:
    """A SaslAuthenticate answer as plain data, its token through ``token``."""

    def view(response: Any) -> dict[str, Any]:
        plain = {
            "error_code": response.error_code.name,
            "sasl_message": response.error_message,
            "auth_bytes": token(response.auth_bytes),
        }
        if hasattr(response, "session_lifetime"):
            plain["session_lifetime"] = response.session_lifetime // _MS
        return plain

    return view


_MS = datetime.timedelta(milliseconds=1)


async def handshake(c: Client, label: str, mechanism: str) -> Any:
    return await c.call(label, ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE, mechanism=mechanism)


async def authenticate(
    c: Client,
    label: str,
    token: bytes,
    version: int = SASL_AUTHENTICATE,
    view: Callable[[Any], Any] | None = None,
) -> Any:
    return await c.call(
        label, ApiKey.SASL_AUTHENTICATE, version, view=view or sasl_view(), auth_bytes=token
    )


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


async def login(c: Client, user: str, password: str | None = None) -> Client:
    """A new SASL connection authenticated with PLAIN as ``user`` (unrecorded)."""
    other = await c.connect(SASL)
    await other.wire.call(
        ApiKey.SASL_HANDSHAKE,
        SASL_HANDSHAKE,
        body(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE, mechanism="PLAIN"),
    )
    token = plain_token(user, PLAIN_USERS[user] if password is None else password)
    answer = await other.wire.call(
        ApiKey.SASL_AUTHENTICATE,
        SASL_AUTHENTICATE,
        body(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE, auth_bytes=token),
    )
    assert answer.error_code.value == 0, answer.error_message
    return other


async def api_versions(c: Client, label: str) -> Any:
    """ApiVersions, recorded by its error code (the API list is the api_versions scenario's)."""
    return await c.call(
        label,
        ApiKey.API_VERSIONS,
        API_VERSIONS,
        view=lambda r: {"error_code": r.error_code.name},
        client_software_name="differential",
        client_software_version="1",
    )


# -- SaslHandshake, and the SASL APIs where no exchange is under way -----------------------


@secured_scenario
async def sasl_handshake_mechanisms(c: Client) -> None:
    sasl = await c.connect(SASL)
    await api_versions(sasl, "api_versions_before_handshake")
    await handshake(sasl, "handshake_plain", "PLAIN")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
        other = await c.connect(SASL)
        await handshake(other, f"handshake_{mechanism}", mechanism)
    unknown = await c.connect(SASL)
    await handshake(unknown, "handshake_gssapi", "GSSAPI")
    await unknown.closed("closed_after_unknown_mechanism")
    lower = await c.connect(SASL)
    await handshake(lower, "handshake_lower_case_plain", "plain")
    await lower.closed("closed_after_lower_case_mechanism")


@secured_scenario
async def sasl_on_plaintext_listener(c: Client) -> None:
    await handshake(c, "handshake", "PLAIN")
    for version in (0, 1, 2):
        await authenticate(c, f"authenticate_v{version}", plain_token("alice", "x"), version)
    await api_versions(c, "still_served")


@secured_scenario
async def sasl_request_before_authentication(c: Client) -> None:
    first = await c.connect(SASL)
    await metadata(first, "metadata_first", None)
    after_versions = await c.connect(SASL)
    await api_versions(after_versions, "api_versions")
    await metadata(after_versions, "metadata_after_api_versions", None)
    after_handshake = await c.connect(SASL)
    await handshake(after_handshake, "handshake", "PLAIN")
    await metadata(after_handshake, "metadata_after_handshake", None)
    await after_handshake.closed("closed_after_metadata_after_handshake")
    no_handshake = await c.connect(SASL)
    await authenticate(no_handshake, "authenticate_without_handshake", plain_token("alice", "x"))
    twice = await c.connect(SASL)
    await handshake(twice, "first_handshake", "PLAIN")
    await handshake(twice, "second_handshake", "PLAIN")
    await twice.closed("closed_after_second_handshake")


# -- PLAIN ----------------------------------------------------------------------------------


@secured_scenario
async def sasl_plain_passwords(c: Client) -> None:
    for version in (0, 1, 2):
        sasl = await c.connect(SASL)
        await handshake(sasl, f"handshake_v{version}", "PLAIN")
        await authenticate(sasl, f"good_v{version}", plain_token("alice", "alice-secret"), version)
        await metadata(sasl, f"metadata_v{version}", None)
    refused = {
        "wrong_password": plain_token("alice", "wrong"),
        "unknown_user": plain_token("mallory", "alice-secret"),
        "other_authorization_id": plain_token("alice", "alice-secret", authzid="bob"),
        "no_separators": b"alice",
        "empty_password": plain_token("alice", ""),
    }
    for label, token in refused.items():
        sasl = await c.connect(SASL)
        await handshake(sasl, f"handshake_{label}", "PLAIN")
        await authenticate(sasl, label, token)
        await sasl.closed(f"closed_after_{label}")
    same = await c.connect(SASL)
    await handshake(same, "handshake_own_authorization_id", "PLAIN")
    await authenticate(
        same, "own_authorization_id", plain_token("alice", "alice-secret", authzid="alice")
    )


@secured_scenario
async def sasl_reauthentication(c: Client) -> None:
    """KIP-368: a session with a lifetime re-authenticates on the same connection, as the
    same principal with the same mechanism, at most once a second."""
    sasl = await c.connect(SASL)
    await handshake(sasl, "handshake", "PLAIN")
    await authenticate(sasl, "authenticate", plain_token("alice", "alice-secret"))
    await handshake(sasl, "reauth_handshake", "PLAIN")
    await authenticate(sasl, "reauthenticate", plain_token("alice", "alice-secret"))
    # Kafka's KafkaChannel: not again within a second (KafkaApis answers it instead).
    await handshake(sasl, "reauth_again_at_once_handshake", "PLAIN")
    await authenticate(sasl, "reauth_again_at_once", plain_token("alice", "alice-secret"))
    await metadata(sasl, "metadata_after_reauthentication", None)
    bob = await c.connect(SASL)
    await handshake(bob, "bob_handshake", "PLAIN")
    await authenticate(bob, "bob_authenticate", plain_token("bob", "bob-secret"))
    await handshake(bob, "reauth_as_alice_handshake", "PLAIN")
    await authenticate(bob, "reauth_as_alice", plain_token("alice", "alice-secret"))
    await bob.closed("closed_after_changing_principal")
    other = await c.connect(SASL)
    await handshake(other, "handshake_then_other_mechanism", "PLAIN")
    await authenticate(other, "authenticate_then_other_mechanism", plain_token("bob", "bob-secret"))
    await handshake(other, "reauth_with_other_mechanism", "SCRAM-SHA-512")
    await authenticate(other, "reauth_with_other_mechanism_token", b"n,,n=bob,r=abc")
    during = await c.connect(SASL)
    await handshake(during, "handshake_then_metadata_during_reauth", "PLAIN")
    await authenticate(during, "authenticate_then_metadata", plain_token("bob", "bob-secret"))
    await handshake(during, "reauth_handshake_then_metadata", "PLAIN")
    await metadata(during, "metadata_during_reauthentication", None)
    await during.closed("closed_after_metadata_during_reauthentication", timeout_s=0.5)


# -- SCRAM ----------------------------------------------------------------------------------

_SERVER_FIRST = re.compile(rb"r=(?P<nonce>[^,]+),s=(?P<salt>[^,]+),i=(?P<iterations>\d+)")


def server_first(client_nonce: str) -> Callable[[bytes], str]:
    """SCRAM's server-first message with its random parts checked and named: the nonce
    starts with the client's, the salt is base64."""

    def token(data: bytes) -> str:
        match = _SERVER_FIRST.fullmatch(data)
        if match is None:
            return data.decode(errors="replace")
        nonce = match["nonce"].decode()
        base64.b64decode(match["salt"], validate=True)
        ours = "<client nonce>" if nonce.startswith(client_nonce) else "<not the client's>"
        return f"r={ours}<server nonce>,s=<salt>,i={match['iterations'].decode()}"

    return token


async def scram_exchange(
    c: Client, name: str, mechanism: str, user: str, password: str, version: int = 2
) -> Client:
    """One SCRAM exchange on a new SASL connection, recorded as ``<name>_*``: the client's
    first message, its proof, and whether the server's signature verifies."""
    sasl = await c.connect(SASL)
    await handshake(sasl, f"{name}_handshake", mechanism)
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    nonce = first.split("r=", 1)[1]
    answer = await authenticate(
        sasl, f"{name}_client_first", first.encode(), version, sasl_view(server_first(nonce))
    )
    if answer is None or answer.error_code.value != 0:
        await sasl.closed(f"{name}_closed")
        return sasl
    client.set_server_first(answer.auth_bytes.decode())

    def server_final(data: bytes) -> str:
        try:
            client.set_server_final(data.decode())
        except scramp.ScramException as exc:
            return f"<does not verify: {exc}>"
        return "<server signature verifies>"

    proof = client.get_client_final().encode()
    answer = await authenticate(
        sasl, f"{name}_client_final", proof, version, sasl_view(server_final)
    )
    if answer is None or answer.error_code.value != 0:
        await sasl.closed(f"{name}_closed")
    return sasl


@secured_scenario
async def sasl_scram_exchanges(c: Client) -> None:
    good = await scram_exchange(c, "sha512", "SCRAM-SHA-512", "alice", "alice-scram")
    await metadata(good, "metadata_sha512", None)
    await scram_exchange(c, "sha256", "SCRAM-SHA-256", "alice", "alice-scram", version=1)
    await scram_exchange(c, "wrong_proof", "SCRAM-SHA-512", "alice", "wrong")
    await scram_exchange(c, "unknown_user", "SCRAM-SHA-512", "mallory", "alice-scram")
    # A PLAIN user is no SCRAM user.
    await scram_exchange(c, "plain_only_user", "SCRAM-SHA-256", "bob", "bob-secret")
    malformed = await c.connect(SASL)
    await handshake(malformed, "malformed_handshake", "SCRAM-SHA-512")
    await authenticate(malformed, "malformed_client_first", b"not scram")
    await malformed.closed("malformed_closed")


# -- OAUTHBEARER ----------------------------------------------------------------------------


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured_jwt(claims: dict[str, Any]) -> str:
    """Kafka's unsecured JWS: header ``{"alg":"none"}``, the claims, no signature."""
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


def oauthbearer_token(jwt: str) -> bytes:
    """RFC 7628's client-first message with ``jwt`` as the bearer token."""
    return f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()


def lifetime_bucket(ms: int) -> str:
    """A session lifetime by the token's expiry: the two brokers' clocks differ a little."""
    if ms in (0, REAUTH_MS):
        return str(ms)
    return "<until the token expires, under 30 s>" if 0 < ms <= 30_000 else f"<{ms}>"


def oauthbearer_view(response: Any) -> dict[str, Any]:
    plain = sasl_view(lambda b: b.decode(errors="replace"))(response)
    if "session_lifetime" in plain:
        plain["session_lifetime"] = lifetime_bucket(plain["session_lifetime"])
    return plain


@secured_scenario
async def sasl_oauthbearer_tokens(c: Client) -> None:
    now = int(time.time())
    tokens = {
        "valid": {"sub": "alice", "iat": now, "exp": now + 3600},
        "expiring_soon": {"sub": "alice", "iat": now, "exp": now + 30},
        "expired": {"sub": "alice", "iat": now - 7200, "exp": now - 3600},
        "no_subject": {"iat": now, "exp": now + 3600},
        "no_expiry": {"sub": "alice", "iat": now},
    }
    for label, claims in tokens.items():
        sasl = await c.connect(SASL)
        await handshake(sasl, f"handshake_{label}", "OAUTHBEARER")
        token = oauthbearer_token(unsecured_jwt(claims))
        answer = await authenticate(sasl, label, token, view=oauthbearer_view)
        if answer is not None and answer.error_code.value == 0 and answer.auth_bytes:
            # RFC 7628's error challenge: the client's reply ends the exchange.
            await authenticate(sasl, f"{label}_reply", b"\x01", view=oauthbearer_view)
            await sasl.closed(f"closed_after_{label}")
        elif answer is not None and answer.error_code.value == 0:
            await metadata(sasl, f"metadata_{label}", None)
    garbage = await c.connect(SASL)
    await handshake(garbage, "handshake_not_a_jwt", "OAUTHBEARER")
    answer = await authenticate(
        garbage, "not_a_jwt", oauthbearer_token("not-a-jwt"), view=oauthbearer_view
    )
    if answer is not None and answer.error_code.value == 0 and answer.auth_bytes:
        await authenticate(garbage, "not_a_jwt_reply", b"\x01", view=oauthbearer_view)
    malformed = await c.connect(SASL)
    await handshake(malformed, "handshake_malformed", "OAUTHBEARER")
    await authenticate(malformed, "malformed", b"Bearer x", view=oauthbearer_view)
    await malformed.closed("closed_after_malformed")
