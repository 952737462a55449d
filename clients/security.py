"""How our clients reach SSL and SASL listeners: Kafka's client security configs
(``security.protocol``, ``ssl.*``, ``sasl.*``, as librdkafka and the Java client spell
them) read once into a ``ClientSecurity``, which every new connection of a client goes
through: TLS with its context, then the SASL exchange on our protocol (SaslAuthenticate,
key 36: the first request names the mechanism and carries the first token, each later one
the next token, until the mechanism completes; docs/protocol.md).

A refused authentication (a wrong password, an unknown user, a mechanism the listener
does not enable) raises ``AuthenticationError`` with the broker's message: it is not
retriable, so no client waits out its timeouts retrying it, as Kafka's
AuthenticationException."""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from purgatory.clients.connection import Connection
from purgatory.common.jaas import parse_jaas_config
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# What a SASL listener answers a client that did not (or could not) authenticate: asking
# another broker cannot help.
REFUSED_CLIENT = frozenset(
    {
        ErrorCode.ILLEGAL_SASL_STATE,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
    }
)
_OAUTHBEARER_LIFETIME_S = 3600  # librdkafka's unsecured token's default lifeSeconds


class SecurityKeywords(TypedDict, total=False):
    """The keyword arguments of Producer, Consumer and AdminClient for Kafka's client
    security configs: each Kafka name with ``_`` for ``.`` (``ssl.truststore.location`` is
    ``ssl_ca_location``; ``ssl.keystore.location`` a PEM file of the key and its chain)."""

    security_protocol: str
    ssl_ca_location: str
    ssl_truststore_type: str
    ssl_certificate_location: str
    ssl_key_location: str
    ssl_key_password: str
    ssl_keystore_location: str
    ssl_keystore_type: str
    ssl_endpoint_identification_algorithm: str
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str
    sasl_jaas_config: str
    sasl_oauthbearer_config: str


class SecurityConfigError(ValueError):
    """A security config that cannot be used; the message names it."""


class AuthenticationError(KafkaError):
    """The broker refused this client's authentication (its message says why): never
    retried."""

    @property
    def retriable(self) -> bool:
        return False


@dataclass(frozen=True)
class ClientSecurity:
    """One client's security settings: ``ssl_context`` for SSL and SASL_SSL, the SASL
    mechanism and its credentials for SASL_PLAINTEXT and SASL_SSL."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    oauthbearer: Mapping[str, str] = field(default_factory=dict)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def from_keywords(cls, keywords: SecurityKeywords) -> ClientSecurity:
        """The settings of these keyword arguments; SecurityConfigError names what is
        wrong (a missing file, a SASL listener without credentials, ...)."""
        protocol = keywords.get("security_protocol", "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"security.protocol {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        context = _ssl_context(keywords) if protocol in ("SSL", "SASL_SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = keywords.get("sasl_mechanism", "GSSAPI").upper()  # Kafka's default
        if mechanism not in SASL_MECHANISMS:
            raise SecurityConfigError(
                f"sasl.mechanism {mechanism!r} is not one this client speaks: "
                + ", ".join(SASL_MECHANISMS)
            )
        username = keywords.get("sasl_username", "")
        password = keywords.get("sasl_password", "")
        jaas: dict[str, str] = {}
        if "sasl_jaas_config" in keywords:
            jaas = _jaas_options(keywords["sasl_jaas_config"])
            username = username or jaas.get("username", "")
            password = password or jaas.get("password", "")
        if mechanism == "OAUTHBEARER":
            return cls(protocol, context, mechanism, oauthbearer=_oauthbearer(keywords, jaas))
        if not username or not password:
            raise SecurityConfigError(
                f"sasl.mechanism {mechanism} needs sasl.username and sasl.password (or "
                "sasl.jaas.config with username and password)"
            )
        return cls(protocol, context, mechanism, username, password)

    async def connect(self, host: str, port: int, **kwargs: Any) -> Connection:
        """A new connection to ``host:port`` (``Connection.open``'s keyword arguments),
        over TLS and authenticated as these settings say."""
        conn = await Connection.open(host, port, ssl_context=self.ssl_context, **kwargs)
        if self.uses_sasl:
            try:
                await self.authenticate(conn)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def authenticate(self, conn: Connection) -> None:
        """The SASL exchange of ``mechanism`` on a fresh connection; raises
        AuthenticationError, or the connection's errors."""
        assert self.mechanism is not None
        if self.mechanism == "PLAIN":
            await self._step(conn, f"\0{self.username}\0{self.password}".encode())
        elif self.mechanism == "OAUTHBEARER":
            token = unsecured_jwt(self.oauthbearer)
            challenge = await self._step(conn, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            if challenge:  # RFC 7628's error challenge: the reply ends the exchange
                await self._step(conn, b"\x01")
                raise AuthenticationError(
                    ErrorCode.SASL_AUTHENTICATION_FAILED, challenge.decode(errors="replace")
                )
        else:
            await self._scram(conn)

    async def _scram(self, conn: Connection) -> None:
        import scramp

        assert self.mechanism is not None
        client = scramp.ScramClient([self.mechanism], self.username, self.password)
        try:
            server_first = await self._step(conn, client.get_client_first().encode())
            client.set_server_first(server_first.decode())
            server_final = await self._step(conn, client.get_client_final().encode())
            client.set_server_final(server_final.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"{self.mechanism} exchange with {conn.host}:{conn.port} failed: {exc}",
            ) from None

    async def _step(self, conn: Connection, token: bytes) -> bytes:
        assert self.mechanism is not None
        response: ib.SaslAuthenticateResponse = await conn.send(
            ApiKey.SASL_AUTHENTICATE, ib.SaslAuthenticateRequest(self.mechanism, token)
        )
        if response.error_code:
            raise AuthenticationError(response.error_code, response.error_message)
        return response.auth_bytes


PLAINTEXT = ClientSecurity()


def _ssl_context(keywords: SecurityKeywords) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL client: the CA (``ssl.ca.location``; none:
    the system's), a client certificate for mutual TLS, host names checked unless
    ``ssl.endpoint.identification.algorithm`` is empty. Stores are PEM files (Python
    cannot read JKS)."""
    stores = {
        "ssl.truststore.type": keywords.get("ssl_truststore_type", "PEM"),
        "ssl.keystore.type": keywords.get("ssl_keystore_type", "PEM"),
    }
    for config, store_type in stores.items():
        if store_type.upper() != "PEM":
            raise SecurityConfigError(f"{config} {store_type!r}: only PEM stores are read here")
    try:
        context = ssl.create_default_context(cafile=keywords.get("ssl_ca_location") or None)
    except (OSError, ssl.SSLError) as exc:
        raise SecurityConfigError(f"ssl.ca.location: {exc}") from None
    algorithm = keywords.get("ssl_endpoint_identification_algorithm", "https").lower()
    if algorithm not in ("https", "", "none"):  # none: librdkafka's word for empty
        raise SecurityConfigError(
            f"ssl.endpoint.identification.algorithm {algorithm!r} is not https or empty"
        )
    context.check_hostname = algorithm == "https"
    certificate = keywords.get("ssl_certificate_location") or keywords.get("ssl_keystore_location")
    key = keywords.get("ssl_key_location") or keywords.get("ssl_keystore_location")
    if certificate:
        try:
            context.load_cert_chain(certificate, key, keywords.get("ssl_key_password", ""))
        except (OSError, ssl.SSLError) as exc:
            raise SecurityConfigError(
                f"ssl.certificate.location / ssl.key.location {certificate}: {exc}"
            ) from None
    elif key:
        raise SecurityConfigError("ssl.key.location needs ssl.certificate.location")
    return context


def _jaas_options(text: str) -> dict[str, str]:
    """The options of ``sasl.jaas.config`` (Kafka's PlainLoginModule, ScramLoginModule or
    OAuthBearerLoginModule), read with Kafka's JAAS grammar."""
    try:
        return parse_jaas_config(text).options
    except ValueError as exc:
        raise SecurityConfigError(f"sasl.jaas.config: {exc}") from None


def _oauthbearer(keywords: SecurityKeywords, jaas: Mapping[str, str]) -> dict[str, str]:
    """The unsecured token's settings as librdkafka's ``sasl.oauthbearer.config`` holds
    them (``principal=alice [scope=a,b] [lifeSeconds=3600]``), or the Java client's
    ``OAuthBearerLoginModule`` options (``unsecuredLoginStringClaim_sub="alice"``)."""
    settings: dict[str, str] = {}
    for pair in keywords.get("sasl_oauthbearer_config", "").split():
        name, sep, value = pair.partition("=")
        if not sep:
            raise SecurityConfigError(f"sasl.oauthbearer.config: {pair!r} is not name=value")
        settings[name] = value
    if "unsecuredLoginStringClaim_sub" in jaas:
        settings.setdefault("principal", jaas["unsecuredLoginStringClaim_sub"])
    if "unsecuredLoginLifetimeSeconds" in jaas:
        settings.setdefault("lifeSeconds", jaas["unsecuredLoginLifetimeSeconds"])
    if not settings.get("principal"):
        raise SecurityConfigError(
            "sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.config with principal=NAME "
            "(an unsecured token, as librdkafka makes it)"
        )
    if not settings.get("lifeSeconds", str(_OAUTHBEARER_LIFETIME_S)).isdigit():
        raise SecurityConfigError("sasl.oauthbearer.config: lifeSeconds must be a number")
    return settings


def unsecured_jwt(settings: Mapping[str, str], now: float | None = None) -> str:
    """An unsecured JWT (``"alg": "none"``, no signature) as librdkafka's default token
    refresh makes it: ``sub`` the principal, ``iat`` now, ``exp`` ``lifeSeconds`` later,
    ``scope`` a list when given."""
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "sub": settings["principal"],
        "iat": issued,
        "exp": issued + int(settings.get("lifeSeconds", _OAUTHBEARER_LIFETIME_S)),
    }
    if settings.get("scope"):
        claims["scope"] = settings["scope"].split(",")

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."
