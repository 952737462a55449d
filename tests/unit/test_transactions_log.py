"""Transactions on the partition side (broker/log/producer_state.py cases F and G, the
log's first unstable offset and aborted-transaction index, the leader's last stable
offset, markers through the replica manager and read_committed reads), on a manual
clock."""

from __future__ import annotations

import asyncio

import pytest

from purgatory.broker.log.cleaner.cleaner_manager import cleanable_range
from purgatory.broker.log.log import Log, LogConfig
from purgatory.protocol import kafka_records
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.records import (
    assign_offsets,
    decode_records,
    iter_batches,
    validate_batch,
)
from tests.harness import Harness, records_of

TOPIC = "t"


def txn_batch(pid: int, seq: int, values: list[bytes], epoch: int = 0, ts: int = 1000) -> bytes:
    return kafka_records.encode(
        [(ts, None, v, []) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def plain_batch(values: list[bytes], ts: int = 1000) -> bytes:
    return kafka_records.encode([(ts, None, v, []) for v in values])


def append(log: Log, batch: bytes) -> int:
    return log.append(batch, validate_batch(batch), 0)


def marker(log: Log, pid: int, commit: bool, coordinator_epoch: int = 0, epoch: int = 0) -> int:
    data = kafka_records.end_txn_marker(pid, epoch, commit, coordinator_epoch, 1000)
    info = validate_batch(data)
    log.producer_state.check_marker(info, coordinator_epoch)
    return log.append(data, info, 0)


def test_a_transaction_is_unstable_from_its_first_batch_until_its_marker_is_committed() -> None:
    log = Log()
    assert log.first_unstable_offset is None
    append(log, plain_batch([b"before"]))  # 0
    append(log, txn_batch(1, 0, [b"a", b"b"]))  # 1-2
    append(log, plain_batch([b"other"]))  # 3
    append(log, txn_batch(1, 2, [b"c"]))  # 4: the same transaction goes on
    assert log.first_unstable_offset == 1
    assert log.producer_state.producers[1].current_txn_first_offset == 1
    assert marker(log, 1, commit=True) == 5
    assert log.first_unstable_offset == 1  # the marker is not below the high watermark yet
    log.producer_state.on_high_watermark_updated(5)
    assert log.first_unstable_offset == 1
    log.producer_state.on_high_watermark_updated(6)
    assert log.first_unstable_offset is None
    assert log.aborted_transactions(0, 6) == []  # committed: nothing to drop


def test_aborted_transactions_are_those_overlapping_the_range_read() -> None:
    log = Log()
    append(log, txn_batch(1, 0, [b"a"]))  # 0
    append(log, txn_batch(2, 0, [b"x"]))  # 1
    append(log, txn_batch(1, 1, [b"b"]))  # 2
    marker(log, 1, commit=False)  # 3: pid 1 aborted while pid 2 is open
    assert log.aborted_txns[0].last_stable_offset == 1
    marker(log, 2, commit=True)  # 4
    append(log, txn_batch(3, 0, [b"y"]))  # 5
    marker(log, 3, commit=False)  # 6
    assert log.aborted_transactions(0, 7) == [(1, 0), (3, 5)]
    assert log.aborted_transactions(0, 1) == [(1, 0)]
    assert log.aborted_transactions(4, 7) == [(3, 5)]  # pid 1's marker is before 4
    assert log.aborted_transactions(4, 5) == []  # pid 3's starts at 5
    assert log.first_unstable_offset == 0  # no high watermark has passed a marker
    log.producer_state.on_high_watermark_updated(7)
    assert log.first_unstable_offset is None


def test_f_a_plain_batch_from_a_producer_in_a_transaction_is_refused() -> None:
    log = Log()
    append(log, txn_batch(1, 0, [b"a"]))
    idempotent = kafka_records.encode(
        [(1000, None, b"b", [])], producer_id=1, producer_epoch=0, base_sequence=1
    )
    with pytest.raises(KafkaError) as caught:
        log.producer_state.check(validate_batch(idempotent))
    assert caught.value.code == ErrorCode.INVALID_TXN_STATE
    marker(log, 1, commit=True)
    assert log.producer_state.check(validate_batch(idempotent)) is None  # ended: allowed


def test_g_markers_are_fenced_by_coordinator_and_producer_epochs() -> None:
    log = Log()
    append(log, txn_batch(1, 0, [b"a"], epoch=2))
    marker(log, 1, commit=True, coordinator_epoch=5, epoch=2)
    append(log, txn_batch(1, 1, [b"b"], epoch=2))
    stale = validate_batch(kafka_records.end_txn_marker(1, 2, False, 4, 1000))
    with pytest.raises(KafkaError) as caught:
        log.producer_state.check_marker(stale, 4)
    assert caught.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    old_epoch = validate_batch(kafka_records.end_txn_marker(1, 1, False, 5, 1000))
    with pytest.raises(KafkaError) as caught:
        log.producer_state.check_marker(old_epoch, 5)
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    # The coordinator fences the producer: it aborts with a bumped epoch, which the
    # producer's entry takes; its old epoch's batches are fenced from then on.
    marker(log, 1, commit=False, coordinator_epoch=5, epoch=3)
    assert log.producer_state.producers[1].epoch == 3
    assert log.aborted_transactions(0, log.log_end_offset) == [(1, 2)]
    with pytest.raises(KafkaError) as caught:
        log.producer_state.check(validate_batch(txn_batch(1, 2, [b"c"], epoch=2)))
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_marker_without_a_transaction_ends_an_empty_one_at_its_own_offset() -> None:
    log = Log()
    append(log, plain_batch([b"a"]))
    at = marker(log, 9, commit=False)
    assert log.aborted_transactions(0, 5) == [(9, at)]


def test_truncating_a_marker_away_reopens_its_transaction() -> None:
    log = Log()
    append(log, plain_batch([b"a"]))  # 0
    append(log, txn_batch(1, 0, [b"b", b"c"]))  # 1-2
    marker(log, 1, commit=False)  # 3
    log.producer_state.on_high_watermark_updated(4)
    assert log.first_unstable_offset is None
    log.truncate_to(3)
    assert log.first_unstable_offset == 1
    assert log.aborted_txns == []
    assert log.producer_state.producers[1].current_txn_first_offset == 1
    log.truncate_to(1)  # the transaction's only batch goes too
    assert log.first_unstable_offset is None
    assert 1 not in log.producer_state.producers


def test_the_log_start_passing_a_marker_drops_its_aborted_transaction() -> None:
    log = Log()
    append(log, txn_batch(1, 0, [b"a"]))  # 0
    marker(log, 1, commit=False)  # 1
    append(log, txn_batch(2, 0, [b"b"]))  # 2
    marker(log, 2, commit=False)  # 3
    append(log, plain_batch([b"c"]))  # 4
    log.maybe_increment_log_start_offset(2)
    assert [t.producer_id for t in log.aborted_txns] == [2]
    assert log.aborted_transactions(2, 5) == [(2, 2)]


def test_a_follower_knows_the_open_and_aborted_transactions_it_replicated() -> None:
    leader = Log()
    append(leader, txn_batch(1, 0, [b"a"]))
    append(leader, txn_batch(2, 0, [b"b"]))
    marker(leader, 1, commit=False)
    append(leader, txn_batch(2, 1, [b"c"]))
    follower = Log()
    for batch in iter_batches(b"".join(leader.read(0, 1 << 20))):
        stored = bytes(batch)
        follower.append_as_follower(stored, validate_batch(stored, stored=True))
    assert follower.first_unstable_offset == 0  # pid 1's marker is not committed yet
    follower.producer_state.on_high_watermark_updated(follower.log_end_offset)
    assert follower.first_unstable_offset == 1  # pid 2's transaction is open
    assert follower.aborted_transactions(0, 4) == [(1, 0)]
    assert follower.producer_state.producers[2].current_txn_first_offset == 1


def test_the_cleaner_stops_at_the_first_unstable_offset() -> None:
    log = Log(LogConfig(segment_bytes=200, compact=True))
    for i in range(6):
        append(log, kafka_records.encode([(1000, b"k", b"v%d" % i, [])]))
    append(log, txn_batch(1, 0, [b"t"]))  # an open transaction at offset 6
    for i in range(6):
        append(log, kafka_records.encode([(1000, b"k", b"w%d" % i, [])]))
    assert len(log.segments) > 3
    _, end = cleanable_range(log, log.log_end_offset, 2000)
    assert end <= 6
    _, unbounded = cleanable_range(Log(LogConfig(segment_bytes=200, compact=True)), 0, 0)
    assert unbounded == 0


# -- the leader: markers, the last stable offset, read_committed ------------------------------


async def caught_up(h: Harness) -> None:
    """Both followers fetch from the leader's log end: the high watermark reaches it."""
    end = h.partition(TOPIC).log.log_end_offset
    for follower in (1, 2):
        await h.follower_fetch(follower, TOPIC, end)
    await h.settle()


async def test_markers_wait_for_the_isr_and_move_the_last_stable_offset() -> None:
    h = Harness()
    h.create(TOPIC)
    rm = h.replica_manager
    ts = h.clock.wall_ms()
    await h.produce_batch(TOPIC, plain_batch([b"p0"], ts), acks=1)  # 0
    await h.produce_batch(TOPIC, txn_batch(1, 0, [b"c0", b"c1"], ts=ts), acks=1)  # 1-2
    await h.produce_batch(TOPIC, txn_batch(2, 0, [b"a0"], ts=ts), acks=1)  # 3
    await caught_up(h)
    partition = h.partition(TOPIC)
    assert (partition.high_watermark, partition.last_stable_offset) == (4, 1)
    committed = await h.fetch(TOPIC, 0, isolation_level=1, max_wait_ms=0)
    data = committed.partitions[0][1]
    assert [r.value for r in decode_records(data.records)] == [b"p0"]
    assert (data.last_stable_offset, data.aborted_transactions) == (1, ())
    uncommitted = (await h.fetch(TOPIC, 0, max_wait_ms=0)).partitions[0][1]
    assert len(decode_records(uncommitted.records)) == 4
    assert uncommitted.aborted_transactions is None and uncommitted.last_stable_offset == 1
    assert rm.fetch_offset_for_timestamp((TOPIC, 0), -1, 1) == (0, -1, 1)
    assert rm.fetch_offset_for_timestamp((TOPIC, 0), -1, 0) == (0, -1, 4)
    # A read_committed long poll at the LSO waits for the markers.
    waiting = h.fetch(TOPIC, 1, isolation_level=1, max_wait_ms=5_000)
    # Two producers' markers for one partition in one call (as a WriteTxnMarkers carries
    # them): both appended, both answered once the ISR has the later one.
    responses, done = rm.append_txn_markers(
        5_000, [((TOPIC, 0), 1, 0, True, 0), ((TOPIC, 0), 2, 0, False, 0)]
    )
    assert [(r.error, r.base_offset) for _, r in responses] == [(0, 4), (0, 5)]
    assert done is not None
    await h.settle()
    assert not done.done() and not waiting.done()  # the ISR has not fetched the markers
    assert partition.last_stable_offset == 1
    await caught_up(h)
    assert [r.error for _, r in done.result()] == [0, 0]
    result = await waiting
    data = result.partitions[0][1]
    assert data.last_stable_offset == 6
    assert [r.value for r in decode_records(records_of(result))] == [b"c0", b"c1", b"a0"]
    assert data.aborted_transactions == ((2, 3),)
    await h.shutdown()


async def test_markers_of_one_partition_that_time_out_are_all_answered_so() -> None:
    h = Harness()
    h.create(TOPIC)
    _, done = h.replica_manager.append_txn_markers(
        100, [((TOPIC, 0), 1, 0, True, 0), ((TOPIC, 0), 2, 0, False, 0)]
    )
    assert done is not None
    await h.advance(150)
    assert [r.error for _, r in await done] == [ErrorCode.REQUEST_TIMED_OUT] * 2
    await h.shutdown()


async def test_marker_errors_are_kafkas() -> None:
    h = Harness()
    h.create(TOPIC)
    h.create("__consumer_offsets")
    rm = h.replica_manager
    ts = h.clock.wall_ms()
    await h.produce_batch(TOPIC, txn_batch(1, 0, [b"x"], epoch=1, ts=ts), acks=1)
    responses, _ = rm.append_txn_markers(
        1_000,
        [
            (("nope", 0), 1, 1, True, 3),
            ((TOPIC, 0), 1, 0, True, 3),  # an older producer epoch
            (("__consumer_offsets", 0), 1, 1, True, 3),  # internal topics take markers
        ],
    )
    assert [r.error for _, r in responses] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.NONE,
    ]
    responses, _ = rm.append_txn_markers(1_000, [((TOPIC, 0), 1, 1, True, 3)])
    assert responses[0][1].error == ErrorCode.NONE
    responses, _ = rm.append_txn_markers(1_000, [((TOPIC, 0), 1, 1, False, 2)])
    assert responses[0][1].error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    h.set_partition(TOPIC, 0, leader_id=1, leader_epoch=1)
    responses, _ = rm.append_txn_markers(1_000, [((TOPIC, 0), 1, 1, True, 3)])
    assert responses[0][1].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await h.shutdown()


async def test_a_producer_may_not_write_a_control_batch() -> None:
    h = Harness()
    h.create(TOPIC)
    forged = kafka_records.end_txn_marker(1, 0, True, 0, h.clock.wall_ms())
    outcome = await h.produce_batch(TOPIC, forged, acks=1)
    assert outcome.error == ErrorCode.INVALID_RECORD
    await h.shutdown()


async def test_a_read_committed_fetch_from_the_remote_tier_gets_its_aborted_transactions() -> None:
    h = Harness(**{"remote.storage.latency.ms": 0})
    size = len(txn_batch(1, 0, [b"a"]))
    h.create(
        TOPIC,
        **{
            "remote.storage.enable": "true",
            "segment.bytes": str(2 * size),
            "local.retention.bytes": "1",
        },
    )
    ts = h.clock.wall_ms()
    await h.produce_batch(TOPIC, txn_batch(1, 0, [b"a"], ts=ts), acks=1)  # 0
    await h.produce_batch(TOPIC, txn_batch(2, 0, [b"b"], ts=ts), acks=1)  # 1
    h.replica_manager.append_txn_markers(1_000, [((TOPIC, 0), 1, 0, False, 0)])  # 2
    h.replica_manager.append_txn_markers(1_000, [((TOPIC, 0), 2, 0, True, 0)])  # 3
    for i in range(4):
        await h.produce_batch(TOPIC, plain_batch([b"p%d" % i], ts), acks=1)  # 4-7
    await caught_up(h)
    h.replica_manager.remote_log_manager.run_once(h.clock.wall_ms())
    log = h.partition(TOPIC).log
    assert log.in_remote_tier(0)
    result = await asyncio.wait_for(h.fetch(TOPIC, 0, isolation_level=1), 10)
    data = result.partitions[0][1]
    assert data.records and data.aborted_transactions == ((1, 0),)
    uncommitted = await asyncio.wait_for(h.fetch(TOPIC, 0), 10)
    assert uncommitted.partitions[0][1].aborted_transactions is None
    await h.shutdown()


async def test_ended_transactions_are_forgotten_once_the_high_watermark_passes_them() -> None:
    """On the leader and on a follower, without any read_committed reader asking."""
    h = Harness()
    h.create(TOPIC)
    await h.produce_batch(TOPIC, txn_batch(1, 0, [b"x"], ts=h.clock.wall_ms()), acks=1)
    h.replica_manager.append_txn_markers(1_000, [((TOPIC, 0), 1, 0, True, 0)])
    state = h.partition(TOPIC).log.producer_state
    assert state.unreplicated == {0: 1}
    await caught_up(h)
    assert state.unreplicated == {}
    follower = h.partition(TOPIC)
    follower.make_follower(1, 1, 2, [0, 1, 2], [0, 1, 2])
    # The new leader's abort marker of producer 3, replicated at offset 2.
    stored = assign_offsets(kafka_records.end_txn_marker(3, 0, False, 0, 1000), 2, 1)
    follower.log.append_as_follower(stored, validate_batch(stored, stored=True))
    assert follower.log.producer_state.unreplicated == {2: 2}
    follower.follower_update_high_watermark(3)
    assert follower.log.producer_state.unreplicated == {}
    await h.shutdown()
