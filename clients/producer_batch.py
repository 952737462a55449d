"""ProducerBatch: what the Producer sends to a partition leader in one go, and the record
metadata each record's future ends with."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from purgatory.protocol import kafka_records
from purgatory.protocol.records import Header, encode_batch

# Bytes a record adds to a batch beyond its key, value and header bytes (MessagePack array
# and length prefixes, the timestamp delta), and a batch beyond its records: an upper bound.
RECORD_OVERHEAD = 24
BATCH_OVERHEAD = kafka_records.HEADER_SIZE + 5  # the larger header of the two formats


class RecordMetadata(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    offset: int  # -1 with acks=0
    timestamp: int


@dataclass
class ProducerBatch:
    """Records of one partition sent together, and their futures (Kafka's ProducerBatch).
    Encoded once, when first sent, and the same bytes on every retry."""

    topic: str
    partition: int
    created: float  # loop time of the first record
    records: list[tuple[bytes | None, bytes | None, int, Sequence[tuple[str, bytes | None]]]] = (
        field(default_factory=list)
    )
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = 0
    attempts: int = 0
    encoded: bytes | None = None
    # An idempotent producer's: its id and epoch, and the batch's first sequence number,
    # fixed when the batch is first sent (-1: not idempotent, or not sent yet).
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    def encode(self) -> bytes:
        if self.encoded is None:
            if self.producer_id < 0:
                self.encoded = encode_batch(self.records)
            else:
                self.encoded = kafka_records.encode(
                    [
                        (ts, key, value, [Header(k, v) for k, v in headers])
                        for key, value, ts, headers in self.records
                    ],
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=self.base_sequence,
                )
        return self.encoded
