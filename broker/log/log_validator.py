"""Kafka's LogValidator: what a batch from a client must be before a leader appends it.

A batch is stored only if every consumer can read it. Kafka's checks, for a v2 batch
(``validate``):

1. framing: length, magic, CRC-32C, a known codec (CORRUPT_MESSAGE);
2. the batch (Kafka's validateBatch, INVALID_RECORD): a record count of at least one that
   matches ``last_offset_delta``; no control batch (transaction markers are the
   coordinator's to write); a producer id with a sequence of at least 0;
3. the records (INVALID_RECORD, with the index of each bad record in ``record_errors``):
   the payload decompresses, within ``max_uncompressed_bytes``; exactly ``record_count``
   records fill it, each within its length, with offset deltas 0, 1, 2, ...;
   on a compacted topic (``cleanup.policy`` with compact) every record has a key
   (Kafka's validateKey: "Compacted topic cannot accept message without key");
4. timestamps (Kafka's validateTimestamp, INVALID_TIMESTAMP), on a CreateTime topic: a
   record's create time within [now - ``message.timestamp.before.max.ms``, now +
   ``message.timestamp.after.max.ms``]. Beyond Kafka: a timestamp below -1 (Kafka's "no
   timestamp") is refused too; no Kafka client can produce one, and ListOffsets by
   timestamp cannot answer for it;

Then ``assign`` makes the batch the topic's (a batch of our own protocol has no codec, and
is stamped alike):

5. with ``compression.type`` a codec other than the batch's, its records are
   recompressed with that codec (and level), as Kafka's LogValidator rebuilds such a
   batch; the records themselves, their offsets and timestamps, are the same bytes;
6. on a LogAppendTime topic (``message.timestamp.type``) the batch is stamped: its
   timestamp-type bit set and its max timestamp the broker's clock, which consumers read
   as every record's timestamp; the create-time bounds of 4 are not checked.

Records are walked by aiokafka's compiled record reader (about 0.25 us per record, a
quarter of a Python loop), after this module decompressed the payload within the bound:
aiokafka would decompress without one. A batch of our own protocol (magic 1) decodes its
records whole (``validate_batch``) and has its header timestamps checked.

The batch header's ``max_timestamp`` is not trusted: the time index takes the records'.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

import cramjam
import msgspec
from aiokafka.record.default_records import DefaultRecordBatch  # compiled where built
from crc32c import crc32c

from purgatory.protocol import kafka_records
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_records import (
    CODEC_MASK,
    CODECS,
    CONTROL_FLAG,
    HEADER_SIZE,
    LOG_APPEND_TIME_FLAG,
    NO_PRODUCER_ID,
    InconsistentBatchError,
    compress,
)
from purgatory.protocol.records import (
    KAFKA_MAGIC,
    BatchInfo,
    CorruptRecordError,
    decode_records,
    stamp_log_append_time,
    validate_batch,
)

NO_TIMESTAMP = -1
_LENGTH_AT = 8
_CRC_AT = 17
# Kafka's codec ids by compression.type (uncompressed: none).
CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Kafka's LogValidator.validateKey, for a keyless record on a compacted topic.
_NO_KEY = "Compacted topic cannot accept message without key."
_FIRST_TRY = 1 << 16  # bytes a decompression is first given (grown by doubling)


class RecordValidationError(Exception):
    """A batch refused: Kafka's error code, a message, and (for record-level errors) the
    index and message of each bad record."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: tuple[tuple[int, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors


class LogValidator:
    """The checks of one partition's appends from clients (its topic's configs)."""

    __slots__ = (
        "compacted",
        "level",
        "log_append_time",
        "max_uncompressed_bytes",
        "target_codec",
        "timestamp_after_max_ms",
        "timestamp_before_max_ms",
    )

    def __init__(
        self,
        timestamp_before_max_ms: int,
        timestamp_after_max_ms: int,
        max_uncompressed_bytes: int,
        log_append_time: bool = False,
        target_codec: int | None = None,
        level: int | None = None,
        compacted: bool = False,
    ) -> None:
        self.timestamp_before_max_ms = timestamp_before_max_ms
        self.timestamp_after_max_ms = timestamp_after_max_ms
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self.log_append_time = log_append_time  # message.timestamp.type=LogAppendTime
        self.target_codec = target_codec  # compression.type as a codec; None: producer
        self.level = level  # compression.<codec>.level of the target codec
        self.compacted = compacted  # cleanup.policy has compact: every record needs a key

    @classmethod
    def for_topic(cls, configs: Mapping[str, Any], max_uncompressed_bytes: int) -> LogValidator:
        """The validator of a topic with these (parsed) configs."""
        compression = configs["compression.type"]
        target = None if compression == "producer" else CODEC_IDS[compression]
        level = configs.get(f"compression.{compression}.level")
        return cls(
            int(configs["message.timestamp.before.max.ms"]),
            int(configs["message.timestamp.after.max.ms"]),
            max_uncompressed_bytes,
            configs["message.timestamp.type"] == "LogAppendTime",
            target,
            None if level is None else int(level),
            "compact" in configs["cleanup.policy"],
        )

    @property
    def rewrites(self) -> bool:
        """Whether ``assign`` may change a batch (recompress or stamp it)."""
        return self.log_append_time or self.target_codec is not None

    def validate(self, batch: bytes, now_ms: int) -> BatchInfo:
        """The batch's figures if it may be appended; raises RecordValidationError."""
        is_kafka = len(batch) > 16 and batch[16] == KAFKA_MAGIC
        try:
            info = kafka_records.validate(batch) if is_kafka else validate_batch(batch)
        except InconsistentBatchError as exc:  # Kafka's validateBatch
            raise RecordValidationError(ErrorCode.INVALID_RECORD, str(exc)) from None
        except CorruptRecordError as exc:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if not is_kafka:
            if self.compacted and any(r.key is None for r in decode_records(batch)):
                raise RecordValidationError(ErrorCode.INVALID_RECORD, _NO_KEY)
            self._check_timestamp(info.base_timestamp, 0, now_ms)
            self._check_timestamp(info.max_timestamp, info.record_count - 1, now_ms)
            return info
        attributes = batch[_ATTRIBUTES_AT + 1]  # the low byte of the int16
        if attributes & CONTROL_FLAG:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, "clients are not allowed to write control records"
            )
        if info.producer_id != NO_PRODUCER_ID and info.base_sequence < 0:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD,
                f"invalid sequence number {info.base_sequence} in a batch of producer "
                f"{info.producer_id}",
            )
        max_timestamp = self._records(batch, info, attributes, now_ms)
        if max_timestamp != info.max_timestamp:
            info = msgspec.structs.replace(info, max_timestamp=max_timestamp)
        return info

    def _records(self, batch: bytes, info: BatchInfo, attributes: int, now_ms: int) -> int:
        """Walk the records (decompressed within the bound); their largest timestamp."""
        codec = attributes & CODEC_MASK
        whole: bytes | bytearray = batch  # the reader takes it as it is: no copy
        if codec:
            payload = self._decompress(codec, memoryview(batch)[HEADER_SIZE:])
            # The same header, uncompressed, over the decompressed records: what the reader
            # walks (it does not check the CRC, already checked).
            header = bytearray(batch[:HEADER_SIZE])
            header[_ATTRIBUTES_AT + 1] &= ~CODEC_MASK & 0xFF
            whole = header + payload
        count = info.record_count
        seen = 0
        max_timestamp = NO_TIMESTAMP
        errors: list[tuple[int, str]] = []
        late: list[tuple[int, str]] = []  # every record out of bounds, as Kafka lists them
        try:
            for index, record in enumerate(DefaultRecordBatch(whole)):
                seen += 1
                if record.offset != info.base_offset + index:
                    errors.append((index, f"offset delta {record.offset - info.base_offset}"))
                    continue
                if self.compacted and record.key is None:
                    errors.append((index, _NO_KEY))
                    continue
                timestamp = record.timestamp
                problem = self._timestamp_problem(timestamp, attributes, now_ms)
                if problem is not None:
                    late.append((index, problem))
                if timestamp > max_timestamp:
                    max_timestamp = timestamp
        except Exception as exc:  # the reader's CorruptRecordException, and any other
            message = f"record {seen} of {count} does not decode: {exc}"
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, message, ((seen, message),)
            ) from None
        if late:
            raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, late[0][1], tuple(late))
        if errors and errors[0][1] == _NO_KEY:
            raise RecordValidationError(ErrorCode.INVALID_RECORD, _NO_KEY, tuple(errors))
        if errors:
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD,
                f"{len(errors)} records have offset deltas out of order",
                tuple(errors),
            )
        if seen != count:  # the reader stops at the count; fewer is a short batch
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, f"record_count is {count} but {seen} records follow"
            )
        return max_timestamp

    def _timestamp_problem(self, timestamp: int, attributes: int, now_ms: int) -> str | None:
        if timestamp == NO_TIMESTAMP:
            if attributes & LOG_APPEND_TIME_FLAG:
                return "producers may not set the timestamp type to LogAppendTime"
            return None
        if timestamp < NO_TIMESTAMP:
            return f"timestamp {timestamp} is negative"
        if self.log_append_time:  # the broker's time replaces it: no bounds
            return None
        if (
            now_ms - timestamp > self.timestamp_before_max_ms
            or timestamp - now_ms > self.timestamp_after_max_ms
        ):
            return (
                f"timestamp {timestamp} is out of range: it must be within "
                f"[{now_ms - self.timestamp_before_max_ms}, "
                f"{now_ms + self.timestamp_after_max_ms}]"
            )
        return None

    def _check_timestamp(self, timestamp: int, index: int, now_ms: int) -> None:
        problem = self._timestamp_problem(timestamp, 0, now_ms)
        if problem is not None:
            raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, problem, ((index, problem),))

    def assign(self, batch: bytes, info: BatchInfo, now_ms: int) -> tuple[bytes, BatchInfo]:
        """A validated batch made the topic's (5 and 6 above): recompressed with
        ``target_codec`` if it has another codec, stamped with ``now_ms`` on a
        LogAppendTime topic, its length and CRC written again; unchanged otherwise. One of
        our own protocol (no codecs) is stamped alike (protocol/records.py)."""
        if not self.rewrites or len(batch) <= 16:
            return batch, info
        if batch[16] != KAFKA_MAGIC:  # ours: no codecs; stamped alike
            if not self.log_append_time:
                return batch, info
            stamped = stamp_log_append_time(batch, now_ms)
            return stamped, msgspec.structs.replace(info, max_timestamp=now_ms)
        codec = batch[_ATTRIBUTES_AT + 1] & CODEC_MASK
        target = self.target_codec
        if target is not None and target != codec:
            records = memoryview(batch)[HEADER_SIZE:]
            plain = self._decompress(codec, records) if codec else records
            out = bytearray(batch[:HEADER_SIZE]) + compress(target, plain, self.level)
            out[_ATTRIBUTES_AT + 1] = (out[_ATTRIBUTES_AT + 1] & ~CODEC_MASK & 0xFF) | target
            struct.pack_into(">i", out, _LENGTH_AT, len(out) - _LENGTH_AT - 4)
        elif self.log_append_time:
            out = bytearray(batch)
        else:
            return batch, info
        if self.log_append_time:
            out[_ATTRIBUTES_AT + 1] |= LOG_APPEND_TIME_FLAG
            struct.pack_into(">q", out, _MAX_TIMESTAMP_AT, now_ms)
            info = msgspec.structs.replace(info, max_timestamp=now_ms)
        struct.pack_into(">I", out, _CRC_AT, crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
        return bytes(out), msgspec.structs.replace(info, size=len(out))

    # -- decompression within a bound ------------------------------------------------------

    def _decompress(self, codec: int, data: memoryview) -> bytes | bytearray:
        limit = self.max_uncompressed_bytes
        try:
            if codec == 1:
                return _gunzip(data, limit)
            if codec == 2:
                return _unsnappy(bytes(data), limit)
            if codec in (3, 4):
                return _into(cramjam.lz4 if codec == 3 else cramjam.zstd, data, limit)
        except RecordValidationError:
            raise
        except Exception as exc:
            raise RecordValidationError(
                ErrorCode.CORRUPT_MESSAGE,
                f"the records do not decompress ({CODECS.get(codec, codec)}): {exc}",
            ) from None
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, f"unknown codec {codec}")


def _too_large(limit: int) -> RecordValidationError:
    return RecordValidationError(
        ErrorCode.RECORD_LIST_TOO_LARGE,
        f"the records decompress to more than {limit} bytes (socket.request.max.bytes)",
    )


def _gunzip(data: memoryview, limit: int) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = decompressor.decompress(data, limit + 1)
    if len(out) > limit:
        raise _too_large(limit)
    if not decompressor.eof:
        raise ValueError("the gzip stream is truncated")
    return out


def _into(module: object, data: memoryview, limit: int) -> bytearray:
    """lz4 (frame) or zstd into a buffer grown by doubling up to ``limit``: a payload's
    own size claims are never what memory is sized by."""
    size = min(limit, max(_FIRST_TRY, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)  # type: ignore[attr-defined]
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            if size >= limit:
                raise _too_large(limit) from None
            size = min(limit, size * 2)
            continue
        del out[written:]
        return out


def _unsnappy(data: bytes, limit: int) -> bytearray:
    """Raw snappy, or Java's xerial framing; each raw block declares its length first."""
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, limit)
    out = bytearray()
    pos = len(_XERIAL_MAGIC) + 8  # magic, version, compatible version
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("a snappy block runs past the records")
        out += _snappy_block(data[pos : pos + size], limit - len(out))
        pos += size
    return out


def _snappy_block(block: bytes, limit: int) -> bytearray:
    declared = shift = 0
    for pos in range(min(len(block), 5)):
        declared |= (block[pos] & 0x7F) << shift
        if block[pos] < 0x80:
            break
        shift += 7
    if declared > limit:
        raise _too_large(limit)
    return bytearray(cramjam.snappy.decompress_raw(block))
