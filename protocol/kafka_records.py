"""Kafka's record batch v2 (magic 2): the format Kafka clients produce and fetch.

Layout (big-endian; Kafka's "Record Batch")::

    0  base_offset             int64   assigned by the broker
    8  batch_length            int32   bytes after this field
    12 partition_leader_epoch  int32   assigned by the broker
    16 magic                   int8    2
    17 crc                     uint32  CRC-32C of bytes 21..end
    21 attributes              int16   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4,
                                       4 zstd), 3 timestamp type, 4 transactional, 5 control
    23 last_offset_delta       int32
    27 base_timestamp          int64
    35 max_timestamp           int64
    43 producer_id             int64   -1 without idempotence
    51 producer_epoch          int16
    53 base_sequence           int32
    57 record_count            int32
    61 records                 compressed as a whole when a codec is set

The first 17 bytes are laid out as in our own batches (protocol/records.py), so the
broker assigns offsets and leader epochs to both kinds by rewriting the same 16 bytes, and
one log holds both. Validation reads the header and checks the CRC; it never decompresses
(the offsets a batch takes are in its header). Records are decoded (and decompressed)
only by a reader: a consumer, or the broker converting for the other protocol.

A record: length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
key (varint length, -1 for null, bytes), value (the same), header count varint, each
header a key (varint length, UTF-8) and a value (varint length, -1 for null). Varints are
zigzag-encoded, as in Protocol Buffers.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

import cramjam
import msgspec
from crc32c import crc32c

from purgatory.protocol.records import KAFKA_MAGIC as MAGIC
from purgatory.protocol.records import (
    BatchInfo,
    ConsumerRecord,
    CorruptRecordError,
    Header,
    batch_base_offset,
    batch_leader_epoch,
    decode_records,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_CRC_START = 21
_LENGTH_END = 12
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record_count
_PRE_CRC = struct.Struct(">qiib")  # base_offset, batch_length, leader epoch, magic
_LENGTH = struct.Struct(">i")
_MAGIC_AT = 16
_OURS_ATTRIBUTES_AT = 21  # our batch's attributes (protocol/records.py): the same place

NO_PRODUCER_ID = -1
CODEC_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08  # the timestamp type: the broker's, in max_timestamp
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
_TRANSACTION_FLAGS = TRANSACTIONAL_FLAG | CONTROL_FLAG
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# Java's snappy (xerial) framing: this magic, two int32 versions, then int32-sized blocks.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


class InconsistentBatchError(CorruptRecordError):
    """A well-framed batch (its CRC right) whose header contradicts itself: a record count
    that disagrees with ``last_offset_delta``. Kafka answers INVALID_RECORD, not
    CORRUPT_MESSAGE: the bytes arrived as the producer wrote them."""


def validate(batch: bytes | memoryview, *, stored: bool = False) -> BatchInfo:
    """Check a produced v2 batch (length, magic, CRC-32C, counts, codec) and return its
    header figures, or raise CorruptRecordError. Records are not decompressed.

    ``stored``: a batch as a log stores it (a follower replicating it), which the log
    cleaner may have emptied of some records, or all: its record count may be below
    ``last_offset_delta + 1``, and the ``record_count`` returned is then the offsets it
    spans, what a log and a producer's sequences count by."""
    size = len(batch)
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"batch of {size} bytes is shorter than its v2 header")
    (
        base,
        length,
        epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = HEADER.unpack_from(batch)
    if length != size - _LENGTH_END:
        raise CorruptRecordError(
            f"batch_length says {length} bytes but {size - _LENGTH_END} follow it"
        )
    if magic != MAGIC:
        raise CorruptRecordError(f"unsupported batch magic {magic} (expected {MAGIC})")
    if crc32c(memoryview(batch)[_CRC_START:]) != crc:
        raise CorruptRecordError("batch CRC-32C does not match its contents")
    if attributes & CODEC_MASK not in CODECS:
        raise CorruptRecordError(f"unknown compression codec {attributes & CODEC_MASK}")
    if stored and 0 <= count <= last_delta + 1:
        count = last_delta + 1  # a compacted batch: its offsets as they were
    if count < 1 or last_delta != count - 1:
        raise InconsistentBatchError(
            f"record_count {count} does not match last_offset_delta {last_delta}"
        )
    info = BatchInfo(
        base,
        epoch,
        count,
        base_ts,
        max(max_ts, base_ts),
        size,
        producer_id,
        producer_epoch,
        base_sequence,
    )
    if attributes & _TRANSACTION_FLAGS:  # (else the defaults: nothing more per batch)
        return msgspec.structs.replace(
            info,
            transactional=bool(attributes & TRANSACTIONAL_FLAG),
            control=bool(attributes & CONTROL_FLAG),
        )
    return info


def stored_info(batch: bytes | memoryview) -> BatchInfo:
    """A stored v2 batch's header figures, unchecked (no CRC): what a log replays to
    rebuild its producers' state after a truncation. ``record_count`` is the offsets it
    spans, as ``validate(stored=True)`` gives it."""
    (base, _, epoch, _, _, attributes, last_delta, base_ts, max_ts, pid, pepoch, seq, _) = (
        HEADER.unpack_from(batch)
    )
    return BatchInfo(
        base,
        epoch,
        last_delta + 1,
        base_ts,
        max(max_ts, base_ts),
        len(batch),
        pid,
        pepoch,
        seq,
        bool(attributes & TRANSACTIONAL_FLAG),
        bool(attributes & CONTROL_FLAG),
    )


def decode(batch: bytes | memoryview) -> list[ConsumerRecord]:
    """The records of one stored v2 batch with absolute offsets and timestamps (none for a
    control batch: transaction markers are not application records). In a LogAppendTime
    batch every record's timestamp is the batch's max timestamp, as Kafka's clients read
    it."""
    (base_offset, _, _, _, crc, attributes, _, base_ts, max_ts, _, _, _, count) = (
        HEADER.unpack_from(batch)
    )
    log_append_time = attributes & LOG_APPEND_TIME_FLAG
    if crc32c(memoryview(batch)[_CRC_START:]) != crc:
        raise CorruptRecordError(f"batch at offset {base_offset} fails its CRC-32C")
    if attributes & CONTROL_FLAG:
        return []
    data = _decompress(attributes & CODEC_MASK, bytes(batch[HEADER_SIZE:]), base_offset)
    out: list[ConsumerRecord] = []
    pos = 0
    try:
        for _ in range(count):
            length, pos = _read_varint(data, pos)
            end = pos + length
            pos += 1  # record attributes (unused)
            ts_delta, pos = _read_varint(data, pos)
            offset_delta, pos = _read_varint(data, pos)
            key, pos = _read_bytes(data, pos)
            value, pos = _read_bytes(data, pos)
            n_headers, pos = _read_varint(data, pos)
            headers = []
            for _ in range(n_headers):
                name, pos = _read_bytes(data, pos)
                header_value, pos = _read_bytes(data, pos)
                headers.append(Header((name or b"").decode(), header_value))
            if pos != end or end > len(data):
                raise CorruptRecordError(f"a record of batch {base_offset} overruns its length")
            out.append(
                ConsumerRecord(
                    base_offset + offset_delta,
                    max_ts if log_append_time else base_ts + ts_delta,
                    key,
                    value,
                    headers,
                )
            )
    except (IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"batch at offset {base_offset} does not decode: {exc}") from None
    return out


def encode(
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[Header]]],
    *,
    base_offset: int = 0,
    leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """One uncompressed v2 batch of (timestamp_ms, key, value, headers) records, at
    consecutive offsets from ``base_offset``; ``transactional``: a transactional
    producer's (its attributes' transactional bit set)."""
    return _encode(
        records,
        TRANSACTIONAL_FLAG if transactional else 0,
        base_offset,
        leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
    )


def _encode(
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[Header]]],
    attributes: int,
    base_offset: int,
    leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    if not records:
        raise ValueError("a batch holds at least one record")
    base_ts = min(r[0] for r in records)
    max_ts = max(r[0] for r in records)
    body = bytearray()
    for delta, (ts, key, value, headers) in enumerate(records):
        record = bytearray(b"\x00")  # attributes
        _write_varint(record, ts - base_ts)
        _write_varint(record, delta)
        _write_bytes(record, key)
        _write_bytes(record, value)
        _write_varint(record, len(headers))
        for header in headers:
            _write_bytes(record, header.key.encode())
            _write_bytes(record, header.value)
        _write_varint(body, len(record))
        body += record
    tail = (
        _AFTER_CRC.pack(
            attributes,
            len(records) - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    return (
        _PRE_CRC.pack(base_offset, len(tail) + 9, leader_epoch, MAGIC)
        + struct.pack(">I", crc32c(tail))
        + tail
    )


# Kafka's ControlRecordType keys of a transaction marker (EndTransactionMarker).
ABORT_MARKER = 0
COMMIT_MARKER = 1
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_MARKER_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def end_txn_marker(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """The control batch ending a producer's transaction in one partition, as Kafka's
    EndTransactionMarker writes it (MemoryRecords.withEndTransactionMarker): transactional
    and control bits set, no sequence, base offset 0 (the leader assigns it), one record
    whose key is the marker's type (version 0, 0 abort or 1 commit) and whose value is
    version 0 and the coordinator's epoch."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return _encode(
        [(timestamp_ms, key, value, ())],
        TRANSACTIONAL_FLAG | CONTROL_FLAG,
        0,
        -1,
        producer_id,
        producer_epoch,
        -1,
    )


def parse_end_txn_marker(batch: bytes | memoryview) -> tuple[bool, int]:
    """(commit, coordinator epoch) of a control batch holding a transaction marker; raises
    CorruptRecordError for any other batch (a control record of another type, as KRaft's
    log holds, is not a marker)."""
    (base_offset, _, _, _, _, attributes, _, _, _, _, _, _, count) = HEADER.unpack_from(batch)
    if not attributes & CONTROL_FLAG or count < 1:
        raise CorruptRecordError(f"batch at offset {base_offset} is not a transaction marker")
    data = _decompress(attributes & CODEC_MASK, bytes(batch[HEADER_SIZE:]), base_offset)
    try:
        _, pos = _read_varint(data, 0)  # record length
        pos += 1  # record attributes
        _, pos = _read_varint(data, pos)  # timestamp delta
        _, pos = _read_varint(data, pos)  # offset delta
        key, pos = _read_bytes(data, pos)
        value, pos = _read_bytes(data, pos)
    except IndexError:
        key = value = None
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch at offset {base_offset} has no control key")
    _, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (ABORT_MARKER, COMMIT_MARKER):
        raise CorruptRecordError(
            f"control batch at offset {base_offset} is of type {kind}, not a transaction marker"
        )
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError(f"transaction marker at offset {base_offset} has no value")
    _, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return kind == COMMIT_MARKER, coordinator_epoch


def record_entries(batch: bytes | memoryview) -> list[tuple[int, bytes | None, bool, bytes]]:
    """The records of a stored v2 batch as the log cleaner reads them: (offset, key, is a
    tombstone (null value), the record's bytes, its length varint included), decompressed
    but not decoded further; none for a control batch (a transaction marker)."""
    (base_offset, _, _, _, _crc, attributes, _, _, _, _, _, _, count) = HEADER.unpack_from(batch)
    if attributes & CONTROL_FLAG:
        return []
    data = _decompress(attributes & CODEC_MASK, bytes(batch[HEADER_SIZE:]), base_offset)
    out: list[tuple[int, bytes | None, bool, bytes]] = []
    pos = 0
    try:
        for _ in range(count):
            start = pos
            length, pos = _read_varint(data, pos)
            end = pos + length
            pos += 1  # record attributes
            _, pos = _read_varint(data, pos)  # timestamp delta
            offset_delta, pos = _read_varint(data, pos)
            key, pos = _read_bytes(data, pos)
            value_length, _ = _read_varint(data, pos)
            if end > len(data):
                raise CorruptRecordError(f"a record of batch {base_offset} overruns its length")
            out.append((base_offset + offset_delta, key, value_length < 0, data[start:end]))
            pos = end
    except IndexError as exc:
        raise CorruptRecordError(f"batch at offset {base_offset} does not decode: {exc}") from None
    return out


def with_records(batch: bytes | memoryview, records: Sequence[bytes]) -> bytes:
    """A stored v2 batch holding only ``records`` (some of its own, as ``record_entries``
    gave them): every header field kept, its base offset and ``last_offset_delta`` too, so
    the batch spans the offsets it did and a producer's sequences still count from it
    (Kafka's cleaner keeps them alike); the record count is theirs, the records compressed
    again with the batch's codec, the length and CRC written again. Empty, it is a header
    alone without a codec, as Kafka keeps a producer's last batch (``writeEmptyHeader``)."""
    header = bytearray(batch[:HEADER_SIZE])
    if not records:
        header[_CRC_START + 1] &= ~CODEC_MASK & 0xFF
    codec = header[_CRC_START + 1] & CODEC_MASK
    body = b"".join(records)
    payload = compress(codec, body) if codec and records else body
    struct.pack_into(">i", header, HEADER_SIZE - 4, len(records))
    struct.pack_into(">i", header, 8, HEADER_SIZE - _LENGTH_END + len(payload))
    tail = bytes(header[_CRC_START:]) + payload
    struct.pack_into(">I", header, 17, crc32c(tail))
    return bytes(header[:_CRC_START]) + tail


def from_records(records: Sequence[ConsumerRecord], base_offset: int, leader_epoch: int) -> bytes:
    """A v2 batch holding ``records`` (offsets from ``base_offset`` up, without gaps): how
    a batch of our own protocol is served to a Kafka client."""
    return encode(
        [(r.timestamp, r.key, r.value, r.headers) for r in records],
        base_offset=base_offset,
        leader_epoch=leader_epoch,
    )


def _decompress(codec: int, data: bytes, base_offset: int) -> bytes:
    try:
        if codec == 0:
            return data
        if codec == 1:
            return gzip.decompress(data)
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except (OSError, EOFError, cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise CorruptRecordError(
            f"batch at offset {base_offset} does not decompress ({CODECS[codec]}): {exc}"
        ) from None
    raise CorruptRecordError(f"batch at offset {base_offset} has unknown codec {codec}")


# An LZ4 frame header of Kafka's own writer: version 1, independent blocks (Kafka's reader
# refuses linked ones), no checksums, 64 KiB blocks; the last byte is its xxhash32 byte.
_LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK = 1 << 16
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_SNAPPY_BLOCK = 32 * 1024  # the block size of Java's SnappyOutputStream


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """A batch's records compressed with ``codec`` as Kafka's Java client writes them:
    gzip; snappy in Java's xerial framing of 32 KiB blocks; LZ4 frames of independent
    64 KiB blocks; zstd. ``level``: the codec's level (None or -1: its default)."""
    if codec == 0:
        return bytes(data)
    if codec == 1:
        if level is None or level == -1:
            level = 6  # Java's Deflater.DEFAULT_COMPRESSION
        return gzip.compress(bytes(data), compresslevel=level, mtime=0)
    view = memoryview(data)
    if codec == 2:
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(view), _SNAPPY_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _SNAPPY_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        out = bytearray(_LZ4_FRAME_HEADER)
        for start in range(0, len(view), _LZ4_BLOCK):
            chunk = view[start : start + _LZ4_BLOCK]
            if level:  # Kafka's levels are LZ4 HC's
                block = bytes(
                    cramjam.lz4.compress_block(
                        bytes(chunk), mode="high_compression", compression=level, store_size=False
                    )
                )
            else:
                block = bytes(cramjam.lz4.compress_block(bytes(chunk), store_size=False))
            if len(block) >= len(chunk):  # incompressible: stored as it is
                out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
            else:
                out += struct.pack("<I", len(block)) + block
        return bytes(out + b"\x00\x00\x00\x00")
    if codec == 4:
        return bytes(cramjam.zstd.compress(bytes(data), level=3 if level is None else level))
    raise ValueError(f"unknown codec {codec}")


def _snappy(data: bytes) -> bytes:
    """Raw snappy, or Java's xerial framing (what the Java client writes)."""
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_MAGIC) + 8  # magic, version, compatible version
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint runs past 10 bytes")


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(data):
        raise CorruptRecordError("a key, value or header runs past its record")
    return data[pos:end], end


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
        return
    _write_varint(out, len(value))
    out += value


def _log_append_time(batch: bytes, time_ms: int) -> bytes:
    """A v2 batch marked LogAppendTime at ``time_ms`` (its max timestamp), CRC again."""
    out = bytearray(batch)
    out[22] |= LOG_APPEND_TIME_FLAG
    struct.pack_into(">q", out, 35, time_ms)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def as_kafka_batches(data: bytes) -> bytes:
    """Stored batches as a Kafka client reads them: v2 batches as they are (no copy when
    all are), each of ours (magic 1) converted to an uncompressed v2 batch with the same
    offsets, timestamps, keys, values and headers. A partial trailing batch (a fetch cut
    at its byte limit) is kept if it is v2 and dropped if it is ours (it cannot be
    converted; the client fetches it whole next time)."""
    end = len(data)
    pos = 0
    while pos < end and end - pos > _MAGIC_AT and data[pos + _MAGIC_AT] == MAGIC:
        pos += _LENGTH_END + _LENGTH.unpack_from(data, pos + 8)[0]
    if pos >= end:
        return data
    out = bytearray(data[:pos])
    view = memoryview(data)
    while end - pos > _MAGIC_AT:
        stop = pos + _LENGTH_END + _LENGTH.unpack_from(data, pos + 8)[0]
        if data[pos + _MAGIC_AT] == MAGIC:
            out += view[pos:stop]
        elif stop <= end:
            batch = view[pos:stop]
            records = decode_records(batch)
            converted = from_records(records, batch_base_offset(batch), batch_leader_epoch(batch))
            if batch[_OURS_ATTRIBUTES_AT + 1] & LOG_APPEND_TIME_FLAG:  # stamped by the broker
                converted = _log_append_time(converted, records[0].timestamp)
            out += converted
        pos = stop
    return bytes(out)
