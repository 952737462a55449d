"""Idempotent producers' state in one partition log (Kafka's ProducerStateManager).

An idempotent Kafka producer stamps each batch with its producer id, epoch and the
sequence number of its first record (sequences count records, per partition, from 0).
Per producer the log keeps its epoch and the last ``BATCHES_RETAINED`` batches appended
(first and last sequence, first and last offset), so that:

A. a batch equal to one of them (same epoch, first and last sequence) is a retry: it is
   not appended again, and is answered with the offset the original got;
B. a batch from an older epoch is fenced (INVALID_PRODUCER_EPOCH);
C. a batch of a newer epoch must start at sequence 0;
D. otherwise its first sequence must follow the last one appended
   (OUT_OF_ORDER_SEQUENCE_NUMBER), wrapping after 2**31 - 1;
E. a producer the log does not know (new, or its batches truncated away) may start at
   any sequence, as in Kafka since KIP-360.

Followers apply the same updates from the batches they replicate, so a new leader
recognises a retry of a batch the old leader appended. Nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import BatchInfo

BATCHES_RETAINED = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
_SEQUENCE_WRAP = 2**31


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int = -1


class ProducerStateEntry:
    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_RETAINED)

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The max timestamp of its last batch (DescribeProducers)."""
        return self.batches[-1].max_timestamp if self.batches else -1


def _last_sequence(info: BatchInfo) -> int:
    return (info.base_sequence + info.record_count - 1) % _SEQUENCE_WRAP


class ProducerStateManager:
    __slots__ = ("producers",)

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(self, info: BatchInfo) -> BatchMetadata | None:
        """Before a leader appends ``info``'s batch: the batch already appended if this is
        a retry of it (A), else None; raises KafkaError for cases B to D."""
        if info.producer_id < 0:
            return None
        entry = self.producers.get(info.producer_id)
        if entry is None:  # E
            return None
        epoch, first = info.producer_epoch, info.base_sequence
        if epoch < entry.epoch:  # B
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {info.producer_id} epoch {epoch} is older than its current "
                f"epoch {entry.epoch}",
            )
        if epoch > entry.epoch:  # C
            if first != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {info.producer_id}'s new epoch {epoch} starts at sequence "
                    f"{first}, not 0",
                )
            return None
        last = _last_sequence(info)
        for batch in entry.batches:  # A
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        if entry.batches:  # D
            expected = (entry.batches[-1].last_seq + 1) % _SEQUENCE_WRAP
            if first != expected:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {info.producer_id} sent sequence {first}, expected {expected}",
                )
        return None

    def update(self, info: BatchInfo, base_offset: int) -> None:
        """Record an appended batch (by the leader, or replicated by a follower)."""
        if info.producer_id < 0:
            return
        entry = self.producers.get(info.producer_id)
        if entry is None or info.producer_epoch > entry.epoch:
            entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                info.base_sequence,
                _last_sequence(info),
                base_offset,
                base_offset + info.record_count - 1,
                info.max_timestamp,
            )
        )

    def truncate_from(self, offset: int) -> None:
        """The log lost every record from ``offset`` on: forget the batches it held."""
        for producer_id, entry in list(self.producers.items()):
            while entry.batches and entry.batches[-1].last_offset >= offset:
                entry.batches.pop()
            if not entry.batches:
                del self.producers[producer_id]

    def clear(self) -> None:
        self.producers.clear()
