"""A log's leader-epoch cache and truncation (KIP-101): what a follower relies on to drop a
suffix that never reached the ISR."""

from __future__ import annotations

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
    cache.assign(1, 0)
    cache.assign(4, 10)
    assert cache.end_offset_for(1, 25) == EpochEndOffset(1, 10)
    assert cache.end_offset_for(3, 25) == EpochEndOffset(1, 10)  # the largest epoch <= 3
    assert cache.end_offset_for(4, 25) == EpochEndOffset(4, 25)
    assert cache.end_offset_for(9, 25) == EpochEndOffset(4, 25)
    assert cache.end_offset_for(0, 25) == EpochEndOffset(-1, -1)  # older than anything held


def test_an_older_or_repeated_epoch_is_not_assigned() -> None:
    cache = LeaderEpochCache()
    cache.assign(2, 5)
    cache.assign(2, 9)
    cache.assign(1, 12)
    assert cache.entries() == [(2, 5)]


def test_a_follower_keeps_the_epochs_stamped_on_the_batches_it_replicates() -> None:
    leader, follower = Log(), Log()
    append(leader, 0, b"a")
    append(leader, 2, b"b")
    for batch in leader.read(0, 1 << 30):
        follower.append_as_follower(
            batch, validate_batch(batch, verify_records=False), len(values(follower))
        )
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
