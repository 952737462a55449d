"""Our protocol's read_committed: the broker drops aborted transactions' batches from a
read, as Kafka's consumer does with the aborted transactions it is sent."""

from __future__ import annotations

from purgatory.broker.api.read_committed import drop_aborted
from purgatory.protocol import kafka_records
from purgatory.protocol.records import assign_offsets, decode_records, encode_batch


def txn_batch(producer_id: int, offset: int, *values: bytes) -> bytes:
    batch = kafka_records.encode(
        [(1_000, None, v, []) for v in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    return assign_offsets(batch, offset, 0)


def marker(producer_id: int, offset: int, commit: bool) -> bytes:
    return assign_offsets(kafka_records.end_txn_marker(producer_id, 0, commit, 0, 1_000), offset, 0)


def values(records: bytes) -> list[bytes | None]:
    return [r.value for r in decode_records(records)]


def test_the_aborted_transactions_batches_go_and_everything_else_stays() -> None:
    log = b"".join(
        [
            txn_batch(1, 0, b"a1", b"a2"),  # producer 1, committed below
            txn_batch(2, 2, b"b1"),  # producer 2, aborted below
            assign_offsets(encode_batch([(None, b"plain")], timestamp_ms=1_000), 3, 0),
            txn_batch(2, 4, b"b2"),
            marker(1, 5, True),
            marker(2, 6, False),
            txn_batch(2, 7, b"c1"),  # producer 2's next transaction: not aborted
        ]
    )
    kept = drop_aborted(log, ((2, 2),))
    assert values(kept) == [b"a1", b"a2", b"plain", b"c1"]
    assert drop_aborted(log, ()) == log


def test_a_partial_batch_at_the_end_is_kept_as_it_came() -> None:
    whole = txn_batch(2, 0, b"gone") + marker(2, 1, False)
    partial = txn_batch(3, 2, b"cut")[:30]
    kept = drop_aborted(whole + partial, ((2, 0),))
    assert kept.endswith(partial) and values(kept) == []
