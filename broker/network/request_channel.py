"""What a listener's codec hands the broker, and how the broker answers through it.

A listener is a socket server plus a sans-I/O ``Codec`` per protocol it speaks: the codec turns a frame (the
bytes after the length prefix) into a ``Request`` (its header fields, the decoded body,
the listener it came from, when it arrived) and a response body, or an error, back into a
frame. The socket server knows frames, slots and back-pressure, never a body's schema;
KafkaApis knows bodies, never bytes.
"""

from __future__ import annotations

from typing import Any, Protocol

from purgatory.protocol.api import RequestFrame

# The ``listener`` label of request metrics for our protocol (framed MessagePack); Kafka's
# protocol is labelled with the name of the listener it came in on, as Kafka does.
PURGATORY = "PURGATORY"


class Request(RequestFrame):
    """One decoded request: the frame's header and body, and what the broker keeps beside
    them. A Struct (built in C, untracked by the cycle collector): the broker makes one
    per request and holds it while the request waits in a purgatory. Our protocol's frames
    decode straight into it (``RequestDecoder``); the codec then sets ``received_s``."""

    received_s: float = 0.0  # the process clock when its handling began
    from_follower: bool = False  # a replica's fetch (its own request metrics)
    # KIP-511: the client software's name and version, from ApiVersions v3+ (Kafka's wire).
    client_software: tuple[str, str] | None = None


class RequestHeader(Protocol):
    """What an answer needs of its request: which API, which version, which correlation."""

    api_key: int
    api_version: int
    correlation_id: int


class UnreadableRequest(Exception):
    """The request cannot be read, or not served at all as sent: the connection cannot go
    on. ``reason`` labels the close in the bad-requests metric."""

    def __init__(self, message: str, reason: str = "unreadable_header") -> None:
        super().__init__(message)
        self.reason = reason


def speaks_kafka(frame: bytes) -> bool:
    """Tell the protocols apart by a connection's first request: Kafka's begins with its
    int16 api key, whose high byte is 0 for every key there is; ours with a MessagePack
    array marker (0x90-0x9f, 0xdc or 0xdd), never 0."""
    return bool(frame) and frame[0] == 0


class Codec(Protocol):
    def decode(self, frame: bytes, received_s: float) -> Request:
        """Raise UnreadableRequest when no header can be read, RequestError (header set)
        when the header was read but the request cannot be served as sent."""
        ...

    def encode_response_into(self, buffer: bytearray, request: RequestHeader, body: Any) -> None:
        """Append one whole response frame, length prefix included."""
        ...

    def encode_error_into(
        self, buffer: bytearray, request: RequestHeader, code: int, message: str
    ) -> None:
        """Append the frame that answers ``request`` with a request-level error."""
        ...

    def trim_waiting(self, request: Request) -> None:
        """Drop what a request's answer will not need, now that it waits (in a purgatory
        or on a task): the collector walks whatever it keeps at every collection."""
        ...
