"""The Kafka codec without sockets: the hand-written FetchResponse against kio's writer,
header handling, and a fuzzed decoder that only ever reads or refuses."""

from __future__ import annotations

import contextlib
import datetime
import io
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from purgatory.broker.network.kafka_codec import KafkaCodec
from purgatory.broker.network.request_channel import UnreadableRequest, speaks_kafka
from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_fetch import FetchPartition, FetchResponseBody, FetchTopic
from purgatory.protocol.kafka_schemas import VERSIONS, build, millis, response_module
from tests.kafka_wire import request, request_frame

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
BATCHES = b"\x00" * 70  # record bytes go out as they are


# (producer id, first offset) of aborted transactions, as a read_committed fetch gets them
ABORTED = ((7, 4), (9, 6))


def kio_fetch_response(
    version: int, aborted: tuple[tuple[int, int], ...] | None = (), lso: int = 12
) -> bytes:
    schema = response_module(ApiKey.FETCH, version)
    kio_aborted = (
        None
        if aborted is None
        else tuple(
            build(schema.AbortedTransaction, producer_id=pid, first_offset=first)
            for pid, first in aborted
        )
    )
    partitions = [
        build(
            schema.PartitionData,
            partition_index=i,
            error_code=error,
            high_watermark=hw,
            last_stable_offset=stable,
            log_start_offset=3,
            aborted_transactions=txns,
            preferred_read_replica=-1,
            records=records,
        )
        for i, error, hw, stable, txns, records in (
            (0, 0, 12, lso, kio_aborted, BATCHES),
            (2, 6, -1, -1, None, b""),
        )
    ]
    topic = build(
        schema.FetchableTopicResponse, topic="orders", topic_id=TOPIC_ID, partitions=partitions
    )
    body = build(
        schema.FetchResponse, throttle_time=0, error_code=0, session_id=0, responses=[topic]
    )
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def ours(
    version: int, wait_ms: int = 0, aborted: tuple[tuple[int, int], ...] | None = (), lso: int = 12
) -> bytes:
    topic = FetchTopic(
        "orders",
        TOPIC_ID.bytes,
        [
            FetchPartition(0, 0, 12, 3, BATCHES, lso, aborted),
            FetchPartition(2, 6, -1, 3, b"", -1, None),
        ],
    )
    out = bytearray()
    FetchResponseBody(version, [topic], wait_ms).write_into(out)
    return bytes(out)


@pytest.mark.parametrize("version", range(4, 17))
def test_the_hand_written_fetch_response_is_kafkas_byte_for_byte(version: int) -> None:
    expected = kio_fetch_response(version)
    if version < 12:
        assert ours(version) == expected
    else:  # the same, plus our one top-level tagged field in place of "no tagged fields"
        assert ours(version)[:-8] + b"\x00" == expected


@pytest.mark.parametrize("version", range(4, 17))
@pytest.mark.parametrize("aborted", [None, (), ABORTED], ids=["uncommitted", "none", "two"])
def test_the_last_stable_offset_and_aborted_transactions_are_kafkas_byte_for_byte(
    version: int, aborted: tuple[tuple[int, int], ...] | None
) -> None:
    """A read_committed fetch's LSO (below the high watermark while a transaction is open)
    and aborted transactions; read_uncommitted's null array."""
    expected = kio_fetch_response(version, aborted, lso=5)
    written = ours(version, aborted=aborted, lso=5)
    assert (written if version < 12 else written[:-8] + b"\x00") == expected


@pytest.mark.parametrize("version", range(12, 17))
def test_clients_that_do_not_know_the_wait_time_tag_skip_it(version: int) -> None:
    """kafka-python's own parser (a real client's) reads the response around the tag."""
    from kafka.protocol.consumer import FetchResponse

    decoded = FetchResponse[version].decode(ours(version, wait_ms=480))
    partitions = decoded.responses[0].partitions
    assert [p.partition_index for p in partitions] == [0, 2]
    assert partitions[0].records == BATCHES and partitions[1].error_code == 6


def codec() -> KafkaCodec:
    return KafkaCodec(lambda request, code, message: None)


def test_request_headers_v1_and_v2_are_read_with_the_client_id() -> None:
    flexible = request_frame(
        ApiKey.API_VERSIONS,
        3,
        5,
        request(ApiKey.API_VERSIONS, 3, client_software_name="n", client_software_version="1"),
        client_id="me",
    )
    legacy = request_frame(
        ApiKey.API_VERSIONS, 0, 6, request(ApiKey.API_VERSIONS, 0), client_id="you"
    )
    a = codec().decode(flexible[4:], 0.0)
    b = codec().decode(legacy[4:], 0.0)
    assert (a.api_version, a.correlation_id, a.client_id, a.client_software) == (
        3,
        5,
        "me",
        ("n", "1"),
    )
    assert (b.api_version, b.correlation_id, b.client_id, b.client_software) == (0, 6, "you", None)
    assert speaks_kafka(flexible[4:]) and not speaks_kafka(b"\x95\x12")


def test_versions_outside_the_served_ranges_are_refused_except_api_versions() -> None:
    _lo, hi = VERSIONS[ApiKey.PRODUCE]
    frame = bytearray(request_frame(ApiKey.API_VERSIONS, 0, 1, request(ApiKey.API_VERSIONS, 0))[4:])
    frame[2:4] = (hi + 5).to_bytes(2, "big")
    assert codec().decode(bytes(frame), 0.0).body is None  # answered by the API layer
    frame[0:2] = int(ApiKey.PRODUCE).to_bytes(2, "big")
    with pytest.raises(UnreadableRequest) as caught:
        codec().decode(bytes(frame), 0.0)
    assert caught.value.reason == "unsupported_version"


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_read_or_refused_never_raised_otherwise(data: bytes) -> None:
    with contextlib.suppress(UnreadableRequest):
        codec().decode(data, 0.0)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(VERSIONS)), st.data())
def test_mutated_valid_requests_are_read_or_refused(api_key: ApiKey, data: st.DataObject) -> None:
    lo, hi = VERSIONS[api_key]
    version = data.draw(st.integers(lo, hi))
    # A header that is right for the API, then random body bytes.
    header = request_frame(ApiKey.API_VERSIONS, 0, 1, request(ApiKey.API_VERSIONS, 0))[4:14]
    frame = int(api_key).to_bytes(2, "big") + version.to_bytes(2, "big") + header[4:]
    body = data.draw(st.binary(max_size=120))
    with contextlib.suppress(UnreadableRequest):
        codec().decode(frame + (b"\x00" if version >= 9 else b"") + body, 0.0)


def test_the_protocol_document_lists_every_served_kafka_api_and_range() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    section = doc.split("## 7. Kafka's wire protocol", 1)[1]
    for key, (lo, hi) in VERSIONS.items():
        assert f"| {key.api_name} ({int(key)}) | {lo}-{hi} |" in section, key.api_name


def test_kafka_durations_are_read_as_exact_milliseconds() -> None:
    """A request's timeout or max wait comes from kio as a timedelta; through float seconds
    (``total_seconds() * 1000``) 1001 ms read as 1000."""
    for ms in [-1, 0, *range(1, 400_000), 2**31 - 1]:
        assert millis(datetime.timedelta(milliseconds=ms)) == ms
