"""Whatever a socket sends, the broker answers or closes that connection, never crashes,
never blocks other connections, never alters a log, and counts each case."""

from __future__ import annotations

import asyncio
import struct

import msgspec
import pytest

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, decode_response_header
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import encode_batch
from tests.integration.test_produce_fetch import fetch_request, produce_request
from tests.support import bootstrap, running_cluster


async def raw(broker: Broker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", broker.port)


async def closed_by_broker(reader: asyncio.StreamReader) -> bool:
    data = await asyncio.wait_for(reader.read(), timeout=10)
    return data == b""


async def answer(reader: asyncio.StreamReader) -> tuple[int, int, str | None]:
    (size,) = struct.unpack(">I", await asyncio.wait_for(reader.readexactly(4), 10))
    header = decode_response_header(await reader.readexactly(size))
    return header.correlation_id, header.error_code, header.error_message


def frame(value: object) -> bytes:
    body = msgspec.msgpack.encode(value)
    return struct.pack(">I", len(body)) + body


async def log_unchanged_and_broker_serving(broker: Broker, topic: str = "t") -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    response = await conn.send(ApiKey.FETCH, fetch_request(topic, 0, 0))
    part = response.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1  # only the one good record
    await conn.close()


@pytest.fixture
async def seeded(broker: Broker) -> Broker:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t")
    conn = await Connection.open("127.0.0.1", broker.port)
    await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"good"]))
    await conn.close()
    return broker


@pytest.mark.parametrize(
    ("name", "payload", "reason"),
    [
        (
            "garbage that is not msgpack",
            struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1",
            "unreadable_header",
        ),
        ("length over the limit", struct.pack(">I", 104857601), "frame_too_large"),
        ("negative length", struct.pack(">i", -7), "frame_too_large"),
        ("a header of the wrong shape", frame({"api_key": 0}), "unreadable_header"),
        ("an empty frame", struct.pack(">I", 0), "unreadable_header"),
        # [0, 0, 1, <a str that is not UTF-8>, []]
        (
            "a client id that is not UTF-8",
            struct.pack(">I", 7) + b"\x95\x00\x00\x01\xa1\x80\x90",
            "unreadable_header",
        ),
        # A Produce header whose body is 100,000 nested one-element arrays: msgspec gives
        # up with RecursionError (from about 1,000 deep, by the stack left), which must not
        # escape the codec.
        (
            "a body nested 100,000 deep",
            struct.pack(">I", 100_007) + b"\x95\x00\x00\x01\xa1c" + b"\x91" * 100_000 + b"\x01",
            "unreadable_header",
        ),
    ],
)
async def test_unreadable_input_closes_only_that_connection(
    seeded: Broker, name: str, payload: bytes, reason: str
) -> None:
    bystander = await Connection.open("127.0.0.1", seeded.port)
    reader, writer = await raw(seeded)
    writer.write(payload)
    await writer.drain()
    assert await closed_by_broker(reader), name
    assert seeded.metrics.bad_requests[reason] == 1
    assert (await bystander.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())).error_code == 0
    await bystander.close()
    await log_unchanged_and_broker_serving(seeded)


async def test_a_truncated_frame_blocks_nobody_and_closing_it_is_harmless(seeded: Broker) -> None:
    _, writer = await raw(seeded)
    writer.write(struct.pack(">I", 1000) + b"\x95partial")
    await writer.drain()
    await log_unchanged_and_broker_serving(seeded)  # served while the partial frame waits
    writer.close()
    await writer.wait_closed()
    await log_unchanged_and_broker_serving(seeded)


@pytest.mark.parametrize(
    ("request_value", "code", "message"),
    [
        ([77, 0, 5, "x", []], ErrorCode.INVALID_REQUEST, "unknown api_key 77"),
        ([1, 9, 5, "x", []], ErrorCode.UNSUPPORTED_VERSION, "Fetch version 9"),
        (
            [0, 0, 5, "x", ["not", "a", "produce"]],
            ErrorCode.INVALID_REQUEST,
            "malformed request body",
        ),
        ([1, 1, 5, "x", [-1, 0, 1, -5, []]], ErrorCode.INVALID_REQUEST, "must not be negative"),
        (
            [1, 1, 5, "x", [-1, 0, 1, 100, [["t", [[0, -3, 10]]]]]],
            ErrorCode.INVALID_REQUEST,
            "must not be negative",
        ),
    ],
)
async def test_readable_but_wrong_requests_get_an_error_and_the_connection_stays(
    seeded: Broker, request_value: list, code: ErrorCode, message: str
) -> None:
    reader, writer = await raw(seeded)
    writer.write(frame(request_value))
    correlation_id, error_code, error_message = await answer(reader)
    assert (correlation_id, error_code) == (5, code)
    assert message in (error_message or "")
    writer.write(frame([18, 0, 6, "x", []]))  # the same connection still works
    assert (await answer(reader))[:2] == (6, 0)
    writer.close()
    await log_unchanged_and_broker_serving(seeded)


async def test_a_million_partitions_in_one_request_are_refused_quickly(seeded: Broker) -> None:
    conn = await Connection.open("127.0.0.1", seeded.port)
    many = m.FetchRequest(
        -1, 0, 1, 100, [m.FetchTopic("t", [m.FetchPartition(i, 0, 1) for i in range(1_000_000)])]
    )
    with pytest.raises(KafkaError, match=r"INVALID_REQUEST.*1000000 partitions"):
        await conn.send(ApiKey.FETCH, many)
    await conn.close()
    await log_unchanged_and_broker_serving(seeded)


@pytest.mark.parametrize(
    ("records", "code"),
    [
        (b"short", ErrorCode.CORRUPT_MESSAGE),
        (encode_batch([(None, b"v")])[:-1] + b"\x00", ErrorCode.CORRUPT_MESSAGE),
        (b"\x00" * 43, ErrorCode.CORRUPT_MESSAGE),
        (encode_batch([(None, b"x" * 2_000_000)]), ErrorCode.MESSAGE_TOO_LARGE),
    ],
)
async def test_bad_batches_are_refused_and_nothing_is_appended(
    seeded: Broker, records: bytes, code: ErrorCode
) -> None:
    conn = await Connection.open("127.0.0.1", seeded.port)
    request = m.ProduceRequest(
        1, 1000, [m.TopicProduceData("t", [m.PartitionProduceData(0, records)])]
    )
    response = await conn.send(ApiKey.PRODUCE, request)
    assert response.responses[0].partitions[0].error_code == code
    assert response.responses[0].partitions[0].error_message
    await conn.close()
    await log_unchanged_and_broker_serving(seeded)
    assert seeded.metrics.errors[("Produce", code)] == 1


async def test_invalid_acks_are_refused_per_partition(seeded: Broker) -> None:
    conn = await Connection.open("127.0.0.1", seeded.port)
    response = await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"x"], acks=5))
    assert response.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    await conn.close()
    await log_unchanged_and_broker_serving(seeded)


async def test_a_failed_acks_zero_produce_closes_the_connection(seeded: Broker) -> None:
    reader, writer = await raw(seeded)
    batch = encode_batch([(None, b"x")])
    writer.write(frame([0, 0, 9, "x", [0, 1000, [["t", [[5, batch]]]]]]))
    assert await closed_by_broker(reader)
    await log_unchanged_and_broker_serving(seeded)


async def test_random_garbage_from_many_connections_never_takes_the_broker_down() -> None:
    import random

    rng = random.Random(7)
    async with running_cluster(1, socket_request_max_bytes=4096) as brokers:
        b = brokers[0]
        for _ in range(50):
            _, writer = await raw(b)
            chunk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            writer.write(chunk)
            await writer.drain()
            writer.close()
        conn = await Connection.open("127.0.0.1", b.port)
        assert (await conn.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())).error_code == 0
        await conn.close()


async def test_a_record_header_that_is_not_utf8_is_a_corrupt_message(seeded: Broker) -> None:
    import zlib

    batch = bytearray(encode_batch([(None, b"v", 0, [("hé", b"x")])]))
    i = batch.index("hé".encode())
    batch[i + 1] = 0xFF
    struct.pack_into(">I", batch, 17, zlib.crc32(bytes(batch[21:])))
    conn = await Connection.open("127.0.0.1", seeded.port)
    request = m.ProduceRequest(
        1, 1000, [m.TopicProduceData("t", [m.PartitionProduceData(0, bytes(batch))])]
    )
    response = await conn.send(ApiKey.PRODUCE, request)
    assert response.responses[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    await conn.close()
    await log_unchanged_and_broker_serving(seeded)
