"""A minimal Kafka-protocol client for tests that need exact requests: kio's schemas write
the requests and read the responses, on an asyncio stream."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import io
import struct
import sys
import uuid
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)

from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_schemas import build, is_flexible, request_class, response_class


def request_frame(
    api_key: int, version: int, correlation_id: int, body: Any, client_id: str = "wire"
) -> bytes:
    header = (
        struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id.encode()
    )
    if is_flexible(api_key, version):
        header += b"\x00"
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    payload = header + out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def schema(api_key: ApiKey, version: int) -> Any:
    """The kio module of a request version (its nested entity classes)."""
    return sys.modules[request_class(api_key, version).__module__]


def request(api_key: ApiKey, version: int, **values: Any) -> Any:
    """A kio request body from plain values (durations in ms)."""
    cls = request_class(api_key, version)
    for name in ("timeout", "max_wait"):
        if isinstance(values.get(name), int):
            values[name] = datetime.timedelta(milliseconds=values[name])
    return cls(**values)


_WAIT_TIME = b"\x01\xe0\x05\x04"  # one tagged field: KIP-736's wait time, 4 bytes


class KafkaWire:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str = "wire"
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id  # every request header's (a client quota's entity)
        self.correlation_id = 0

    @classmethod
    async def open(cls, port: int, client_id: str = "wire") -> KafkaWire:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    async def send_raw(self, frame: bytes) -> None:
        self.writer.write(frame)
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    async def call(
        self, api_key: ApiKey, version: int, body: Any, response_version: int | None = None
    ) -> Any:
        self.correlation_id += 1
        frame = request_frame(api_key, version, self.correlation_id, body, self.client_id)
        await self.send_raw(frame)
        frame = await self.read_frame()
        if api_key == ApiKey.FETCH and frame[-8:-4] == _WAIT_TIME:
            frame = frame[:-8] + b"\x00"  # kio refuses tags it does not know: drop ours
        (correlation_id,) = struct.unpack_from(">i", frame)
        assert correlation_id == self.correlation_id
        answer_version = version if response_version is None else response_version
        pos = 4
        if api_key != ApiKey.API_VERSIONS and is_flexible(api_key, answer_version):
            assert frame[pos] == 0  # no header tagged fields
            pos += 1
        cls = response_class(api_key, answer_version)
        decoded, size = entity_reader(cls)(frame, pos)
        assert pos + size == len(frame)
        return decoded

    async def closed(self, timeout_s: float = 5.0) -> bool:
        """Whether the broker closed the connection (EOF) within ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            return await self.reader.read(1) == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


__all__ = ["KafkaWire", "build", "request", "request_frame", "schema"]


def sample_request(api_key: int, version: int, width: int = 1) -> Any:
    """A request of this API version with every field set and ``width`` elements in every
    array (each nested entity filled the same way): valid bytes to mutate and fuzz."""
    return _sample(request_class(api_key, version), width)


_SAMPLE_VALUES: dict[str, Any] = {
    "bool": True,
    "string": "s",
    "bytes": b"b",
    "records": b"",
    "uuid": uuid.UUID(int=7),
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=5),
}


def _sample(cls: type, width: int) -> Any:
    values = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, (EntityField, EntityTupleField)):
            one = _sample(kind.type_, width)
            values[field.name] = (one,) * width if isinstance(kind, EntityTupleField) else one
            continue
        value = _SAMPLE_VALUES.get(field.metadata["kafka_type"], 1)
        values[field.name] = (value,) * width if isinstance(kind, PrimitiveTupleField) else value
    return cls(**values)
