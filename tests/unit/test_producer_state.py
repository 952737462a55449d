"""Idempotent producers' sequence rules (broker/log/producer_state.py, cases A-E), on a log
and through the replica manager on a manual clock."""

from __future__ import annotations

import pytest

from purgatory.broker.log.log import Log
from purgatory.broker.log.producer_state import ProducerStateManager
from purgatory.protocol import kafka_records
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import BatchInfo, validate_batch
from tests.harness import Harness


def info(pid: int, epoch: int, seq: int, count: int = 1) -> BatchInfo:
    return BatchInfo(0, -1, count, 0, 0, 100, pid, epoch, seq)


def batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return kafka_records.encode(
        [(1000 + i, None, v, []) for i, v in enumerate(values)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def test_a_retry_of_a_retained_batch_is_found_with_its_offsets() -> None:
    state = ProducerStateManager()
    state.update(info(7, 0, 0, 3), 10)
    state.update(info(7, 0, 3, 2), 13)
    retried = state.check(info(7, 0, 0, 3))
    assert retried is not None and (retried.first_offset, retried.last_offset) == (10, 12)
    assert state.check(info(7, 0, 5, 1)) is None  # the next one is new


def test_only_the_last_five_batches_are_retained() -> None:
    state = ProducerStateManager()
    for seq in range(6):
        state.update(info(1, 0, seq), seq)
    assert state.check(info(1, 0, 5)) is not None
    with pytest.raises(KafkaError) as caught:  # too old to recognise: out of order
        state.check(info(1, 0, 0))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_b_an_older_epoch_is_fenced() -> None:
    state = ProducerStateManager()
    state.update(info(1, 3, 0), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(info(1, 2, 1))
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_c_a_new_epoch_starts_at_sequence_zero() -> None:
    state = ProducerStateManager()
    state.update(info(1, 0, 0, 5), 0)
    assert state.check(info(1, 1, 0)) is None
    with pytest.raises(KafkaError) as caught:
        state.check(info(1, 1, 4))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_d_a_gap_in_sequences_is_out_of_order_and_sequences_wrap() -> None:
    state = ProducerStateManager()
    state.update(info(1, 0, 0, 2), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(info(1, 0, 3))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    state.update(info(2, 0, 2**31 - 2, 2), 5)
    assert state.check(info(2, 0, 0)) is None  # after 2**31 - 1 comes 0


def test_e_an_unknown_producer_may_start_anywhere() -> None:
    assert ProducerStateManager().check(info(9, 4, 1234)) is None


def test_truncation_forgets_the_batches_it_removed() -> None:
    log = Log()
    for seq, values in ((0, [b"a", b"b"]), (2, [b"c"])):
        data = batch(5, 0, seq, values)
        log.append(data, validate_batch(data), 0)
    log.truncate_to(2)
    assert log.producer_state.check(info(5, 0, 2)) is None  # the truncated batch is new again
    assert log.producer_state.check(info(5, 0, 0, 2)) is not None


async def test_retried_batch_is_acknowledged_with_its_first_offset_and_not_appended() -> None:
    h = Harness()
    h.create("t")
    first = await h.produce_batch("t", batch(3, 0, 0, [b"x", b"y"]), acks=1)
    again = await h.produce_batch("t", batch(3, 0, 0, [b"x", b"y"]), acks=1)
    assert (first.error, first.base_offset) == (0, 0)
    assert (again.error, again.base_offset) == (0, 0)
    assert h.partition("t").log.log_end_offset == 2
    gap = await h.produce_batch("t", batch(3, 0, 5, [b"z"]), acks=1)
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert h.partition("t").log.log_end_offset == 2
    await h.shutdown()


async def test_a_retry_with_acks_all_waits_for_the_isr_like_the_original() -> None:
    h = Harness()
    h.create("t")
    first = h.produce_batch("t", batch(4, 0, 0, [b"x"]), acks=-1)
    again = h.produce_batch("t", batch(4, 0, 0, [b"x"]), acks=-1)
    await h.settle()
    assert not first.done() and not again.done()  # the followers have not fetched it yet
    for follower in (1, 2):
        h.follower_fetch(follower, "t", 1)
    await h.settle()
    assert (await first).base_offset == (await again).base_offset == 0
    await h.shutdown()


def test_a_follower_learns_producer_state_from_what_it_replicates() -> None:
    leader = Log()
    data = batch(8, 0, 0, [b"a", b"b", b"c"])
    leader.append(data, validate_batch(data), 1)
    follower = Log()
    stored = leader.read(0, 1 << 20)[0]
    follower.append_as_follower(stored, validate_batch(stored, verify_records=False))
    retried = follower.producer_state.check(info(8, 0, 0, 3))
    assert retried is not None and retried.first_offset == 0
