"""The server side of each SASL mechanism served (Kafka's SaslServer implementations): one
object per authentication, fed the client's tokens in turn."""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """The client failed to authenticate; the message is what the client is told (Kafka's
    words: never which part of the credentials was wrong)."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate_response(self, response: bytes) -> bytes:
        """Take the client's next token; return the challenge to send back (b"" for none).
        Raises SaslAuthenticationError."""
        ...

    @property
    def complete(self) -> bool:
        """The exchange succeeded: ``authorization_id`` names the principal."""
        ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def expires_at_ms(self) -> int | None:
        """When the credential expires (wall clock, ms), if it does (an OAUTHBEARER token):
        the session may not outlive it (KIP-368)."""
        ...
