"""The codec of our own protocol: framed MessagePack (docs/protocol.md).

A request-level error travels in the response header (``error_code``, ``error_message``)
with no body; per-partition errors are in the bodies KafkaApis builds."""

from __future__ import annotations

import msgspec

from purgatory.broker.network.request_channel import (
    Request,
    RequestHeader,
    UnreadableRequest,
)
from purgatory.protocol.api import ApiKey, RequestDecoder, encode_response_into

_FETCH = int(ApiKey.FETCH)
_decoder = RequestDecoder(Request)


class MsgpackCodec:
    def decode(self, frame: bytes, received_s: float) -> Request:
        try:
            request = _decoder.decode(frame)
        except msgspec.DecodeError as exc:
            raise UnreadableRequest(f"request header does not decode: {exc}") from None
        request.received_s = received_s
        if request.api_key == _FETCH and request.body.replica_id >= 0:
            request.from_follower = True
        return request

    def encode_response_into(
        self, buffer: bytearray, request: RequestHeader, body: msgspec.Struct
    ) -> None:
        encode_response_into(buffer, request.correlation_id, body)

    def encode_error_into(
        self, buffer: bytearray, request: RequestHeader, code: int, message: str
    ) -> None:
        encode_response_into(buffer, request.correlation_id, None, code, message)

    def trim_waiting(self, request: Request) -> None:
        """Our answers, errors included, need only the correlation id: the body goes (a
        waiting fetch's body holds two lists)."""
        request.body = None
