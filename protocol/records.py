"""Record batches: the unit producers send, logs store and fetches return, as bytes.

A batch is a fixed 43-byte big-endian header followed by the records, MessagePack-encoded.
The broker assigns ``base_offset`` and ``partition_leader_epoch`` by rewriting the first 16
bytes; everything after them (covered by the CRC) is stored and served byte for byte, so a
fetch never re-encodes records. Several batches are concatenated in a fetch response; each
one's ``batch_length`` tells where the next starts. The first 17 bytes are those of
Kafka's record batch v2 (magic 2, protocol/kafka_records.py), which a log stores beside
ours: ``validate_batch`` and ``decode_records`` take either, told apart by the magic byte.
Layout (offsets in bytes)::

    0  base_offset             int64   assigned by the broker (producers send 0)
    8  batch_length            int32   bytes after this field, to the end of the batch
    12 partition_leader_epoch  int32   assigned by the broker (producers send -1)
    16 magic                   int8    1
    17 crc                     uint32  CRC-32 (zlib/IEEE) of bytes 21..end
    21 attributes              int16   0; bit 3 (0x08) set by a broker: LogAppendTime, every
                                       record's timestamp is max_timestamp
    23 base_timestamp          int64   ms since the epoch; record timestamps are deltas
    31 max_timestamp           int64   ms
    39 record_count            int32   >= 1
    43 records                 MessagePack array of record_count arrays
                               [timestamp_delta: int, key: bin|nil, value: bin|nil,
                                headers: array of [name: str, value: bin|nil]]
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence

import msgspec

from purgatory.protocol.errors import DECODE_ERRORS

MAGIC = 1
KAFKA_MAGIC = 2  # Kafka's record batch v2, stored beside ours (protocol/kafka_records.py)
_MAGIC_AT = 16
HEADER = struct.Struct(">qiibIhqqi")
HEADER_SIZE = HEADER.size  # 43
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_CRC_START = 21
_LENGTH_END = 12  # batch_length counts bytes from here
_PATCH = struct.Struct(">q")
_BROKER_FIELDS = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
LOG_APPEND_TIME = 0x08  # attributes bit: the broker's time, in max_timestamp
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 31


class CorruptRecordError(ValueError):
    """A batch that does not match its header or its CRC; Kafka answers CORRUPT_MESSAGE."""


class Header(msgspec.Struct, array_like=True, frozen=True):
    """One record header: a name and an optional binary value."""

    key: str
    value: bytes | None = None


class Record(msgspec.Struct, array_like=True, frozen=True):
    """One record as it travels inside a batch (timestamps are deltas there)."""

    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = []


class ConsumerRecord(msgspec.Struct, frozen=True):
    """A record as a consumer sees it: absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class BatchInfo(msgspec.Struct, frozen=True):
    """What the broker needs of a batch without decoding its records (the producer fields
    are those of an idempotent Kafka producer's v2 batch; -1 otherwise; ``transactional``
    and ``control`` the v2 attributes' bits: a transactional producer's batch, and a
    transaction marker).

    ``base_offset`` and ``partition_leader_epoch`` are as the batch says: a leader ignores
    a producer's and writes its own (``assign_offsets``); a follower keeps the leader's."""

    base_offset: int
    partition_leader_epoch: int
    record_count: int
    base_timestamp: int
    max_timestamp: int
    size: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    control: bool = False


_records_encoder = msgspec.msgpack.Encoder()
_records_decoder = msgspec.msgpack.Decoder(list[Record])


RecordHeaders = Sequence[tuple[str, bytes | None]]
RecordInput = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, int]
    | tuple[bytes | None, bytes | None, int, RecordHeaders]
)


def _full(
    record: RecordInput, default_ts: int
) -> tuple[bytes | None, bytes | None, int, RecordHeaders]:
    if len(record) == 2:
        return record[0], record[1], default_ts, ()
    if len(record) == 3:
        return record[0], record[1], record[2], ()
    return record


def encode_batch(records: Sequence[RecordInput], *, timestamp_ms: int = 0) -> bytes:
    """Encode (key, value[, timestamp_ms[, headers]]) tuples as one batch with base offset 0.

    A record without its own timestamp gets ``timestamp_ms``.
    """
    if not records:
        raise ValueError("a batch holds at least one record")
    full = [_full(r, timestamp_ms) for r in records]
    base_ts = min(r[2] for r in full)
    max_ts = max(r[2] for r in full)
    encoded = [
        Record(ts - base_ts, key, value, [Header(k, v) for k, v in headers])
        for key, value, ts, headers in full
    ]
    body = _records_encoder.encode(encoded)
    tail = struct.pack(">hqqi", 0, base_ts, max_ts, len(records)) + body
    crc = zlib.crc32(tail)
    return (
        _OFFSET_AND_LENGTH.pack(0, HEADER_SIZE - _LENGTH_END + len(body))
        + struct.pack(">ibI", -1, MAGIC, crc)
        + tail
    )


def is_kafka_batch(batch: bytes | memoryview) -> bool:
    """Whether a batch is Kafka's v2 (magic 2) rather than ours."""
    return len(batch) > _MAGIC_AT and batch[_MAGIC_AT] == KAFKA_MAGIC


def validate_batch(batch: bytes, *, verify_records: bool = True, stored: bool = False) -> BatchInfo:
    """Check one produced batch and return its header figures, or raise CorruptRecordError.

    Checks the length, magic, CRC and record count; with ``verify_records`` it also decodes
    the records of one of ours to prove the count and their shape (what the broker does
    before appending). A Kafka v2 batch is checked by its header and CRC-32C alone.
    """
    if len(batch) > _MAGIC_AT and batch[_MAGIC_AT] == KAFKA_MAGIC:  # is_kafka_batch, inline
        from purgatory.protocol import kafka_records

        return kafka_records.validate(batch, stored=stored)
    if len(batch) < HEADER_SIZE:
        raise CorruptRecordError(f"batch of {len(batch)} bytes is shorter than its header")
    base, length, epoch, magic, crc, _, base_ts, max_ts, count = HEADER.unpack_from(batch)
    if length != len(batch) - _LENGTH_END:
        raise CorruptRecordError(
            f"batch_length says {length} bytes but {len(batch) - _LENGTH_END} follow it"
        )
    if magic != MAGIC:
        raise CorruptRecordError(f"unsupported batch magic {magic} (expected {MAGIC})")
    # A slice copy is cheaper than a memoryview for small batches, and not for large ones.
    tail = batch[_CRC_START:] if length < 4096 else memoryview(batch)[_CRC_START:]
    if zlib.crc32(tail) != crc:
        raise CorruptRecordError("batch CRC does not match its contents")
    if count < 1:
        raise CorruptRecordError(f"record_count is {count}; a batch holds at least one record")
    if max_ts < base_ts:
        raise CorruptRecordError("max_timestamp is before base_timestamp")
    if verify_records:
        try:
            decoded = _records_decoder.decode(tail[HEADER_SIZE - _CRC_START :])
        except DECODE_ERRORS as exc:
            raise CorruptRecordError(f"records do not decode: {exc}") from None
        if len(decoded) != count:
            raise CorruptRecordError(f"record_count is {count} but {len(decoded)} records follow")
    return BatchInfo(base, epoch, count, base_ts, max_ts, len(batch))


def assign_offsets(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """Return the batch with the broker's base offset and leader epoch; records untouched."""
    size = len(batch)
    rest = batch[16:] if size < 4096 else memoryview(batch)[16:]  # small: a slice is cheaper
    return _BROKER_FIELDS.pack(base_offset, size - _LENGTH_END, leader_epoch) + rest


def batch_base_offset(batch: bytes | memoryview) -> int:
    return int(_PATCH.unpack_from(batch)[0])


def batch_leader_epoch(batch: bytes | memoryview) -> int:
    """The partition leader epoch the broker stamped on a stored batch."""
    return int(_BROKER_FIELDS.unpack_from(batch)[2])


def batch_end(batch: bytes | memoryview) -> int:
    """The offset after a stored batch (of either format): its base offset plus the
    offsets it spans, which a compacted Kafka batch keeps in ``last_offset_delta``."""
    base = int.from_bytes(batch[0:8], "big", signed=True)
    if batch[16] == KAFKA_MAGIC:
        return base + int.from_bytes(batch[23:27], "big", signed=True) + 1
    return base + int.from_bytes(batch[39:43], "big", signed=True)


def iter_batches(data: bytes | memoryview) -> Iterator[memoryview]:
    """Split concatenated batches (a fetch response's ``records``). A partial trailing batch
    (a fetch cut at max_bytes) is dropped, as Kafka clients do."""
    view = memoryview(data)
    pos = 0
    end = len(view)
    while end - pos >= HEADER_SIZE:
        _, length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
        stop = pos + _LENGTH_END + length
        if length < HEADER_SIZE - _LENGTH_END:
            raise CorruptRecordError(f"batch at byte {pos} has impossible length {length}")
        if stop > end:
            return
        yield view[pos:stop]
        pos = stop


def decode_records(data: bytes | memoryview) -> list[ConsumerRecord]:
    """Decode every complete batch in ``data`` into consumer records with absolute offsets."""
    out: list[ConsumerRecord] = []
    for batch in iter_batches(data):
        if is_kafka_batch(batch):
            from purgatory.protocol import kafka_records

            out.extend(kafka_records.decode(batch))
            continue
        base_offset, _, _, _, crc, attributes, base_ts, max_ts, count = HEADER.unpack_from(batch)
        if zlib.crc32(batch[_CRC_START:]) != crc:
            raise CorruptRecordError(f"batch at offset {base_offset} fails its CRC")
        try:
            records = _records_decoder.decode(batch[HEADER_SIZE:])
        except DECODE_ERRORS as exc:
            raise CorruptRecordError(
                f"batch at offset {base_offset} does not decode: {exc}"
            ) from None
        if len(records) != count:
            raise CorruptRecordError(f"batch at offset {base_offset} has a wrong record count")
        log_append_time = attributes & LOG_APPEND_TIME
        out.extend(
            ConsumerRecord(
                base_offset + i,
                max_ts if log_append_time else base_ts + r.timestamp_delta,
                r.key,
                r.value,
                r.headers,
            )
            for i, r in enumerate(records)
        )
    return out


def retained_runs(batch: bytes | memoryview, keep: Sequence[bool]) -> list[bytes]:
    """One of our stored batches with only the records ``keep`` says (by index) kept, as
    the log cleaner leaves it: each run of consecutive kept records a batch of its own at
    its records' offsets (our batches number records from their base offset), its leader
    epoch, attributes and timestamps (base and max) those of the batch."""
    base_offset, _, epoch, _, _, attributes, base_ts, max_ts, _ = HEADER.unpack_from(batch)
    records = _records_decoder.decode(batch[HEADER_SIZE:])
    out: list[bytes] = []
    run: list[Record] = []
    start = 0
    for i, record in enumerate([*records, None]):
        if record is not None and keep[i]:
            if not run:
                start = i
            run.append(record)
            continue
        if run:
            body = _records_encoder.encode(run)
            tail = struct.pack(">hqqi", attributes, base_ts, max_ts, len(run)) + body
            out.append(
                _OFFSET_AND_LENGTH.pack(base_offset + start, HEADER_SIZE - _LENGTH_END + len(body))
                + struct.pack(">ibI", epoch, MAGIC, zlib.crc32(tail))
                + tail
            )
            run = []
    return out


def stamp_log_append_time(batch: bytes, time_ms: int) -> bytes:
    """One of our batches as a broker stores it on a LogAppendTime topic: the attributes'
    LogAppendTime bit set, ``max_timestamp`` = ``time_ms``, the CRC written again."""
    out = bytearray(batch)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, LOG_APPEND_TIME)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_AT, time_ms)
    struct.pack_into(">I", out, _CRC_START - 4, zlib.crc32(memoryview(out)[_CRC_START:]))
    return bytes(out)
