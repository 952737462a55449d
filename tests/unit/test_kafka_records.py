"""Kafka's record batch v2 (protocol/kafka_records.py), checked against kafka-python's own
implementation of the format (a dev dependency) in both directions, for every codec."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from purgatory.protocol import kafka_records
from purgatory.protocol.records import (
    CorruptRecordError,
    Header,
    assign_offsets,
    decode_records,
    encode_batch,
    is_kafka_batch,
    iter_batches,
    validate_batch,
)
from tests.harness import Harness

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000

binary = st.none() | st.binary(max_size=300)
records_strategy = st.lists(
    st.tuples(
        st.integers(TS - 10**6, TS + 10**6),
        binary,
        binary,
        st.lists(st.builds(Header, st.text(max_size=20), binary), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


def kafka_python_batch(records: list[tuple[int, Any, Any, list[Header]]], codec: str) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=10**7,
    )
    for offset, (ts, key, value, headers) in enumerate(records):
        builder.append(offset, ts, key, value, [(h.key, h.value) for h in headers])
    return bytes(builder.build())


def as_tuples(records: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


@pytest.mark.parametrize("codec", list(CODECS))
def test_a_batch_kafka_python_builds_is_validated_without_decompressing_and_decodes_whole(
    codec: str,
) -> None:
    records = [
        (TS + i, f"k{i}".encode(), f"value {i}".encode() * 20, [Header("h", b"v")])
        for i in range(50)
    ]
    records.append((TS + 3, None, None, []))  # null key and value, an earlier timestamp
    batch = kafka_python_batch(records, codec)
    info = validate_batch(batch)
    assert (info.record_count, info.base_timestamp, info.max_timestamp, info.size) == (
        51,
        TS,
        TS + 49,
        len(batch),
    )
    stored = assign_offsets(batch, 1000, 7)  # what the log does: the first 16 bytes
    assert validate_batch(stored).record_count == 51  # the CRC does not cover them
    got = decode_records(stored)
    assert as_tuples(got) == [
        (1000 + i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(records)
    ]


@given(records_strategy)
@settings(max_examples=60, deadline=None)
def test_our_encoding_reads_back_here_and_in_kafka_python(
    records: list[tuple[int, Any, Any, list[Header]]],
) -> None:
    batch = kafka_records.encode(records, base_offset=42, leader_epoch=3)
    assert validate_batch(batch).record_count == len(records)
    expected = [(42 + i, *r) for i, r in enumerate(records)]
    assert as_tuples(decode_records(batch)) == expected
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc() and theirs.base_offset == 42
    assert [
        (r.offset, r.timestamp, r.key, r.value, [Header(k, v) for k, v in r.headers])
        for r in theirs
    ] == expected


def test_a_batch_of_ours_becomes_the_same_records_in_a_v2_batch() -> None:
    ours = assign_offsets(
        encode_batch([(b"k", b"v", TS, [("h", None)]), (None, b"w", TS + 5)]), 10, 2
    )
    converted = kafka_records.from_records(decode_records(ours), 10, 2)
    assert as_tuples(decode_records(converted)) == as_tuples(decode_records(ours))
    assert is_kafka_batch(converted) and not is_kafka_batch(ours)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:-1], "batch_length"),
        (lambda b: b[:30], "shorter than its v2 header"),
        (lambda b: b[:70] + bytes([b[70] ^ 0xFF]) + b[71:], "CRC-32C"),
        # attributes say codec 7 (no such codec), CRC fixed up to match.
        (lambda b: recrc(b[:21] + b"\x00\x07" + b[23:]), "codec"),
        # last_offset_delta 5 for 2 records.
        (lambda b: recrc(b[:23] + (5).to_bytes(4, "big") + b[27:]), "last_offset_delta"),
    ],
)
def test_a_damaged_batch_is_corrupt(damage: Any, message: str) -> None:
    batch = kafka_records.encode([(TS, b"k", b"v", []), (TS, None, b"w", [])])
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(damage(batch))


def recrc(batch: bytes) -> bytes:
    from crc32c import crc32c

    return batch[:17] + crc32c(batch[21:]).to_bytes(4, "big") + batch[21:]


@given(st.binary(min_size=61, max_size=400))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_after_a_v2_header_never_escape_as_another_error(tail: bytes) -> None:
    """A decoder fed garbage that passes the CRC (a client's bug, not a network error)
    says the batch is corrupt; it never raises anything else."""
    batch = bytearray(recrc(bytes(16) + b"\x02" + bytes(4) + tail))
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    for call in (validate_batch, decode_records):
        with contextlib.suppress(CorruptRecordError):
            call(bytes(batch))


async def test_one_partition_log_holds_both_formats_at_consecutive_offsets() -> None:
    h = Harness()
    h.create("t")
    try:
        assert (await h.produce("t", [b"ours-0", b"ours-1"], acks=1)).error == 0
        theirs = kafka_python_batch(
            [(TS, None, b"theirs-0", []), (TS, None, b"theirs-1", [])], "lz4"
        )
        responses, _ = h.replica_manager.append_records(30_000, 1, [(("t", 0), theirs)])
        assert responses[0][1].error == 0 and responses[0][1].base_offset == 2
        assert (await h.produce("t", [b"ours-2"], acks=1)).error == 0
        end = h.partition("t").log.log_end_offset
        h.follower_fetch(1, "t", end)  # both followers hold it all: the high watermark moves
        h.follower_fetch(2, "t", end)
        fetched = await h.fetch("t", 0, max_wait_ms=0)
        records = decode_records(fetched.partitions[0][1].records)
        assert [(r.offset, r.value) for r in records] == [
            (0, b"ours-0"),
            (1, b"ours-1"),
            (2, b"theirs-0"),
            (3, b"theirs-1"),
            (4, b"ours-2"),
        ]
    finally:
        await h.shutdown()


def test_kafka_readers_get_v2_batches_untouched_and_ours_rewritten_as_v2() -> None:
    ours = assign_offsets(
        encode_batch([(b"k1", b"v1", TS, [("h", b"x")]), (None, b"v2", TS + 5)]), 0, 3
    )
    v2 = kafka_records.encode([(TS + 9, b"k3", b"v3", ())], base_offset=2, leader_epoch=3)
    assert kafka_records.as_kafka_batches(v2) is v2  # nothing to convert: not even a copy
    mixed = kafka_records.as_kafka_batches(ours + v2)
    assert all(is_kafka_batch(b) for b in _batches(mixed))
    assert decode_records(mixed) == decode_records(ours + v2)  # offsets, keys, values, ...
    assert [DefaultRecordBatch(b).base_offset for b in _batches(mixed)] == [0, 2]
    # A fetch cut inside a batch: a partial v2 batch stays (Kafka clients expect it and
    # fetch it whole next time); a partial batch of ours cannot be converted and is dropped.
    assert kafka_records.as_kafka_batches(v2 + ours[:-3]) == v2
    assert kafka_records.as_kafka_batches(ours + v2[:-3]) == mixed[: len(mixed) - 3]


def _batches(data: bytes) -> list[bytes]:
    return [bytes(b) for b in iter_batches(data)]


# -- transaction markers (Kafka's EndTransactionMarker) ---------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_a_transaction_marker_is_a_control_batch_kafkas_readers_recognise(commit: bool) -> None:
    marker = kafka_records.end_txn_marker(42, 3, commit, 7, 1_700_000_000_000)
    info = kafka_records.validate(marker)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (42, 3, -1)
    assert info.transactional and info.control and info.record_count == 1
    assert kafka_records.parse_end_txn_marker(marker) == (commit, 7)
    read = DefaultRecordBatch(marker)  # kafka-python's reader
    assert read.is_control_batch and read.is_transactional
    (record,) = list(read)
    assert record.key == (b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00")
    assert record.value == b"\x00\x00\x00\x00\x00\x07"
    assert kafka_records.decode(marker) == []  # never an application record


def test_a_transactional_batch_is_accepted_and_flagged() -> None:
    batch = kafka_records.encode(
        [(1000, None, b"v", [])],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    info = kafka_records.validate(batch)
    assert info.transactional and not info.control
    assert DefaultRecordBatch(batch).is_transactional
    assert kafka_records.stored_info(batch) == info


def test_a_control_batch_of_another_type_is_not_a_transaction_marker() -> None:
    leader_change = bytearray(kafka_records.end_txn_marker(1, 0, True, 0, 0))
    key_at = kafka_records.HEADER_SIZE + 5  # length, attributes, deltas, key length: a byte each
    assert leader_change[key_at : key_at + 4] == b"\x00\x00\x00\x01"  # version 0, COMMIT
    leader_change[key_at + 3] = 2  # KRaft's LEADER_CHANGE
    with pytest.raises(CorruptRecordError):
        kafka_records.parse_end_txn_marker(leader_change)
    with pytest.raises(CorruptRecordError):
        kafka_records.parse_end_txn_marker(kafka_records.encode([(0, None, b"v", [])]))
