"""Kafka's LogValidator (broker/log/log_validator.py): every kind of batch a consumer
could not read is refused with Kafka's error, and every batch a real client builds (each
codec, kafka-python's builder) passes with its records' largest timestamp."""

from __future__ import annotations

import contextlib
import gzip
import struct
from collections.abc import Callable

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.broker.log.log_validator import LogValidator, RecordValidationError
from purgatory.protocol import kafka_records
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import encode_batch
from tests.unit.test_kafka_records import CODECS, kafka_python_batch, recrc

NOW = 1_700_000_000_000
HOUR = 3_600_000
LIMIT = 1 << 20
validator = LogValidator(2**63 - 1, HOUR, LIMIT)


def batch(n: int = 1, ts: int = NOW) -> bytes:
    return kafka_records.encode([(ts + i, b"k", b"v%d" % i, []) for i in range(n)])


def patched(data: bytes, fmt: str, at: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return recrc(bytes(out))


def with_count(data: bytes, count: int) -> bytes:
    """``record_count`` and ``last_offset_delta`` both say ``count`` (a consistent lie)."""
    return patched(patched(data, ">i", 57, count), ">i", 23, count - 1)


def compressed(data: bytes, codec: int, payload: bytes) -> bytes:
    out = bytearray(data[:61]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    out[22] = (out[22] & ~0x07) | codec
    return recrc(bytes(out))


def refused(data: bytes, now: int = NOW) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as caught:
        validator.validate(data, now)
    return caught.value


@pytest.mark.parametrize("codec", list(CODECS))
def test_batches_kafka_python_builds_pass_with_their_largest_timestamp(codec: str) -> None:
    records = [(NOW - 5, b"k", b"v" * 300, []), (NOW + 7, None, b"w", []), (NOW, b"x", None, [])]
    info = validator.validate(kafka_python_batch(records, codec), NOW)
    assert info.record_count == 3 and info.max_timestamp == NOW + 7


def test_a_batch_of_our_protocol_passes() -> None:
    assert validator.validate(encode_batch([(b"k", b"v")], timestamp_ms=NOW), NOW).record_count


@pytest.mark.parametrize("count", [2, 5, 2**31 - 1])
def test_a_count_larger_than_the_records_is_an_invalid_record(count: int) -> None:
    error = refused(with_count(batch(1), count))
    assert error.code == ErrorCode.INVALID_RECORD and error.record_errors


def test_records_beyond_the_count_are_an_invalid_record() -> None:
    assert refused(with_count(batch(3), 2)).code == ErrorCode.INVALID_RECORD


def test_garbage_records_are_an_invalid_record() -> None:
    data = batch(2)
    garbage = data[:61] + b"\x7f" * (len(data) - 61)
    assert refused(recrc(garbage)).code == ErrorCode.INVALID_RECORD


def test_offset_deltas_out_of_order_are_named_per_record() -> None:
    data = bytearray(batch(2))
    # record 0 at 61: length varint, attributes, timestamp delta (0), offset delta (0)
    data[61 + 3] = 2 * 5  # zigzag 5
    error = refused(recrc(bytes(data)))
    assert error.code == ErrorCode.INVALID_RECORD and error.record_errors[0][0] == 0


@pytest.mark.parametrize(
    ("codec", "payload"),
    [
        (1, b"\x1f\x8bnot gzip at all"),
        (2, b"\x05garbage"),
        (3, b"\x04\x22\x4d\x18junk"),
        (4, b"\x28\xb5\x2f\xfdjunk"),
    ],
)
def test_garbage_compressed_payloads_are_corrupt(codec: int, payload: bytes) -> None:
    assert refused(compressed(batch(1), codec, payload)).code == ErrorCode.CORRUPT_MESSAGE


BOMBS: dict[int, Callable[[bytes], bytes]] = {
    1: gzip.compress,
    2: lambda data: bytes(cramjam.snappy.compress_raw(data)),
    3: lambda data: bytes(cramjam.lz4.compress(data)),
    4: lambda data: bytes(cramjam.zstd.compress(data)),
}


@pytest.mark.parametrize("codec", sorted(BOMBS))
def test_a_payload_that_decompresses_past_the_bound_is_refused(codec: int) -> None:
    bomb = BOMBS[codec](b"\x00" * (4 * LIMIT))
    error = refused(compressed(batch(1), codec, bomb))
    assert error.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_a_control_batch_from_a_client_is_an_invalid_record() -> None:
    data = bytearray(batch(1))
    data[22] |= 0x20
    error = refused(recrc(bytes(data)))
    assert error.code == ErrorCode.INVALID_RECORD and "control" in error.message


def test_a_producer_id_with_a_negative_sequence_is_an_invalid_record() -> None:
    data = patched(patched(batch(1), ">q", 43, 7), ">i", 53, -1)
    assert refused(data).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("ts", [-5, 253402300799000, NOW + HOUR + 1])
def test_timestamps_out_of_bounds_are_invalid_timestamps(ts: int) -> None:
    error = refused(batch(2, ts))
    assert error.code == ErrorCode.INVALID_TIMESTAMP and error.record_errors[0][0] == 0


def test_timestamps_before_the_bound_are_refused_when_one_is_set() -> None:
    strict = LogValidator(1000, HOUR, LIMIT)
    with pytest.raises(RecordValidationError) as caught:
        strict.validate(batch(1, NOW - 1001), NOW)
    assert caught.value.code == ErrorCode.INVALID_TIMESTAMP
    assert strict.validate(batch(1, NOW - 1000), NOW).record_count == 1


def test_no_timestamp_passes_unless_the_batch_claims_log_append_time() -> None:
    assert validator.validate(batch(1, -1), NOW).record_count == 1
    data = bytearray(batch(1, -1))
    data[22] |= 0x08
    assert refused(recrc(bytes(data))).code == ErrorCode.INVALID_TIMESTAMP


def test_a_header_max_timestamp_is_replaced_by_the_records() -> None:
    data = patched(batch(2), ">q", 35, NOW + 999)  # max_timestamp lies
    assert validator.validate(data, NOW).max_timestamp == NOW + 1


@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.sampled_from([0, 1, 2, 3, 4]))
def test_any_records_after_a_valid_header_are_refused_or_read_never_raised(
    tail: bytes, codec: int
) -> None:
    data = compressed(batch(1), codec, tail)
    with contextlib.suppress(RecordValidationError):
        validator.validate(data, NOW)


def test_log_append_time_stamps_the_batch_with_the_broker_clock_and_skips_the_bounds() -> None:
    stamping = LogValidator(0, 0, LIMIT, log_append_time=True)
    produced = kafka_python_batch(
        [(NOW - 10 * HOUR, b"k", b"v", []), (NOW + HOUR, b"k", b"w", [])], "gzip"
    )
    info = stamping.validate(produced, NOW)  # CreateTime bounds of 0 would refuse both
    stamped, stamped_info = stamping.assign(produced, info, NOW)
    assert stamped_info.max_timestamp == NOW
    assert stamped[22] & 0x08  # the timestamp-type bit: LogAppendTime
    assert struct.unpack_from(">q", stamped, 35)[0] == NOW
    assert kafka_records.validate(stamped).record_count == 2  # the CRC is right again
    decoded = kafka_records.decode(stamped)
    assert [(r.value, r.timestamp) for r in decoded] == [(b"v", NOW), (b"w", NOW)]


def test_create_time_leaves_the_batch_as_the_producer_built_it() -> None:
    produced = batch(2)
    assert validator.log_append_time is False
    assert validator.validate(produced, NOW).max_timestamp == NOW + 1


@pytest.mark.parametrize("source", list(CODECS))
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_a_codec_topic_recompresses_every_batch_into_its_codec(source: str, target: str) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    from purgatory.broker.log.log_validator import CODEC_IDS

    recompressing = LogValidator(2**63 - 1, HOUR, LIMIT, target_codec=CODEC_IDS[target])
    records = [(NOW + i, b"k%d" % i, b"v" * (i * 50), []) for i in range(40)]
    produced = kafka_python_batch(records, source)
    info = recompressing.validate(produced, NOW)
    stored, stored_info = recompressing.assign(produced, info, NOW)
    assert stored[22] & 0x07 == CODEC_IDS[target]
    assert stored_info.size == len(stored)
    assert kafka_records.validate(stored).record_count == 40  # length and CRC agree
    assert recompressing.validate(stored, NOW) == stored_info  # and it reads back whole
    # What another client reads: the same records (kafka-python's own reader).
    read = [(r.timestamp, r.key, r.value) for r in DefaultRecordBatch(stored)]
    assert read == [(ts, k, v) for ts, k, v, _ in records]


def test_a_batch_already_in_the_topics_codec_is_stored_as_it_came() -> None:
    recompressing = LogValidator(2**63 - 1, HOUR, LIMIT, target_codec=1)
    produced = kafka_python_batch([(NOW, b"k", b"v" * 100, [])], "gzip")
    info = recompressing.validate(produced, NOW)
    assert recompressing.assign(produced, info, NOW) == (produced, info)


def test_a_batch_of_our_protocol_is_stamped_too_and_kafka_clients_read_it_as_log_append_time() -> (
    None
):
    from purgatory.protocol.records import decode_records

    stamping = LogValidator(0, 0, LIMIT, log_append_time=True)
    ours = encode_batch([(b"k", b"v", NOW - HOUR), (b"k", b"w", NOW - 2 * HOUR)])
    info = stamping.validate(ours, NOW)  # the bounds of 0 are not checked
    stamped, stamped_info = stamping.assign(ours, info, NOW)
    assert stamped_info.max_timestamp == NOW
    assert [r.timestamp for r in decode_records(stamped)] == [NOW, NOW]
    converted = kafka_records.as_kafka_batches(stamped)
    assert converted[22] & 0x08  # LogAppendTime, for a Kafka client
    assert [(r.value, r.timestamp) for r in kafka_records.decode(converted)] == [
        (b"v", NOW),
        (b"w", NOW),
    ]
