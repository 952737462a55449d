"""SaslHandshake and SaslAuthenticate where no exchange is under way: on a listener that
is not SASL, or on an authenticated connection whose session does not re-authenticate.
Kafka's KafkaApis answers them ILLEGAL_SASL_STATE; a SASL listener's exchange is the
connection's (broker/security/sasl_server_authenticator.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purgatory.broker.api.results import Result
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_class

SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


def handshake_response(version: int, code: int, mechanisms: tuple[str, ...] = ()) -> Any:
    return build(
        response_class(ApiKey.SASL_HANDSHAKE, version), error_code=code, mechanisms=mechanisms
    )


def authenticate_response(
    version: int,
    code: int,
    message: str = "",  # Kafka's default: an empty message, not null
    challenge: bytes = b"",
    session_lifetime_ms: int = 0,
) -> Any:
    return build(
        response_class(ApiKey.SASL_AUTHENTICATE, version),
        error_code=code,
        error_message=message,
        auth_bytes=challenge,
        session_lifetime=session_lifetime_ms,
    )


def error_response(key: int, version: int, code: int, message: str) -> Any:
    if key == ApiKey.SASL_HANDSHAKE:
        return handshake_response(version, code)
    return authenticate_response(version, code, message)


def _handshake(request: Any, version: int) -> Result:
    message = f"Unexpected handshake request with client mechanism {request.mechanism}"
    return error_response(ApiKey.SASL_HANDSHAKE, version, ErrorCode.ILLEGAL_SASL_STATE, message)


def _authenticate(request: Any, version: int) -> Result:
    return error_response(
        ApiKey.SASL_AUTHENTICATE,
        version,
        ErrorCode.ILLEGAL_SASL_STATE,
        "SaslAuthenticate request received after successful authentication",
    )


def handlers() -> dict[int, Callable[[Any, int], Result]]:
    return {ApiKey.SASL_HANDSHAKE: _handshake, ApiKey.SASL_AUTHENTICATE: _authenticate}
