from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.protocol import messages as m
from purgatory.protocol.api import (
    SCHEMAS,
    ApiKey,
    RequestDecoder,
    RequestError,
    RequestFrame,
    decode_request_body,
    decode_request_header,
    decode_response_body,
    decode_response_header,
    encode_request,
    encode_response_into,
)
from purgatory.protocol.errors import ErrorCode

DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()


def test_a_v0_fetch_response_has_no_wait_time_and_v1_appends_it() -> None:
    part = m.PartitionData(0, 0, 10, 0, b"")
    v0 = msgspec.msgpack.encode(m.FetchResponseV0([m.FetchableTopicResponse("t", [part])]))
    v1 = msgspec.msgpack.encode(m.FetchResponseV1([m.FetchableTopicResponse("t", [part])], 17))
    assert msgspec.msgpack.decode(v0) == [[["t", [[0, 0, 10, 0, b""]]]]]
    assert msgspec.msgpack.decode(v1)[-1] == 17
    # An old client decoding a newer response keeps what it knows.
    assert msgspec.msgpack.decode(v1, type=m.FetchResponseV0).responses[0].topic == "t"


def test_a_fetch_partition_without_a_leader_epoch_is_not_checked() -> None:
    """A client of the first form sends three fields per partition; the epoch added later
    (KIP-320) decodes as -1, which the broker does not check."""
    old = msgspec.msgpack.encode([0, 5, 100])
    assert msgspec.msgpack.decode(old, type=m.FetchPartition) == m.FetchPartition(0, 5, 100, -1)
    new = msgspec.msgpack.encode(m.FetchPartition(0, 5, 100, 7))
    assert msgspec.msgpack.decode(new) == [0, 5, 100, 7]


def test_requests_round_trip_through_the_envelope() -> None:
    body = m.FetchRequest(-1, 500, 1, 1024, [m.FetchTopic("t", [m.FetchPartition(0, 5, 100)])])
    frame = encode_request(ApiKey.FETCH, 1, 99, "me", body)
    header = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        1,
        1,
        99,
        "me",
    )
    assert decode_request_body(header) == body


class _Kept(RequestFrame):
    """A listener's request: the frame's five fields and what it keeps beside them."""

    listener: str = "ours"
    trusted: bool = False


def test_a_whole_frame_decodes_into_the_listeners_request_with_its_body_typed() -> None:
    body = m.FetchRequest(-1, 500, 1, 1024, [m.FetchTopic("t", [m.FetchPartition(0, 5, 100)])])
    request = RequestDecoder(_Kept).decode(encode_request(ApiKey.FETCH, 1, 99, "me", body))
    assert isinstance(request, _Kept)
    assert (request.api_key, request.api_version, request.correlation_id) == (1, 1, 99)
    assert (request.client_id, request.body) == ("me", body)
    assert (request.listener, request.trusted) == ("ours", False)


def test_a_frame_with_more_than_five_elements_cannot_set_the_listeners_fields() -> None:
    """The listener's own fields follow the five in the struct, so a longer array would
    fill them if decoded whole; it is read as header and body, the rest ignored."""
    body = m.FetchRequest(-1, 500, 1, 1024, [])
    frame = msgspec.msgpack.encode([1, 1, 99, "me", body, "theirs", True])
    request = RequestDecoder(_Kept).decode(frame)
    assert (request.correlation_id, request.body) == (99, body)
    assert (request.listener, request.trusted) == ("ours", False)


def test_a_frame_the_whole_decode_refuses_gets_the_two_step_error_with_its_header() -> None:
    decoder = RequestDecoder(_Kept)
    with pytest.raises(RequestError, match="malformed request body") as wrong_body:
        decoder.decode(msgspec.msgpack.encode([0, 0, 5, None, {"acks": "yes"}]))
    with pytest.raises(RequestError, match="version 9 is not supported") as unknown:
        decoder.decode(msgspec.msgpack.encode([1, 9, 6, None, []]))
    assert wrong_body.value.code == ErrorCode.INVALID_REQUEST
    assert unknown.value.code == ErrorCode.UNSUPPORTED_VERSION
    assert [e.value.header.correlation_id for e in (wrong_body, unknown)] == [5, 6]
    with pytest.raises(msgspec.DecodeError):
        decoder.decode(b"\x95\x00\x00")  # the usual first bytes, then nothing


def test_a_request_level_error_travels_in_the_response_header() -> None:
    buffer = bytearray()
    encode_response_into(buffer, 7, None, ErrorCode.UNSUPPORTED_VERSION, "no")
    header = decode_response_header(bytes(buffer[4:]))
    assert (header.correlation_id, header.error_code, header.error_message) == (7, 35, "no")
    assert int.from_bytes(buffer[:4], "big") == len(buffer) - 4


def test_an_unknown_api_key_and_an_unknown_version_are_named_in_the_error() -> None:
    with pytest.raises(RequestError) as unknown:
        decode_request_body(decode_request_header(msgspec.msgpack.encode([77, 0, 1, None, []])))
    assert unknown.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(
        RequestError, match=r"Fetch version 9 is not supported \(supported: 0..2\)"
    ) as version:
        decode_request_body(decode_request_header(msgspec.msgpack.encode([1, 9, 1, None, []])))
    assert version.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_a_body_of_the_wrong_shape_is_an_invalid_request() -> None:
    header = decode_request_header(msgspec.msgpack.encode([0, 0, 1, None, {"acks": "yes"}]))
    with pytest.raises(RequestError) as err:
        decode_request_body(header)
    assert err.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(("key", "version"), sorted(SCHEMAS))
def test_every_api_version_is_in_the_protocol_document(key: ApiKey, version: int) -> None:
    request, response = SCHEMAS[(key, version)]
    heading = re.search(rf"^#+ {key.api_name} \(key {int(key)}[,)]", DOC, re.M)
    assert heading, f"{key.api_name} has no section"
    section = DOC[heading.end() :].split("\n### ", 1)[0]
    assert re.search(rf"\bv{version}\b", section), f"{key.api_name} v{version} is not described"
    for struct in (request, response):
        for field in struct.__struct_fields__:
            assert f"`{field}`" in DOC, f"{struct.__name__}.{field} is not documented"


def test_every_error_code_is_in_the_protocol_document() -> None:
    for code in ErrorCode:
        assert re.search(rf"\|\s*{code.name}\s*\|\s*{int(code)}\s*\|", DOC), f"{code.name} missing"


def test_response_bodies_decode_with_their_api_version() -> None:
    body = m.ApiVersionsResponse(0, [m.ApiVersionRange(1, 0, 1)])
    raw = msgspec.Raw(msgspec.msgpack.encode(body))
    assert decode_response_body(ApiKey.API_VERSIONS, 0, raw) == body


@given(st.binary(max_size=300))
def test_random_frames_decode_to_a_request_or_a_clear_error(frame: bytes) -> None:
    try:
        header = decode_request_header(frame)
    except msgspec.DecodeError:
        return  # the broker closes the connection
    try:
        decode_request_body(header)
    except RequestError as exc:
        assert exc.code in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION)


@given(
    st.sampled_from(sorted(SCHEMAS)),
    st.lists(st.integers(-(2**63), 2**64 - 1) | st.binary() | st.text() | st.none(), max_size=6),
)
def test_random_bodies_for_real_apis_never_escape_as_other_errors(key_version, body) -> None:  # type: ignore[no-untyped-def]
    (key, version) = key_version
    header = decode_request_header(msgspec.msgpack.encode([int(key), version, 1, None, body]))
    try:
        decode_request_body(header)
    except RequestError as exc:
        assert exc.code == ErrorCode.INVALID_REQUEST
