"""How one broker proves to another that it belongs to the cluster: it holds the cluster
secret (``cluster.secret``), shown without sending it, in a SaslAuthenticate exchange on
our protocol with the mechanism ``PURGATORY-CLUSTER``.

A challenge and response with HMAC-SHA256, both ways (SCRAM's shape, without a password
store): the client sends its broker id and a fresh nonce; the server answers with its own
nonce; the client sends HMAC(secret, "client" | broker id | both nonces); the server
checks it and answers HMAC(secret, "server" | ...), which the client checks in turn. A
recorded exchange cannot be replayed (the server's nonce is new each time), and neither
side learns anything about the secret from a stranger's attempt.

Until a connection has passed it, the broker refuses every inter-broker and controller
API on it (and follower fetches): CLUSTER_AUTHORIZATION_FAILED. A failed attempt is
answered SASL_AUTHENTICATION_FAILED and the connection closed, as Kafka does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import msgspec

MECHANISM = "PURGATORY-CLUSTER"
SECRET_ENV = "PURGATORY_CLUSTER_SECRET"
_NONCE_BYTES = 16


class AuthenticationFailed(ConnectionError):
    """The other side does not hold the cluster secret (or broke the exchange): for the
    client, a connection that cannot be used (its callers retry as for any other)."""


class _First(msgspec.Struct, array_like=True):
    broker_id: int
    client_nonce: bytes


def _proof(secret: str, role: bytes, broker_id: int, client: bytes, server: bytes) -> bytes:
    message = b"|".join((role, str(broker_id).encode(), client, server))
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


class ServerExchange:
    """The server's side, one per connection: ``step`` takes each client message and
    returns the answer; ``broker_id`` is set once the client proved itself."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.broker_id: int | None = None
        self._first: _First | None = None
        self._server_nonce = b""

    def step(self, message: bytes) -> bytes:
        """Raises AuthenticationFailed (the connection is then closed)."""
        if not self.secret:
            raise AuthenticationFailed("this broker has no cluster.secret: no broker may join")
        if self._first is None:
            try:
                first = msgspec.msgpack.decode(message, type=_First)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                raise AuthenticationFailed(f"unreadable first message: {exc}") from None
            if len(first.client_nonce) != _NONCE_BYTES:
                raise AuthenticationFailed("a client nonce has 16 bytes")
            self._first = first
            self._server_nonce = secrets.token_bytes(_NONCE_BYTES)
            return self._server_nonce
        if self.broker_id is not None:
            raise AuthenticationFailed("already authenticated")
        first = self._first
        expected = _proof(
            self.secret, b"client", first.broker_id, first.client_nonce, self._server_nonce
        )
        if not hmac.compare_digest(expected, message):
            raise AuthenticationFailed(f"broker {first.broker_id} did not prove the secret")
        self.broker_id = first.broker_id
        return _proof(
            self.secret, b"server", first.broker_id, first.client_nonce, self._server_nonce
        )


class ClientExchange:
    """The client's side: ``first()``, then ``prove(server nonce)``, then ``check(server
    proof)``."""

    def __init__(self, secret: str, broker_id: int) -> None:
        self.secret = secret
        self.broker_id = broker_id
        self.client_nonce = secrets.token_bytes(_NONCE_BYTES)
        self._server_nonce = b""

    def first(self) -> bytes:
        return msgspec.msgpack.encode(_First(self.broker_id, self.client_nonce))

    def prove(self, server_nonce: bytes) -> bytes:
        if len(server_nonce) != _NONCE_BYTES:
            raise AuthenticationFailed("a server nonce has 16 bytes")
        self._server_nonce = server_nonce
        return _proof(self.secret, b"client", self.broker_id, self.client_nonce, server_nonce)

    def check(self, server_proof: bytes) -> None:
        expected = _proof(
            self.secret, b"server", self.broker_id, self.client_nonce, self._server_nonce
        )
        if not hmac.compare_digest(expected, server_proof):
            raise AuthenticationFailed("the other broker did not prove the secret")


async def authenticate(
    connection: Any, secret: str, broker_id: int, timeout_ms: int = 30_000
) -> None:
    """Run the exchange on a fresh ``Connection`` (purgatory.clients.connection); raises
    AuthenticationFailed or the connection's errors. Nothing to prove without a secret
    (a cluster of one). Each step waits at most ``timeout_ms``: the caller's bound on
    reaching that node holds for the exchange too."""
    if not secret:
        return
    from purgatory.protocol import inter_broker_messages as ib
    from purgatory.protocol.api import ApiKey

    exchange = ClientExchange(secret, broker_id)
    message = exchange.first()
    for step in range(2):
        response = await connection.send(
            ApiKey.SASL_AUTHENTICATE,
            ib.SaslAuthenticateRequest(MECHANISM, message),
            timeout_ms=timeout_ms,
        )
        if response.error_code:
            raise AuthenticationFailed(f"refused: {response.error_message or response.error_code}")
        if step == 0:
            message = exchange.prove(response.auth_bytes)
        else:
            exchange.check(response.auth_bytes)
