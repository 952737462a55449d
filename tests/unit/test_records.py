from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.protocol.records import (
    CorruptRecordError,
    Header,
    assign_offsets,
    decode_records,
    encode_batch,
    iter_batches,
    validate_batch,
)


def test_a_batch_round_trips_keys_values_headers_and_timestamps() -> None:
    batch = encode_batch(
        [(b"k1", b"v1", 1000, [("h", b"x")]), (None, b"v2", 1005, []), (b"k3", None, 999, [])]
    )
    info = validate_batch(batch)
    assert (info.record_count, info.base_timestamp, info.max_timestamp) == (3, 999, 1005)
    records = decode_records(assign_offsets(batch, 42, 7))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (42, b"k1", b"v1", 1000),
        (43, None, b"v2", 1005),
        (44, b"k3", None, 999),
    ]
    assert records[0].headers == [Header("h", b"x")]


def test_assigning_offsets_keeps_the_records_and_their_crc_intact() -> None:
    batch = encode_batch([(None, b"x" * 50)] * 4)
    stamped = assign_offsets(batch, 1_000_000, 3)
    assert stamped[16:] == batch[16:]
    validate_batch(stamped)


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda b: b[:-1], "batch_length"),
        (lambda b: b[:20], "shorter than its header"),
        (lambda b: b[:16] + bytes([9]) + b[17:], "magic"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC"),
    ],
)
def test_damaged_batches_are_refused_with_the_reason(corrupt, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(corrupt(encode_batch([(b"k", b"v")] * 3)))


def test_a_batch_that_lies_about_its_record_count_is_refused() -> None:
    batch = bytearray(encode_batch([(b"k", b"v")] * 3))
    struct.pack_into(">i", batch, 39, 4)  # record_count
    tail = bytes(batch[21:])
    import zlib

    struct.pack_into(">I", batch, 17, zlib.crc32(tail))  # a consistent CRC over the lie
    with pytest.raises(CorruptRecordError, match="record_count is 4 but 3"):
        validate_batch(bytes(batch))


def test_a_partial_trailing_batch_is_dropped_like_a_fetch_cut_at_max_bytes() -> None:
    a = assign_offsets(encode_batch([(None, b"a")]), 0, 0)
    b = assign_offsets(encode_batch([(None, b"b")]), 1, 0)
    assert [bytes(x) for x in iter_batches(a + b[:-3])] == [a]
    assert [r.value for r in decode_records(a + b)] == [b"a", b"b"]


@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=50),
            st.integers(0, 2**40),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 2**40),
)
def test_encoding_then_decoding_gives_back_every_record(records, base) -> None:  # type: ignore[no-untyped-def]
    batch = encode_batch(records)
    assert validate_batch(batch).record_count == len(records)
    decoded = decode_records(assign_offsets(batch, base, 0))
    assert [(r.key, r.value, r.timestamp) for r in decoded] == records
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))


def test_a_header_name_that_is_not_utf8_is_a_corrupt_batch_not_a_crash() -> None:
    import zlib

    batch = bytearray(encode_batch([(None, b"v", 0, [("hé", b"x")])]))
    i = batch.index("hé".encode())
    batch[i + 1] = 0xFF  # break the UTF-8 of the header name, then make the CRC agree
    struct.pack_into(">I", batch, 17, zlib.crc32(bytes(batch[21:])))
    with pytest.raises(CorruptRecordError, match="do not decode"):
        validate_batch(bytes(batch))
    with pytest.raises(CorruptRecordError):
        decode_records(assign_offsets(bytes(batch), 0, 0))
