"""SaslServerAuthenticator: one connection's SASL state on a SASL_PLAINTEXT or SASL_SSL
listener (Kafka's class of that name).

Before a client has authenticated only ApiVersions, SaslHandshake (which picks the
mechanism) and then SaslAuthenticate (the mechanism's tokens, as often as it needs) are
served; anything else closes the connection, as Kafka does. Once authenticated the
connection acts as ``User:<authorization id>``. With a session lifetime (KIP-368:
``connections.max.reauth.ms``, or an OAUTHBEARER token's expiry) the client must
re-authenticate before it ends (a SaslHandshake on the authenticated connection starts
that, with the same mechanism and as the same principal, at most once a second as Kafka's
KafkaChannel allows); a request after it closes the connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from purgatory.broker.security.kafka_principal import KafkaPrincipal, user
from purgatory.broker.security.sasl import SaslAuthenticationError, SaslServer
from purgatory.protocol.errors import ErrorCode


class SaslState(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate expected
    COMPLETE = "complete"
    REAUTHENTICATE = "reauthenticate"  # a new exchange on an authenticated connection
    REAUTH_BAD_MECHANISM = "reauth_bad_mechanism"  # re-authentication with another mechanism


@dataclass(frozen=True)
class SaslListener:
    """What a SASL listener serves: its enabled mechanisms (in the order they are told to
    clients), a new server-side exchange for one of them, the session lifetime
    (``connections.max.reauth.ms``, 0: none) and the other limits of Kafka's configs."""

    mechanisms: Sequence[str]
    new_server: Callable[[str], SaslServer]
    max_reauth_ms: int = 0
    failed_delay_ms: int = 100
    max_receive_size: int = 524288


@dataclass(frozen=True)
class Authenticated:
    """One SaslAuthenticate answered: the token for the client, and once the exchange
    completes, its session's lifetime in ms (0: none)."""

    challenge: bytes
    complete: bool
    session_lifetime_ms: int = 0


class SaslStateError(Exception):
    """A request the exchange does not allow now: the connection closes."""


# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a SaslHandshake sooner after
# the last re-authentication began is KafkaApis' (ILLEGAL_SASL_STATE), not a new one.
MIN_REAUTH_INTERVAL_S = 1.0


class SaslServerAuthenticator:
    def __init__(
        self,
        listener: SaslListener,
        monotonic: Callable[[], float] = time.perf_counter,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.listener = listener
        self.monotonic = monotonic  # the clock session expiry is kept on (seconds)
        self.wall_ms = wall_ms
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_at: float | None = None  # on ``monotonic``
        self.reauthenticating = False  # the exchange under way (or last) re-authenticates
        self.reauth_started_at: float | None = None  # on ``monotonic``: the last one began
        self._server: SaslServer | None = None
        self._bad_mechanism = ""  # why a re-authentication with another mechanism failed

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self, now: float) -> bool:
        return self.session_expires_at is not None and now >= self.session_expires_at

    def reauthenticates(self) -> bool:
        """Whether a SaslHandshake now starts a re-authentication (KIP-368): only a
        session with a lifetime re-authenticates, and not within a second of the last
        re-authentication's start."""
        if self.state is not SaslState.COMPLETE or self.session_expires_at is None:
            return False
        last = self.reauth_started_at
        return last is None or self.monotonic() - last >= MIN_REAUTH_INTERVAL_S

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake: the error code and the enabled mechanisms. A mechanism not
        enabled is UNSUPPORTED_SASL_MECHANISM, a handshake during an exchange
        ILLEGAL_SASL_STATE (the connection then closes, after the answer). A
        re-authentication with another mechanism is answered as Kafka does, and its
        next request closes the connection."""
        if self.state in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE):
            return ErrorCode.ILLEGAL_SASL_STATE, []  # Kafka: the request's error response
        reauthenticating = self.state is SaslState.COMPLETE and self.reauthenticates()
        if reauthenticating:
            self.state = SaslState.REAUTHENTICATE
            self.reauthenticating = True
            self.reauth_started_at = self.monotonic()
        elif self.state is not SaslState.HANDSHAKE:
            raise SaslStateError(f"unexpected SaslHandshake in SASL state {self.state.value}")
        enabled = list(self.listener.mechanisms)
        if mechanism not in enabled:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        if reauthenticating and mechanism != self.mechanism:
            self.state = SaslState.REAUTH_BAD_MECHANISM
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'"
            )
            return ErrorCode.NONE, enabled
        self.mechanism = mechanism
        self._server = self.listener.new_server(mechanism)
        if self.state is SaslState.HANDSHAKE:
            self.state = SaslState.AUTHENTICATE
        return ErrorCode.NONE, enabled

    def authenticate(self, token: bytes) -> Authenticated:
        """One SaslAuthenticate. Raises SaslAuthenticationError (answered
        SASL_AUTHENTICATION_FAILED, then the connection closes) or SaslStateError."""
        if self.state is SaslState.REAUTH_BAD_MECHANISM:
            raise SaslStateError(self._bad_mechanism)  # Kafka closes without an answer
        server = self._server
        if server is None or self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE):
            raise SaslStateError(f"unexpected SaslAuthenticate in SASL state {self.state.value}")
        challenge = server.evaluate_response(token)
        if not server.complete:
            return Authenticated(challenge, False)
        principal = user(server.authorization_id)
        if self.state is SaslState.REAUTHENTICATE and principal != self.principal:
            raise SaslAuthenticationError(  # Kafka writes the principals type.name
                "Cannot change principals during re-authentication from "
                f"{_dotted(self.principal)}: {_dotted(principal)}"
            )
        self.principal, self._server, self.state = principal, None, SaslState.COMPLETE
        lifetime = self._session_lifetime_ms(server.expires_at_ms)
        self.session_expires_at = self.monotonic() + lifetime / 1000 if lifetime else None
        return Authenticated(challenge, True, lifetime)

    def _session_lifetime_ms(self, credential_expires_at_ms: int | None) -> int:
        """KIP-368's: the least of connections.max.reauth.ms and the credential's
        remaining life; 0 when neither applies."""
        max_reauth = self.listener.max_reauth_ms
        if credential_expires_at_ms is None:
            return max(0, max_reauth)
        remaining = max(1, credential_expires_at_ms - self.wall_ms())
        return min(remaining, max_reauth) if max_reauth > 0 else remaining


def _dotted(principal: KafkaPrincipal | None) -> str:
    return "" if principal is None else f"{principal.principal_type}.{principal.name}"
