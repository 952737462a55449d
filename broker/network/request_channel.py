"""What a listener's codec hands the broker, and how the broker answers through it.

A listener is a socket server plus a sans-I/O ``Codec``: the codec turns a frame (the
bytes after the length prefix) into a ``Request`` (its header fields, the decoded body,
the listener it came from, when it arrived) and a response body, or an error, back into a
frame. The socket server knows frames, slots and back-pressure, never a body's schema;
KafkaApis knows bodies, never bytes.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec


class Request(msgspec.Struct, gc=False):
    """One decoded request. A Struct (built in C, untracked by the cycle collector): the
    broker makes one per request and holds it while the request waits in a purgatory."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    listener: str
    received_s: float  # the process clock when its handling began
    from_follower: bool = False  # a replica's fetch (its own request metrics)


class RequestHeader(Protocol):
    """What an answer needs of its request: which API, which version, which correlation."""

    api_key: int
    api_version: int
    correlation_id: int


class UnreadableRequest(Exception):
    """Not even the request header could be read: the connection cannot go on."""


class Codec(Protocol):
    listener: str  # the listener's name, as in Kafka's ``listeners`` (PURGATORY, ...)

    def decode(self, frame: bytes, received_s: float) -> Request:
        """Raise UnreadableRequest when no header can be read, RequestError (header set)
        when the header was read but the request cannot be served as sent."""
        ...

    def encode_response_into(
        self, buffer: bytearray, request: RequestHeader, body: msgspec.Struct
    ) -> None:
        """Append one whole response frame, length prefix included."""
        ...

    def encode_error_into(
        self, buffer: bytearray, request: RequestHeader, code: int, message: str
    ) -> None:
        """Append the frame that answers ``request`` with a request-level error."""
        ...
