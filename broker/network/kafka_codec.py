"""The codec of Apache Kafka's binary protocol, for unmodified Kafka clients (docs/protocol.md).

A request frame is a request header (api key, version, correlation id, client id; from
the API's first flexible version also tagged fields: header v2) and the body; a
response frame is the correlation id (plus tagged fields when flexible: header v1, never
for ApiVersions) and the body. Bodies are read and written with kio's schemas, except
the Fetch response, written by hand (protocol/kafka_fetch.py). kio's native reader sizes
arrays by the counts it reads, so a body is first walked within its bounds
(protocol/kafka_bounds.py): a count larger than the bytes left is a malformed request,
never an allocation that aborts the process.

As Kafka's broker does: a request whose header cannot be read, with an unknown API key, a
version outside the served range or a body that does not parse closes the connection;
ApiVersions of an unknown version is answered (a v0 body with UNSUPPORTED_VERSION and
the served ranges, built by the API layer) so the client can pick one. Kafka's protocol
has no request-level error: ``encode_error_into`` asks the API layer for the API's own
error response, every partition carrying the code.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer

from purgatory.broker.network.request_channel import (
    Request,
    RequestHeader,
    UnreadableRequest,
)
from purgatory.protocol.api import ApiKey
from purgatory.protocol.framing import LENGTH_PREFIX
from purgatory.protocol.kafka_bounds import Walker, body_walker, skip_tagged_fields
from purgatory.protocol.kafka_schemas import VERSIONS, request_class

_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I32 = struct.Struct(">i")
_API_VERSIONS = int(ApiKey.API_VERSIONS)

ErrorResponse = Callable[[Request, int, str], Any]


class KafkaCodec:
    def __init__(self, error_response: ErrorResponse) -> None:
        self.error_response = error_response

    def decode(self, frame: bytes, received_s: float) -> Request:
        if len(frame) < _HEAD.size:
            raise UnreadableRequest(f"request header needs {_HEAD.size} bytes, got {len(frame)}")
        api_key, version, correlation_id, client_length = _HEAD.unpack_from(frame)
        pos = _HEAD.size
        client_id = None
        if client_length >= 0:
            end = pos + client_length
            if end > len(frame):
                raise UnreadableRequest("client id runs past the end of the request")
            client_id = frame[pos:end].decode("utf-8", "replace")
            pos = end
        versions = VERSIONS.get(api_key)
        if versions is None:
            raise UnreadableRequest(f"unknown api key {api_key}", "unknown_api_key")
        if not versions[0] <= version <= versions[1]:
            if api_key == _API_VERSIONS:  # answered, with the ranges served
                return Request(
                    api_key, version, correlation_id, client_id, None, received_s=received_s
                )
            raise UnreadableRequest(
                f"{ApiKey(api_key).api_name} version {version} is not supported "
                f"(served: {versions[0]}..{versions[1]})",
                "unsupported_version",
            )
        bounds, reader, flexible = _reader(api_key, version)
        try:
            if flexible:
                pos = skip_tagged_fields(frame, pos)
            bounds(frame, pos, len(frame))  # before the native reader: it trusts counts
            body, _ = reader(frame, pos)
        except Exception as exc:
            raise UnreadableRequest(
                f"{ApiKey(api_key).api_name} v{version} body does not parse: {exc!r}",
                "malformed_request",
            ) from None
        software = None
        if api_key == _API_VERSIONS and version >= 3:
            software = (body.client_software_name, body.client_software_version)
        return Request(
            api_key,
            version,
            correlation_id,
            client_id,
            body,
            received_s=received_s,
            client_software=software,
        )

    def encode_response_into(self, buffer: bytearray, request: RequestHeader, body: Any) -> None:
        start = len(buffer)
        buffer += _I32.pack(0)  # the length, filled in below
        buffer += _I32.pack(request.correlation_id)
        if body.__flexible__ and request.api_key != _API_VERSIONS:
            buffer.append(0)  # response header v1: no tagged fields
        write_into = getattr(body, "write_into", None)
        if write_into is not None:
            write_into(buffer)
        else:
            out = io.BytesIO()
            _writer(type(body))(out, body)
            buffer += out.getbuffer()
        LENGTH_PREFIX.pack_into(buffer, start, len(buffer) - start - 4)

    def encode_error_into(
        self, buffer: bytearray, request: RequestHeader, code: int, message: str
    ) -> None:
        assert isinstance(request, Request), "Kafka requests are refused only after decoding"
        self.encode_response_into(buffer, request, self.error_response(request, code, message))

    def trim_waiting(self, request: Request) -> None:
        """Nothing to drop: Kafka's error answers are built from the request's body (each
        partition asked for, with the code)."""


@functools.cache
def _reader(api_key: int, version: int) -> tuple[Walker, Any, bool]:
    """The bounds check of an API version's body (protocol/kafka_bounds.py), its reader,
    and whether its header is v2 (flexible)."""
    cls = request_class(api_key, version)
    return body_walker(cls), entity_reader(cls), bool(cls.__flexible__)


_writers: dict[type[Any], Callable[[Any, Any], None]] = {}


def _writer(cls: type[Any]) -> Callable[[Any, Any], None]:
    writer = _writers.get(cls)
    if writer is None:
        writer = _writers[cls] = entity_writer(cls)
    return writer
