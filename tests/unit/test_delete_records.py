"""DeleteRecords on a manual clock: the log start moves on the leader at once, and the
request waits in the DeleteRecords purgatory until every live replica's log starts there
(Kafka's DelayedDeleteRecords); the errors of Kafka's ReplicaManager.deleteRecords."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.log.log import EARLIEST_TIMESTAMP, Log, LogConfig, OffsetOutOfRange
from purgatory.broker.replication.delayed_delete_records import DeleteRecordsResult
from purgatory.broker.replication.fetch_params import FetchParams, PartitionFetchInfo
from purgatory.protocol.errors import ErrorCode as E
from purgatory.protocol.records import decode_records, encode_batch, validate_batch
from tests.harness import Harness, error_of

T = ("t", 0)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    harness.create("t")
    for i in range(5):  # five batches of two: offsets 0-9
        harness.produce("t", [b"%d" % (2 * i), b"%d" % (2 * i + 1)], acks=1)
    for follower in (1, 2):
        fetch_from(harness, follower, 10, 0)
    assert harness.partition("t").high_watermark == 10
    yield harness
    await harness.shutdown()


def fetch_from(h: Harness, follower: int, offset: int, log_start: int) -> Any:
    """Follower ``follower`` fetches at its log end ``offset`` telling its log start."""
    params = FetchParams(
        follower, 0, 1, 1 << 20, ((T, PartitionFetchInfo(offset, 1 << 20, -1, log_start)),)
    )
    return h.replica_manager.fetch_messages(params)


def delete(h: Harness, offset: int, timeout_ms: int = 30_000, key: Any = T) -> Any:
    return h.replica_manager.delete_records(timeout_ms, {key: offset})


async def test_the_leader_moves_its_log_start_at_once_and_answers_when_every_replica_has(
    h: Harness,
) -> None:
    waiting = delete(h, 4)
    assert isinstance(waiting, asyncio.Future) and not waiting.done()
    log = h.partition("t").log
    assert log.log_start_offset == 4
    assert h.replica_manager.delete_records_purgatory.delayed == 1
    # Consumers follow at once: earliest is the new start, below it is out of range.
    assert h.replica_manager.fetch_offset_for_timestamp(T, EARLIEST_TIMESTAMP) == (E.NONE, -1, 4)
    below = (await h.fetch("t", 3)).partitions[0][1]
    assert (below.error, below.log_start_offset) == (E.OFFSET_OUT_OF_RANGE, 4)
    assert error_of(await h.fetch("t", 4)) == E.NONE
    # The followers learn the start from their fetch answers and tell theirs in the next.
    assert fetch_from(h, 1, 10, 0).partitions[0][1].log_start_offset == 4
    fetch_from(h, 1, 10, 4)
    assert not waiting.done()
    fetch_from(h, 2, 10, 4)
    await h.settle()
    assert waiting.result() == {T: DeleteRecordsResult(E.NONE, 4)}
    assert h.replica_manager.delete_records_purgatory.delayed == 0


async def test_a_deletion_the_replicas_do_not_follow_in_time_is_answered_timed_out(
    h: Harness,
) -> None:
    waiting = delete(h, 6, timeout_ms=1_000)
    fetch_from(h, 1, 10, 6)
    await h.advance(999)
    assert not waiting.done()
    await h.advance(1)
    # The low watermark it had: follower 2 still starts at 0.
    assert waiting.result() == {T: DeleteRecordsResult(E.REQUEST_TIMED_OUT, 0)}
    assert h.replica_manager.delete_records_purgatory.expirations == 1
    assert h.partition("t").log.log_start_offset == 6  # the leader's deletion stays


async def test_minus_one_deletes_up_to_the_high_watermark_and_past_it_is_out_of_range(
    h: Harness,
) -> None:
    h.produce("t", [b"uncommitted"], acks=1)  # offset 10, above the high watermark
    assert delete(h, 11) == {T: DeleteRecordsResult(E.OFFSET_OUT_OF_RANGE)}
    assert delete(h, -2) == {T: DeleteRecordsResult(E.OFFSET_OUT_OF_RANGE)}
    assert h.partition("t").log.log_start_offset == 0
    waiting = delete(h, -1)
    assert h.partition("t").log.log_start_offset == 10
    fetch_from(h, 1, 11, 10)
    fetch_from(h, 2, 11, 10)
    await h.settle()
    assert waiting.result() == {T: DeleteRecordsResult(E.NONE, 10)}


async def test_an_offset_every_replica_already_starts_at_is_answered_at_once(
    h: Harness,
) -> None:
    assert delete(h, 0) == {T: DeleteRecordsResult(E.NONE, 0)}


async def test_partitions_it_cannot_delete_from_are_answered_at_once_with_kafkas_errors(
    h: Harness,
) -> None:
    h.create("other")
    h.set_partition("other", 0, leader_id=1, leader_epoch=1)
    h.create(OFFSETS_TOPIC)
    outcome = h.replica_manager.delete_records(
        30_000, {("nope", 0): 0, ("t", 7): 0, ("other", 0): 0, (OFFSETS_TOPIC, 0): 0}
    )
    assert outcome == {
        ("nope", 0): DeleteRecordsResult(E.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 7): DeleteRecordsResult(E.UNKNOWN_TOPIC_OR_PARTITION),
        ("other", 0): DeleteRecordsResult(E.NOT_LEADER_OR_FOLLOWER),
        (OFFSETS_TOPIC, 0): DeleteRecordsResult(E.INVALID_TOPIC_EXCEPTION),
    }


async def test_a_waiting_deletion_whose_leadership_moves_is_answered_not_leader(
    h: Harness,
) -> None:
    waiting = delete(h, 4)
    h.set_partition("t", 0, leader_id=1, leader_epoch=1)
    await h.settle()
    assert waiting.result() == {T: DeleteRecordsResult(E.NOT_LEADER_OR_FOLLOWER)}


async def test_a_compacted_topic_refuses_with_policy_violation() -> None:
    topic_configs = pytest.importorskip("purgatory.broker.config.topic_configs")
    if "cleanup.policy" not in getattr(topic_configs, "TOPIC_CONFIGS", {}):
        pytest.skip("topic configs without cleanup.policy")
    h = Harness()
    h.create("compacted", **{"cleanup.policy": "compact"})
    h.create("both", **{"cleanup.policy": "compact,delete"})
    assert delete(h, 0, key=("compacted", 0)) == {
        ("compacted", 0): DeleteRecordsResult(E.POLICY_VIOLATION)
    }
    both = delete(h, 0, key=("both", 0))  # waits for the followers' first fetches
    assert isinstance(both, asyncio.Future)
    await h.shutdown()


# -- the log and a follower's replica ------------------------------------------------------------


def append(log: Log, *values: bytes) -> None:
    batch = encode_batch([(None, v) for v in values], timestamp_ms=0)
    log.append(batch, validate_batch(batch), 0)


def small_segments() -> Log:
    """Three batches of two records per segment: offsets 0-5, 6-11, 12-13 (active)."""
    log = Log(LogConfig(segment_bytes=3 * 60))
    for i in range(7):
        append(log, b"%02d" % (2 * i), b"%02d" % (2 * i + 1))
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    return log


def test_the_log_start_drops_the_segments_below_it_and_never_moves_back() -> None:
    log = small_segments()
    assert log.maybe_increment_log_start_offset(7)
    assert (log.log_start_offset, log.local_log_start_offset) == (7, 7)
    assert [s.base_offset for s in log.segments] == [6, 12]  # the one holding 7 stays
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 1 << 20)
    assert decode_records(log.read(7, 1 << 20)[0])[0].offset == 6  # its whole batch
    assert log.offset_for_timestamp(0) == (7, 0)
    assert not log.maybe_increment_log_start_offset(3)
    log.delete_old_segments(None)
    assert log.log_start_offset == 7


def test_deleting_up_to_the_log_end_leaves_an_empty_active_segment() -> None:
    log = small_segments()
    size = log.size_bytes
    assert log.maybe_increment_log_start_offset(14)
    assert [s.base_offset for s in log.segments] == [14] and log.size_bytes == 0
    assert log.memory.used == 0 and size > 0
    assert log.read(14, 1 << 20) == []
    append(log, b"next")
    assert decode_records(log.read(14, 1 << 20)[0])[0].offset == 14


async def test_a_follower_takes_the_leaders_log_start_up_to_its_own_high_watermark(
    h: Harness,
) -> None:
    h.set_partition("t", 0, leader_id=1, leader_epoch=1)
    follower = h.partition("t")
    follower.follower_update_high_watermark(6)
    assert follower.follower_update_log_start_offset(8)
    assert follower.log.log_start_offset == 6
    assert not follower.follower_update_log_start_offset(-1)


def test_in_a_tiered_log_the_remote_segments_below_the_start_go_too() -> None:
    log = Log(
        LogConfig(segment_bytes=3 * 60, local_retention_bytes=2 * 60, remote_storage_enable=True)
    )
    for i in range(8):  # segments [0-5], [6-11], [12-15] (active)
        append(log, b"%02d" % (2 * i), b"%02d" % (2 * i + 1))
    for segment in log.segments_to_copy(16):
        log.segment_copied(segment)
    log.delete_old_segments(None)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 12)
    assert log.maybe_increment_log_start_offset(7)
    assert [s.base_offset for s in log.remote_segments] == [6]  # [0-5] gone, [6-11] holds 7
    assert (log.log_start_offset, log.local_log_start_offset) == (7, 12)
    assert log.in_remote_tier(7) and not log.in_remote_tier(6)
    assert log.maybe_increment_log_start_offset(14)
    assert log.remote_segments == [] and log.local_log_start_offset == 14
