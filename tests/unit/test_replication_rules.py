"""The Kafka layer's rules on the in-memory harness (manual clock, no sockets): each
lettered completion case of DelayedFetch, DelayedProduce and DelayedRemoteFetch, the high
watermark, and ISR shrink and expand."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from purgatory.protocol.errors import ErrorCode
from tests.harness import Harness, error_of, records_of


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness(**{"replica.lag.time.max.ms": 10_000, "replica.fetch.wait.max.ms": 500})
    harness.create("t")
    yield harness
    await harness.shutdown()


async def committed(h: Harness, values: list[bytes]) -> int:
    """Append and let both followers catch up; the new high watermark."""
    h.produce("t", values, acks=1)
    end = h.partition("t").log.log_end_offset
    h.follower_fetch(1, "t", end)
    h.follower_fetch(2, "t", end)
    return h.partition("t").high_watermark


# -- DelayedFetch ------------------------------------------------------------------------


async def test_fetch_case_a_a_waiting_fetch_completes_when_leadership_moves_away(
    h: Harness,
) -> None:
    waiting = h.fetch("t", 0)
    assert not waiting.done()
    await h.advance(30)
    h.set_partition("t", 0, leader_id=1, leader_epoch=1)
    await h.settle()
    assert waiting.done() and error_of(waiting.result()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert waiting.result().wait_ms == 30


async def test_fetch_case_a_a_waiting_fetch_completes_fenced_when_its_leader_epoch_moves_on(
    h: Harness,
) -> None:
    """Leadership went away and came back (a new leader epoch): the fetcher's view of the
    leader is stale even though this broker leads again (KIP-320)."""
    waiting = h.fetch("t", 0, leader_epoch=0)
    assert not waiting.done()
    h.set_partition("t", 0, leader_epoch=1)
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.FENCED_LEADER_EPOCH


async def test_a_fetch_is_checked_against_the_leader_epoch_it_knows(h: Harness) -> None:
    h.set_partition("t", 0, leader_epoch=3)
    await committed(h, [b"a"])
    older = await h.fetch("t", 0, leader_epoch=2)
    newer = await h.fetch("t", 0, leader_epoch=4)
    current = await h.fetch("t", 0, leader_epoch=3)
    unchecked = await h.fetch("t", 0)
    assert error_of(older) == ErrorCode.FENCED_LEADER_EPOCH
    assert error_of(newer) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert error_of(current) == error_of(unchecked) == ErrorCode.NONE
    assert records_of(current) == records_of(unchecked) != b""


async def test_fetch_case_b_a_waiting_fetch_completes_when_its_topic_is_deleted(
    h: Harness,
) -> None:
    waiting = h.fetch("t", 0)
    h.delete("t")
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fetch_case_c_an_offset_that_retention_deleted_completes_at_the_next_check() -> None:
    # Followers that never fetch must not leave the ISR meanwhile (that would move the HW).
    h = Harness(**{"replica.lag.time.max.ms": 600_000, "log.retention.check.interval.ms": 1_000})
    h.create("t", **{"segment.bytes": "1024", "retention.ms": "60000"})
    for _ in range(6):
        h.produce("t", [b"x" * 300], acks=1)  # several segments; followers never fetch
    waiting = h.fetch("t", 0, max_wait_ms=120_000)  # nothing below the HW (0): it waits
    await h.advance(61_000)  # retention.ms passes; the retention check runs
    assert not waiting.done()
    assert h.partition("t").log.local_log_start_offset > 0
    h.produce("t", [b"y"], acks=1)  # the next check finds offset 0 gone
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.OFFSET_OUT_OF_RANGE
    await h.shutdown()


async def test_fetch_case_d_min_bytes_arriving_completes_it_with_the_time_it_waited(
    h: Harness,
) -> None:
    waiting = h.fetch("t", 0, min_bytes=1)
    await h.advance(120)
    h.produce("t", [b"v"], acks=1)
    assert not waiting.done()  # a consumer reads below the high watermark only
    await h.advance(5)
    h.follower_fetch(1, "t", 1)
    h.follower_fetch(2, "t", 1)  # the high watermark reaches 1
    await h.settle()
    response = waiting.result()
    assert error_of(response) == ErrorCode.NONE and records_of(response)
    assert response.wait_ms == 125


async def test_fetch_case_e_max_wait_passing_answers_empty_with_the_whole_wait(
    h: Harness,
) -> None:
    waiting = h.fetch("t", 0, max_wait_ms=500)
    await h.advance(499)
    assert not waiting.done()
    await h.advance(1)
    response = waiting.result()
    assert error_of(response) == ErrorCode.NONE
    assert records_of(response) == b""
    assert response.wait_ms == 500


async def test_a_follower_fetch_waits_for_the_log_end_not_the_high_watermark(
    h: Harness,
) -> None:
    parked = h.fetch("t", 0, replica_id=1)
    h.produce("t", [b"v"], acks=1)  # the HW stays 0: follower 2 has not fetched
    await h.settle()
    assert parked.done() and records_of(parked.result())


# -- DelayedProduce ----------------------------------------------------------------------


async def test_produce_case_b_acks_all_completes_when_the_high_watermark_reaches_the_batch(
    h: Harness,
) -> None:
    waiting = h.produce("t", [b"a", b"b"])
    assert not waiting.done()
    h.follower_fetch(1, "t", 2)
    await h.settle()
    assert not waiting.done()  # follower 2 is still behind
    h.follower_fetch(2, "t", 2)
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.NONE
    assert waiting.result().base_offset == 0


async def test_produce_case_a_leadership_moving_away_answers_not_leader(h: Harness) -> None:
    waiting = h.produce("t", [b"a"])
    h.set_partition("t", 0, leader_id=1, leader_epoch=1)
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_produce_case_a_a_deleted_topic_answers_unknown_partition(h: Harness) -> None:
    waiting = h.produce("t", [b"a"])
    h.delete("t")
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_produce_case_c_the_request_timeout_answers_request_timed_out(
    h: Harness,
) -> None:
    waiting = h.produce("t", [b"a"], timeout_ms=2_000)
    await h.advance(1_999)
    assert not waiting.done()
    await h.advance(1)
    assert error_of(waiting.result()) == ErrorCode.REQUEST_TIMED_OUT


async def test_produce_case_b_an_isr_below_min_insync_answers_not_enough_replicas_after_append() -> (
    None
):
    h = Harness(**{"replica.lag.time.max.ms": 10_000, "replica.fetch.wait.max.ms": 500})
    h.create("t", **{"min.insync.replicas": "2"})
    waiting = h.produce("t", [b"a"])
    h.set_partition("t", 0, isr=[0])  # the ISR shrank to the leader alone meanwhile
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert error_of(h.produce("t", [b"b"]).result()) == ErrorCode.NOT_ENOUGH_REPLICAS  # refused now
    await h.shutdown()


# -- high watermark and ISR --------------------------------------------------------------


async def test_the_high_watermark_is_the_smallest_log_end_in_the_isr(h: Harness) -> None:
    h.produce("t", [b"a", b"b", b"c"], acks=1)
    h.follower_fetch(1, "t", 3)
    h.follower_fetch(2, "t", 1)
    assert h.partition("t").high_watermark == 1
    h.follower_fetch(2, "t", 3)
    assert h.partition("t").high_watermark == 3


async def test_a_follower_behind_for_replica_lag_time_leaves_the_isr(h: Harness) -> None:
    await committed(h, [b"a"])
    h.produce("t", [b"b"], acks=1)
    h.follower_fetch(1, "t", 2)  # follower 1 keeps up; follower 2 stops fetching
    await h.advance(9_000)
    h.follower_fetch(1, "t", 2)
    assert h.partition("t").isr == [0, 1, 2]  # not yet: 10 s have not passed
    await h.advance(6_000)  # the check runs every lag/2 = 5 s
    assert h.partition("t").isr == [0, 1]
    assert h.partition("t").high_watermark == 2  # the HW no longer waits for follower 2


async def test_a_follower_that_catches_up_rejoins_the_isr(h: Harness) -> None:
    h.set_partition("t", 0, isr=[0, 1])
    await committed(h, [b"a", b"b"])
    assert h.partition("t").isr == [0, 1]
    h.follower_fetch(2, "t", 2)  # it reached the high watermark
    await h.settle()
    assert h.partition("t").isr == [0, 1, 2]
    assert [r.isr for r in h.alter_requests] == [[0, 1, 2]]


async def test_only_the_follower_that_fetched_may_join_the_isr(h: Harness) -> None:
    """Kafka asks whether the follower that just fetched is in sync, never the others: a
    follower that is dead (never fetches) is not proposed on another's fetches."""
    h.set_partition("t", 0, isr=[0, 1])
    await h.settle()
    for _ in range(3):
        h.follower_fetch(1, "t", 0)
    await h.settle()
    assert h.alter_requests == [] and h.partition("t").isr == [0, 1]


async def test_a_new_leader_knows_no_follower_log_end_until_it_fetches(h: Harness) -> None:
    """A new leadership (a new leader epoch) forgets what followers held: they join the
    ISR, and move the high watermark, only from their fetches to this leadership."""
    await committed(h, [b"a"])
    h.set_partition("t", 0, isr=[0, 1], leader_epoch=1)
    await h.settle()
    h.produce("t", [b"b"], acks=1)
    assert h.partition("t").high_watermark == 1  # follower 1 has not fetched since
    h.follower_fetch(1, "t", 2)
    assert h.partition("t").high_watermark == 2
    await h.settle()
    assert h.alter_requests == []  # follower 2, silent, is not proposed
    h.follower_fetch(2, "t", 2)
    await h.settle()
    assert [r.isr for r in h.alter_requests] == [[0, 1, 2]]


async def test_a_lowered_replica_lag_time_applies_from_the_next_check(h: Harness) -> None:
    h.produce("t", [b"a"], acks=1)
    h.follower_fetch(1, "t", 1)
    h.follower_fetch(2, "t", 1)
    h.config.set_dynamic("replica.lag.time.max.ms", 2_000, at="now")
    h.replica_manager.lag_time_changed()  # checks every 1 s from now on
    await h.advance(1_500)
    h.follower_fetch(1, "t", 1)  # follower 1 keeps fetching; follower 2 went quiet
    await h.advance(1_500)
    assert h.partition("t").isr == [0, 1]


# -- DelayedRemoteFetch ------------------------------------------------------------------


def remote_harness(read_ms: int, timeout_ms: int) -> Harness:
    h = Harness(
        **{
            "remote.storage.latency.ms": read_ms,
            "remote.fetch.max.wait.ms": timeout_ms,
            "remote.log.reader.threads": 1,
        }
    )
    h.create(
        "cold",
        **{
            "remote.log.storage.enable": "true",
            "segment.bytes": "1024",
            "local.retention.bytes": "0",
        },
    )
    return h


def tiered(read_ms: int, timeout_ms: int) -> Harness:
    """A tiered topic whose first records live only in the remote tier."""
    h = remote_harness(read_ms, timeout_ms)
    for _ in range(6):
        h.produce("cold", [b"x" * 300], acks=1)
    end = h.partition("cold").log.log_end_offset
    h.follower_fetch(1, "cold", end)
    h.follower_fetch(2, "cold", end)
    h.replica_manager.remote_log_manager.run_once(h.clock.wall_ms())
    assert h.partition("cold").log.local_log_start_offset > 0
    return h


async def test_remote_fetch_case_a_finished_reads_answer_with_their_records() -> None:
    h = tiered(read_ms=0, timeout_ms=10_000)
    waiting = h.fetch("cold", 0)
    assert not waiting.done()  # the read runs in the reader pool
    for _ in range(5):
        await h.settle()
    response = waiting.result()
    assert error_of(response) == ErrorCode.NONE
    assert records_of(response)
    await h.shutdown()


async def test_remote_fetch_case_b_leadership_moving_away_completes_it() -> None:
    h = tiered(read_ms=50, timeout_ms=10_000)  # the read is still running when it moves
    waiting = h.fetch("cold", 0)
    h.set_partition("cold", 0, leader_id=1, leader_epoch=1)
    await h.settle()
    assert error_of(waiting.result()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await h.shutdown()


async def test_remote_fetch_case_c_expiry_answers_empty_without_error() -> None:
    h = tiered(read_ms=300, timeout_ms=200)  # real time: the read outlasts the manual 200 ms
    waiting = h.fetch("cold", 0)
    assert not waiting.done()
    await h.advance(200)
    response = waiting.result()
    assert error_of(response) == ErrorCode.NONE
    assert records_of(response) == b""
    assert response.wait_ms == 200
    await h.shutdown()
