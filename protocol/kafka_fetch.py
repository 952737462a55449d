"""Kafka's FetchResponse, versions 4 to 16, encoded by hand: the hottest response of the
Kafka listener, and the one that carries our KIP-736 tagged field.

A fetch response wraps stored record batches, which go out byte for byte; only the few
fields around them are written here (about ten times cheaper than a generic schema
writer, and checked byte for byte against kio's in the tests). From version 12 (flexible)
the response ends with a tagged field Kafka does not define: ``WAIT_TIME_TAG`` holds the
time the fetch waited in the purgatory, in milliseconds (int32), as KIP-736 proposed.
Clients skip tagged fields they do not know.

Per version: 7 adds the top-level error code and session id, 5 the log start offset, 11
the preferred read replica, 12 compact encodings and tagged fields, 13 topic ids instead
of names. Each partition carries its last stable offset and, for a read_committed fetch,
its aborted transactions (null for read_uncommitted, as Kafka writes them).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

WAIT_TIME_TAG = 736  # KIP-736's number; Kafka's own FetchResponse tags are 0..2
MIN_VERSION = 4
MAX_VERSION = 16

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_TOP_V7 = struct.Struct(">ihi")  # throttle time, error code, session id
_NO_ZERO_UUID = bytes(16)


class FetchPartition(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes
    last_stable_offset: int = -1
    # (producer id, first offset) each; None (a null array) for read_uncommitted
    aborted_transactions: Sequence[tuple[int, int]] | None = None


class FetchTopic(NamedTuple):
    name: str
    topic_id: bytes  # 16 bytes (zeros when unknown)
    partitions: list[FetchPartition]


class FetchResponseBody:
    """One FetchResponse of a given version; the codec calls ``write_into``."""

    __slots__ = ("error_code", "throttle_time_ms", "topics", "version", "wait_time_ms")

    __api_key__ = 1

    def __init__(
        self,
        version: int,
        topics: list[FetchTopic],
        wait_time_ms: int,
        error_code: int = 0,
        throttle_time_ms: int = 0,
    ) -> None:
        self.version = version
        self.topics = topics
        self.wait_time_ms = wait_time_ms
        self.error_code = error_code
        self.throttle_time_ms = throttle_time_ms  # a client quota's (broker/quota)

    @property
    def __flexible__(self) -> bool:
        return self.version >= 12

    def write_into(self, out: bytearray) -> None:
        version = self.version
        flexible = version >= 12
        if version >= 7:
            # session 0: sessions declined
            out += _TOP_V7.pack(self.throttle_time_ms, self.error_code, 0)
        else:
            out += _I32.pack(self.throttle_time_ms)
        _array_length(out, len(self.topics), flexible)
        for topic in self.topics:
            if version >= 13:
                out += topic.topic_id
            else:
                _string(out, topic.name, flexible)
            _array_length(out, len(topic.partitions), flexible)
            for p in topic.partitions:
                out += _PARTITION_HEAD.pack(
                    p.partition, p.error_code, p.high_watermark, p.last_stable_offset
                )
                if version >= 5:
                    out += _I64.pack(p.log_start_offset)
                aborted = p.aborted_transactions
                if aborted is None:
                    _array_length(out, -1, flexible)  # null
                else:
                    _array_length(out, len(aborted), flexible)
                    for producer_id, first_offset in aborted:
                        out += _ABORTED.pack(producer_id, first_offset)
                        if flexible:
                            out.append(0)  # aborted transaction tagged fields
                if version >= 11:
                    out += _I32.pack(-1)  # preferred read replica: none
                records = p.records
                if flexible:
                    _uvarint(out, len(records) + 1)
                    out += records
                    out.append(0)  # partition tagged fields
                else:
                    out += _I32.pack(len(records))
                    out += records
            if flexible:
                out.append(0)  # topic tagged fields
        if flexible:
            out.append(1)  # one tagged field: the purgatory wait
            _uvarint(out, WAIT_TIME_TAG)
            out.append(4)
            out += _I32.pack(self.wait_time_ms)


def _array_length(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        _uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, value: str, flexible: bool) -> None:
    data = value.encode()
    if flexible:
        _uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def topic_id_bytes(topic_id: str) -> bytes:
    """Our topic ids are UUIDs in hex; Kafka's wire carries their 16 bytes."""
    return bytes.fromhex(topic_id) if topic_id else _NO_ZERO_UUID
