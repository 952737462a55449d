"""ShareSessionCache: share sessions opened, continued and closed by epoch (Kafka's
SharePartitionManager.newContext and acknowledgeSessionUpdate rules), and evicted."""

from __future__ import annotations

from purgatory.broker.share.share_session_cache import (
    ShareSession,
    ShareSessionCache,
    next_epoch,
)
from purgatory.protocol.errors import ErrorCode

A = ("aaaa", 0)
B = ("aaaa", 1)
C = ("bbbb", 0)


def opened(cache: ShareSessionCache, member: str = "m1", now_ms: int = 0) -> ShareSession:
    session = cache.open("g", member, [A, B], now_ms)
    assert isinstance(session, ShareSession)
    return session


def test_opening_a_session_holds_its_partitions_and_expects_epoch_one() -> None:
    cache = ShareSessionCache(10, 1000)
    session = opened(cache)
    assert list(session.partitions) == [A, B]
    assert session.epoch == 1
    assert cache.get("g", "m1") is session
    assert cache.get("g", "m2") is None
    assert cache.get("other", "m1") is None
    assert cache.total_partitions == 2


def test_each_continuing_request_must_carry_the_next_epoch() -> None:
    cache = ShareSessionCache(10, 1000)
    opened(cache)
    for epoch in (1, 2, 3):
        session = cache.continue_session("g", "m1", epoch, [], [], 10)
        assert isinstance(session, ShareSession)
        assert session.epoch == epoch + 1
    assert cache.continue_session("g", "m1", 3, [], [], 10) == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    assert cache.continue_session("g", "m1", 5, [], [], 10) == (
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    # A refused request changes nothing: the expected epoch is still 4.
    assert cache.get("g", "m1").epoch == 4  # type: ignore[union-attr]


def test_a_request_of_a_session_that_does_not_exist_is_share_session_not_found() -> None:
    cache = ShareSessionCache(10, 1000)
    assert cache.continue_session("g", "m1", 1, [A], [], 0) == ErrorCode.SHARE_SESSION_NOT_FOUND
    opened(cache, "m1")
    assert cache.continue_session("g", "m2", 1, [A], [], 0) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.continue_session("h", "m1", 1, [A], [], 0) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_an_incremental_request_adds_partitions_and_forgets_others() -> None:
    cache = ShareSessionCache(10, 1000)
    opened(cache)
    session = cache.continue_session("g", "m1", 1, [C, A], [B], 5)
    assert isinstance(session, ShareSession)
    assert list(session.partitions) == [A, C]
    session = cache.continue_session("g", "m1", 2, [], [A, C, ("cccc", 9)], 6)
    assert isinstance(session, ShareSession)
    assert not session.partitions


def test_epoch_zero_replaces_the_members_session() -> None:
    cache = ShareSessionCache(10, 1000)
    opened(cache)
    cache.continue_session("g", "m1", 1, [C], [], 1)
    session = cache.open("g", "m1", [C], 2)
    assert isinstance(session, ShareSession)
    assert list(session.partitions) == [C]
    assert session.epoch == 1
    assert len(cache) == 1


def test_closing_removes_the_session() -> None:
    cache = ShareSessionCache(10, 1000)
    session = opened(cache)
    assert cache.remove("g", "m1") is session
    assert cache.remove("g", "m1") is None
    assert cache.continue_session("g", "m1", 1, [], [], 0) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_share_acknowledge_epochs() -> None:
    cache = ShareSessionCache(10, 1000)
    assert cache.acknowledge("g", "m1", 1, 0) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge("g", "m1", -1, 0) == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = opened(cache)
    # An acknowledgement cannot open a session, even one that exists.
    assert cache.acknowledge("g", "m1", 0, 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge("g", "m1", 2, 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge("g", "m1", 1, 0) is session
    assert session.epoch == 2
    # The final epoch finds the session and leaves its epoch (the caller closes it).
    assert cache.acknowledge("g", "m1", -1, 0) is session
    assert session.epoch == 2
    assert cache.continue_session("g", "m1", 2, [], [], 0) is session


def test_a_full_cache_evicts_only_a_session_idle_longer_than_the_eviction_time() -> None:
    cache = ShareSessionCache(2, 1000)
    opened(cache, "m1", now_ms=0)
    opened(cache, "m2", now_ms=100)
    cache.continue_session("g", "m1", 1, [], [], 500)  # m2 is now the least recently used
    assert cache.open("g", "m3", [A], 1000) == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.open("g", "m3", [A], 1100) == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = cache.open("g", "m3", [A], 1101)
    assert isinstance(session, ShareSession)
    assert cache.get("g", "m2") is None
    assert cache.get("g", "m1") is not None
    # A member reopening its own session in a full cache needs no eviction.
    assert isinstance(cache.open("g", "m1", [B], 1102), ShareSession)
    assert len(cache) == 2


def test_epochs_wrap_to_one_and_the_final_epoch_stays() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == -1
