"""A log's leader-epoch cache and truncation (KIP-101): what a follower relies on to drop a
suffix that never reached the ISR."""

from __future__ import annotations

import pytest

from purgatory.broker.log.leader_epoch_cache import EpochEndOffset, LeaderEpochCache
from purgatory.broker.log.log import Log, LogConfig
from purgatory.protocol.records import decode_records, encode_batch, validate_batch


def append(log: Log, epoch: int, *values: bytes) -> int:
    batch = encode_batch([(None, v) for v in values])
    return log.append(batch, validate_batch(batch), epoch)


def values(log: Log) -> list[bytes]:
    return [r.value or b"" for b in log.read(0, 1 << 30) for r in decode_records(b)]


def test_each_epoch_starts_where_its_first_record_went() -> None:
    log = Log()
    append(log, 0, b"a", b"b")
    append(log, 0, b"c")
    append(log, 3, b"d")
    assert log.leader_epochs.entries() == [(0, 0), (3, 3)]


def test_the_end_of_an_epoch_is_the_start_of_the_next_and_the_latest_ends_at_the_log_end() -> None:
    cache = LeaderEpochCache()
    cache.assign(1, 5)
    cache.assign(4, 10)
    assert cache.end_offset_for(1, 25) == EpochEndOffset(1, 10)
    assert cache.end_offset_for(3, 25) == EpochEndOffset(1, 10)  # the largest epoch <= 3
    assert cache.end_offset_for(4, 25) == EpochEndOffset(4, 25)


def test_an_epoch_outside_the_cache_is_answered_as_kafkas_leader_epoch_file_cache() -> None:
    cache = LeaderEpochCache()
    assert cache.end_offset_for(0, 7) == EpochEndOffset(-1, -1)  # nothing held
    cache.assign(1, 5)
    cache.assign(4, 10)
    assert cache.end_offset_for(9, 25) == EpochEndOffset(-1, -1)  # newer than the latest
    assert cache.end_offset_for(-1, 25) == EpochEndOffset(-1, -1)  # no epoch
    # Older than anything held (deleted): that epoch, ending where the first one held starts.
    assert cache.end_offset_for(0, 25) == EpochEndOffset(0, 5)


def test_an_older_or_repeated_epoch_is_not_assigned() -> None:
    cache = LeaderEpochCache()
    cache.assign(2, 5)
    cache.assign(2, 9)
    cache.assign(1, 12)
    assert cache.entries() == [(2, 5)]


def test_the_latest_epoch_follows_every_change_to_the_cache() -> None:
    cache = LeaderEpochCache()
    assert cache.latest_epoch == -1
    cache.assign(-1, 0)  # no epoch (an old message format) is never kept
    assert cache.latest_epoch == -1 and cache.entries() == []
    cache.assign(1, 0)
    cache.assign(4, 10)
    cache.assign(2, 12)
    assert cache.latest_epoch == 4
    cache.truncate_from_start(11)
    assert cache.latest_epoch == 4 and cache.entries() == [(4, 11)]
    cache.assign(6, 20)
    cache.truncate_from_end(20)
    assert cache.latest_epoch == 4
    cache.truncate_from_end(0)
    assert cache.latest_epoch == -1 and cache.entries() == []
    cache.assign(7, 30)
    cache.clear()
    assert cache.latest_epoch == -1


def test_a_follower_refuses_a_batch_that_does_not_start_at_its_log_end() -> None:
    leader, follower = Log(), Log()
    append(leader, 0, b"a")
    append(leader, 0, b"b")
    second = leader.read(1, 1 << 30)[0]
    with pytest.raises(ValueError, match="starts at offset 1, the log ends at 0"):
        follower.append_as_follower(second, validate_batch(second, verify_records=False))
    assert follower.log_end_offset == 0 and follower.leader_epochs.entries() == []


def test_a_follower_keeps_the_epochs_stamped_on_the_batches_it_replicates() -> None:
    leader, follower = Log(), Log()
    append(leader, 0, b"a")
    append(leader, 2, b"b")
    for batch in leader.read(0, 1 << 30):
        follower.append_as_follower(batch, validate_batch(batch, verify_records=False))
    assert follower.leader_epochs.entries() == [(0, 0), (2, 1)]


def test_truncation_drops_whole_batches_from_the_offset_and_forgets_their_epochs() -> None:
    log = Log(LogConfig(segment_bytes=200))
    for i in range(10):
        append(log, i // 4, b"v%d" % i)  # epochs 0, 0, 0, 0, 1, 1, 1, 1, 2, 2
    assert len(log.segments) > 1
    log.truncate_to(6)
    assert log.log_end_offset == 6 and values(log) == [b"v%d" % i for i in range(6)]
    assert log.leader_epochs.entries() == [(0, 0), (1, 4)]
    append(log, 5, b"new")
    assert values(log)[-1] == b"new" and log.log_end_offset == 7


def test_truncating_inside_a_batch_drops_that_batch() -> None:
    log = Log()
    append(log, 0, b"a", b"b", b"c")
    append(log, 1, b"d")
    log.truncate_to(2)
    assert log.log_end_offset == 0 and values(log) == []
    assert log.leader_epochs.entries() == []


def test_retention_moves_the_first_epoch_start_to_the_new_log_start() -> None:
    cache = LeaderEpochCache()
    for epoch, start in ((0, 0), (1, 10), (2, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_start(15)
    assert cache.entries() == [(1, 15), (2, 20)]
