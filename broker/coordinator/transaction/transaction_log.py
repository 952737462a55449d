"""The records of ``__transaction_state`` (Kafka's TransactionLog): key version 0 holds the
transactional id; value version 0 the producer id and epoch, the timeout, the state and
its partitions, and two timestamps, laid out as Kafka's TransactionLogValue v0 (so its
records read the same in both brokers). A tombstone (no value) forgets an expired id.

v0 has no previous epoch: a loaded transactional id knows only its current one, as in
Kafka before its v1 tagged fields.
"""

from __future__ import annotations

import struct

from purgatory.broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionState,
    TxnTransitMetadata,
)
from purgatory.protocol.records import CorruptRecordError

_VERSION = struct.Struct(">h")
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout ms, state
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TIMES = struct.Struct(">qq")  # last update, start


def key(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return _VERSION.pack(0) + _I16.pack(len(data)) + data


def value(t: TxnTransitMetadata) -> bytes:
    out = bytearray(_VERSION.pack(0))
    out += _HEAD.pack(t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _I32.pack(len(by_topic))
    for topic, indexes in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(indexes))
        for index in indexes:
            out += _I32.pack(index)
    out += _TIMES.pack(t.txn_last_update_timestamp, t.txn_start_timestamp)
    return bytes(out)


def read_key(data: bytes) -> str:
    try:
        (version,) = _VERSION.unpack_from(data)
        if version != 0:
            raise CorruptRecordError(f"unknown transaction log key version {version}")
        (length,) = _I16.unpack_from(data, 2)
        return data[4 : 4 + length].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"unreadable transaction log key: {exc}") from exc


def read_value(data: bytes) -> TxnTransitMetadata:
    try:
        (version,) = _VERSION.unpack_from(data)
        if version not in (0, 1):
            raise CorruptRecordError(f"unknown transaction log value version {version}")
        producer_id, epoch, timeout_ms, state = _HEAD.unpack_from(data, 2)
        pos = 2 + _HEAD.size
        (topics,) = _I32.unpack_from(data, pos)
        pos += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack_from(data, pos)
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(count):
                partitions.add((topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        updated, started = _TIMES.unpack_from(data, pos)
        return TxnTransitMetadata(
            producer_id,
            NO_PRODUCER_ID,
            epoch,
            NO_PRODUCER_EPOCH,
            timeout_ms,
            TransactionState(state),
            frozenset(partitions),
            started,
            updated,
        )
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecordError(f"unreadable transaction log value: {exc}") from exc
