"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWT validation (Kafka's
OAuthBearerSaslServer and OAuthBearerUnsecuredValidatorCallbackHandler, its default):
the client sends ``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``;
the token is a JWT with ``"alg": "none"`` whose principal claim (``sub``) names the
principal and whose ``exp`` ends the session. A token that does not validate is answered
with RFC 7628's error challenge (``{"status": "invalid_token"}``); the client's reply to
it ends the exchange with that message as the failure.

The listener's ``oauthbearer.sasl.jaas.config`` options tune it as Kafka's do:
``unsecuredValidatorPrincipalClaimName`` (sub), ``unsecuredValidatorScopeClaimName``
(scope), ``unsecuredValidatorRequiredScope`` (comma-separated, none) and
``unsecuredValidatorAllowableClockSkewMs`` (0).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from purgatory.broker.security.sasl import SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
_KVSEP = "\x01"
_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kvpairs>(?:[^\x01]*\x01)*)\x01")
_MAX_TOKEN_BYTES = 64 * 1024
# A client first message that does not parse: Kafka's SaslException, which it answers with
# no more than this (SaslServerAuthenticator).
_MALFORMED = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    f"mechanism {MECHANISM}"
)


class OAuthBearerSaslServer:
    mechanism = MECHANISM

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int] | None = None) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        required = options.get("unsecuredValidatorRequiredScope", "")
        self.required_scope = [s.strip() for s in required.split(",") if s.strip()]
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        if not skew.isdigit():
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs must be a number of ms, got {skew!r}"
            )
        self.skew_ms = int(skew)
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._principal: str | None = None
        self._expires_at_ms: int | None = None
        self._error: str | None = None  # the error challenge sent; the next reply fails

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def authorization_id(self) -> str:
        if self._principal is None:
            raise RuntimeError("authentication has not completed")
        return self._principal

    @property
    def expires_at_ms(self) -> int | None:
        return self._expires_at_ms

    def evaluate_response(self, response: bytes) -> bytes:
        if self._error is not None:
            raise SaslAuthenticationError(self._error)  # the reply to the error challenge
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER has ended")
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(_MALFORMED) from None
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslAuthenticationError(_MALFORMED)
        pairs = dict(pair.partition("=")[::2] for pair in match["kvpairs"].split(_KVSEP) if pair)
        auth = pairs.get("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslAuthenticationError(_MALFORMED)
        try:
            principal, expires_at_ms = self._validate(auth[len("Bearer ") :].strip())
        except _InvalidToken as exc:
            self._error = json.dumps(exc.status, separators=(",", ":"))  # as Kafka writes it
            return self._error.encode()
        authzid = match["authzid"]
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({principal})"
            )
        self._principal, self._expires_at_ms = principal, expires_at_ms
        return b""

    def _validate(self, token: str) -> tuple[str, int]:
        """The principal and expiry (ms) of an unsecured JWT, as Kafka's unsecured
        validator checks it."""
        if len(token) > _MAX_TOKEN_BYTES:
            raise _InvalidToken()
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise _InvalidToken()  # an unsecured JWS: header.payload. (no signature)
        header, claims = _json_part(parts[0]), _json_part(parts[1])
        if header.get("alg") != "none":
            raise _InvalidToken()
        principal = claims.get(self.principal_claim)
        exp = claims.get("exp")
        if not isinstance(principal, str) or not principal:
            raise _InvalidToken()
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise _InvalidToken()
        now = self.now_ms()
        expires_at_ms = int(exp * 1000)
        if now > expires_at_ms + self.skew_ms:
            raise _InvalidToken()
        iat = claims.get("iat")
        issued_in_future = isinstance(iat, (int, float)) and iat * 1000 > now + self.skew_ms
        if issued_in_future and not isinstance(iat, bool):
            raise _InvalidToken()
        scope = claims.get(self.scope_claim, [])
        scopes = scope.split() if isinstance(scope, str) else scope
        missing = [
            s for s in self.required_scope if not isinstance(scopes, list) or s not in scopes
        ]
        if missing:
            raise _InvalidToken("insufficient_scope", " ".join(self.required_scope))
        return principal, expires_at_ms


class _InvalidToken(Exception):
    def __init__(self, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(status)
        self.status: dict[str, Any] = {"status": status}
        if scope is not None:
            self.status["scope"] = scope


def _json_part(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise _InvalidToken() from None
    if not isinstance(value, dict):
        raise _InvalidToken()
    return value
