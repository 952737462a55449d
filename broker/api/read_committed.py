"""Our protocol's read_committed (Fetch v2's ``isolation_level`` 1): the broker drops the
aborted transactions' batches from what it reads below the last stable offset, where a
Kafka consumer gets the aborted transactions beside the records and drops them itself
(Kafka's FetchResponse ``aborted_transactions``; our responses do not carry them).

As Kafka's consumer does (``CompletedFetch``): walking the batches in offset order, an
aborted transaction (producer id, first offset) becomes active at the first batch that
reaches its first offset, and ends at its producer's abort marker; a transactional batch
of an active producer is dropped. Markers stay (consumers skip control batches)."""

from __future__ import annotations

from purgatory.protocol.kafka_records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    parse_end_txn_marker,
    stored_info,
)
from purgatory.protocol.records import is_kafka_batch, iter_batches

_ATTRIBUTES_LOW = 22  # the low byte of a v2 batch's attributes


def drop_aborted(records: bytes, aborted: tuple[tuple[int, int], ...]) -> bytes:
    """``records`` without the batches of the ``aborted`` (producer id, first offset)
    transactions; a partial batch at the end is kept as it came."""
    if not aborted or not records:
        return records
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    kept: list[memoryview] = []
    end = 0
    for batch in iter_batches(records):
        end += len(batch)
        if not is_kafka_batch(batch):
            kept.append(batch)
            continue
        flags = batch[_ATTRIBUTES_LOW]
        info = stored_info(batch)
        last = info.base_offset + info.record_count - 1
        while pending and pending[0][1] <= last:
            active.add(pending.pop(0)[0])
        if flags & CONTROL_FLAG:
            if info.producer_id in active and not parse_end_txn_marker(batch)[0]:
                active.discard(info.producer_id)  # its abort marker: the transaction ends
            kept.append(batch)
        elif not (flags & TRANSACTIONAL_FLAG and info.producer_id in active):
            kept.append(batch)
    return b"".join(kept) + records[end:]
