"""SASL/PLAIN (RFC 4616; Kafka's PlainSaslServer): the client sends
``authzid NUL username NUL password`` once; the users are the ``user_NAME="password"``
options of the listener's ``plain.sasl.jaas.config`` (Kafka's PlainServerCallbackHandler)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from purgatory.broker.security.sasl import SaslAuthenticationError

MECHANISM = "PLAIN"
_USER_PREFIX = "user_"


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The users of a PlainLoginModule's options: ``user_alice="secret"`` -> {alice: secret}."""
    return {k[len(_USER_PREFIX) :]: v for k, v in options.items() if k.startswith(_USER_PREFIX)}


class PlainSaslServer:
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("authentication has not completed")
        return self._authorization_id

    @property
    def expires_at_ms(self) -> int | None:
        return None

    def evaluate_response(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN takes one message")
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        try:
            authzid, username, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # Compared whether the user exists or not, so the time taken tells nothing.
        matches = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._authorization_id = username
        return b""
