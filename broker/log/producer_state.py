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

Transactions (Kafka's ProducerAppendInfo and its ongoing and unreplicated transactions):
a transactional batch starts its producer's transaction (at its first offset, the
``current_txn_first_offset``) or continues it. Then:

F. a non-transactional batch from a producer with a transaction in flight is refused
   (INVALID_TXN_STATE);
G. a transaction marker (a control batch the coordinator has the leader write) ends the
   transaction: refused if its producer epoch is older than the producer's
   (INVALID_PRODUCER_EPOCH), or its coordinator epoch older than the last marker's for
   that producer (TRANSACTION_COORDINATOR_FENCED); a newer producer epoch is taken (a
   fenced producer's transaction aborted with the bumped epoch). A marker with no
   transaction in flight ends an empty one, at its own offset, as in Kafka.

An ended transaction stays unstable until its marker is below the high watermark (Kafka's
unreplicated transactions): the first unstable offset is the least first offset of the
open and the unreplicated ones, and the last stable offset never passes it.

Followers apply the same updates from the batches they replicate, so a new leader
recognises a retry of a batch the old leader appended and knows every open transaction.
Nothing here reads a clock.
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


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's CompletedTxn); ``last_stable_offset``: the
    log's last stable offset once it ended (the least first offset of the transactions
    still open, else the offset after its marker), which bounds a search of the aborted
    transactions (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    last_stable_offset: int
    aborted: bool


class ProducerStateEntry:
    __slots__ = ("batches", "coordinator_epoch", "current_txn_first_offset", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_RETAINED)
        self.current_txn_first_offset: int | None = None  # its open transaction's start
        self.coordinator_epoch = -1  # of the last marker ending one of its transactions

    def maybe_update_epoch(self, epoch: int) -> None:
        """A new epoch: the batches of the old one are no retries of the new one's."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

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
    """The producers of one log. Invariants: ``ongoing`` maps the first offset of each
    open transaction to its producer, whose entry has that ``current_txn_first_offset``;
    ``unreplicated`` maps the first offset of each ended transaction whose marker may not
    be below the high watermark yet to the marker's offset."""

    __slots__ = ("ongoing", "producers", "transactional", "unreplicated")

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset -> producer id
        self.unreplicated: dict[int, int] = {}  # first offset -> marker offset
        self.transactional = False  # a transactional batch or a marker was ever seen

    def check(self, info: BatchInfo) -> BatchMetadata | None:
        """Before a leader appends ``info``'s batch: the batch already appended if this is
        a retry of it (A), else None; raises KafkaError for cases B to D and F."""
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
        if entry.current_txn_first_offset is not None and not info.transactional:  # F
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"expected a transactional write from producer {info.producer_id}: its "
                f"transaction from offset {entry.current_txn_first_offset} is open",
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

    def check_marker(self, info: BatchInfo, coordinator_epoch: int) -> None:
        """Before a leader appends a transaction marker (G): raises KafkaError if its
        producer epoch or its coordinator epoch is fenced."""
        entry = self.producers.get(info.producer_id)
        if entry is None:
            return
        if info.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"a marker of producer {info.producer_id} has epoch {info.producer_epoch}, "
                f"older than its current epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"a marker of producer {info.producer_id} has coordinator epoch "
                f"{coordinator_epoch}, older than the last one seen, {entry.coordinator_epoch}",
            )

    def update(self, info: BatchInfo, base_offset: int) -> None:
        """Record an appended data batch (by the leader, or replicated by a follower)."""
        if info.producer_id < 0:
            return
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_epoch)
        elif info.producer_epoch > entry.epoch:
            entry.maybe_update_epoch(info.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                info.base_sequence,
                _last_sequence(info),
                base_offset,
                base_offset + info.record_count - 1,
                info.max_timestamp,
            )
        )
        if info.transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = base_offset
            self.ongoing[base_offset] = info.producer_id
            self.transactional = True

    def complete_txn(
        self, info: BatchInfo, offset: int, commit: bool, coordinator_epoch: int
    ) -> CompletedTxn:
        """Record an appended transaction marker at ``offset`` (G): the producer's
        transaction ended, unstable until the high watermark passes the marker."""
        producer_id = info.producer_id
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(info.producer_epoch)
        entry.maybe_update_epoch(info.producer_epoch)
        first = entry.current_txn_first_offset
        if first is None:
            first = offset
        else:
            del self.ongoing[first]
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = coordinator_epoch
        self.transactional = True
        stable = min(self.ongoing, default=offset + 1)  # (the others still open)
        self.unreplicated[first] = offset
        return CompletedTxn(producer_id, first, offset, stable, not commit)

    def first_unstable_offset(self) -> int | None:
        """The least first offset of the open and unreplicated transactions, if any."""
        ongoing, unreplicated = self.ongoing, self.unreplicated
        if not ongoing:
            return min(unreplicated) if unreplicated else None
        first = min(ongoing)
        return min(first, min(unreplicated)) if unreplicated else first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Ended transactions whose marker is below ``high_watermark`` are stable."""
        for first, marker in list(self.unreplicated.items()):
            if marker < high_watermark:
                del self.unreplicated[first]

    def truncate_from(self, offset: int) -> None:
        """The log lost every record from ``offset`` on: forget the batches it held (a
        log with transactions replays what is left instead: ``Log.truncate_to``)."""
        for producer_id, entry in list(self.producers.items()):
            while entry.batches and entry.batches[-1].last_offset >= offset:
                entry.batches.pop()
            if not entry.batches:
                del self.producers[producer_id]

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.transactional = False
