from __future__ import annotations

import pytest

from purgatory.broker.log.log import Log, LogConfig, LogMemory, OffsetOutOfRange
from purgatory.protocol.records import decode_records, encode_batch, validate_batch


def append(log: Log, *values: bytes, ts: int = 0) -> int:
    batch = encode_batch([(None, v) for v in values], timestamp_ms=ts)
    return log.append(batch, validate_batch(batch), 0)


def test_offsets_are_assigned_consecutively_across_batches() -> None:
    log = Log()
    assert append(log, b"a", b"b") == 0
    assert append(log, b"c") == 2
    assert log.log_end_offset == 3
    assert [r.offset for b in log.read(0, 10**6) for r in decode_records(b)] == [0, 1, 2]


def test_a_read_from_inside_a_batch_returns_the_whole_batch() -> None:
    log = Log()
    append(log, b"a", b"b", b"c")
    assert [r.value for r in decode_records(b"".join(log.read(1, 10**6)))] == [b"a", b"b", b"c"]


def test_reads_outside_the_log_are_out_of_range_and_at_the_end_empty() -> None:
    log = Log()
    append(log, b"a")
    assert log.read(1, 100) == []
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)


def test_the_first_batch_comes_back_even_beyond_max_bytes_then_the_limit_holds() -> None:
    log = Log()
    append(log, b"x" * 500)
    append(log, b"y" * 500)
    assert len(log.read(0, 10)) == 1
    assert len(log.read(0, 10**6)) == 2


def test_reads_stop_at_the_high_watermark() -> None:
    log = Log()
    append(log, b"a")
    append(log, b"b")
    assert len(log.read(0, 10**6, max_offset=1)) == 1
    assert log.read(1, 10**6, max_offset=1) == []


def test_retention_deletes_whole_old_segments_keeping_at_least_retention_bytes() -> None:
    log = Log(LogConfig(segment_bytes=400, retention_bytes=600))
    for i in range(100):
        append(log, bytes([i]) * 100)
    segment = log.segments[0].size_bytes
    # Kafka's rule: a segment goes only if the log keeps at least retention.bytes without it.
    assert 600 <= log.size_bytes < 600 + segment + log.active_segment.size_bytes
    assert log.log_start_offset == log.local_log_start_offset == log.segments[0].base_offset > 0
    assert log.log_end_offset == 100
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    small = Log(LogConfig(segment_bytes=14, retention_bytes=1))
    append(small, b"big" * 100)
    append(small, b"big" * 100)
    assert len(small) == 1  # the active segment is never deleted


def test_memory_stays_bounded_however_much_is_appended() -> None:
    log = Log(LogConfig(segment_bytes=2_000, retention_bytes=10_000))
    for _ in range(20_000):
        append(log, b"z" * 100)
    assert log.size_bytes <= 10_000 + 2 * 2_000
    assert len(log.segments) <= 7


def test_offset_for_timestamp_finds_the_first_record_at_or_after_it() -> None:
    log = Log()
    append(log, b"a", ts=100)
    batch = encode_batch([(None, b"b", 200), (None, b"c", 300)])
    log.append(batch, validate_batch(batch), 0)
    assert log.offset_for_timestamp(250) == (2, 300)
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(301) is None


def test_available_bytes_counts_whole_batches_from_the_offset_to_the_limit() -> None:
    log = Log(LogConfig(segment_bytes=100))  # reads and counts cross segments
    sizes = []
    for i in range(5):
        batch = encode_batch([(None, b"x" * (10 * (i + 1)))] * 2)
        log.append(batch, validate_batch(batch), 0)
        sizes.append(len(batch))
    assert log.available_bytes(0, 10) == sum(sizes)
    assert log.available_bytes(3, 10) == sum(sizes[1:])  # offset 3 is inside batch 1
    assert log.available_bytes(4, 8) == sizes[2] + sizes[3]
    assert log.available_bytes(10, 10) == 0
    assert log.available_bytes(2, 2) == 0


def test_available_bytes_stays_right_after_retention_deletes_and_compacts() -> None:
    log = Log(LogConfig(segment_bytes=3_000, retention_bytes=50_000))
    for _ in range(5000):
        append(log, b"y" * 100)
    start = log.log_start_offset
    assert log.available_bytes(start, log.log_end_offset) == log.size_bytes
    assert log.available_bytes(start - 1, log.log_end_offset) == 0


def test_the_shared_memory_account_stays_exact_through_every_change() -> None:
    memory = LogMemory()
    logs = [Log(LogConfig(segment_bytes=300, retention_bytes=900), memory) for _ in range(3)]

    def held() -> int:
        return sum(log.size_bytes for log in logs)

    for i in range(60):
        append(logs[i % 3], bytes([i]) * 100)  # appends, rolls, size retention
        assert memory.used == held()
    logs[0].truncate_to(logs[0].log_end_offset - 3)  # a follower's divergent suffix
    assert memory.used == held()
    logs[1].delete_old_segments(now_ms=10**12)  # time retention
    assert memory.used == held()
    logs[2].reset_to(500)
    assert memory.used == held()
    logs[0].release()  # its replica removed: its bytes leave the account
    assert memory.used == logs[1].size_bytes + logs[2].size_bytes


def test_an_append_past_the_trigger_calls_over() -> None:
    calls: list[int] = []
    memory = LogMemory(lambda: calls.append(memory.used))
    memory.trigger = 350  # a batch of one 100-byte record takes 150
    log = Log(memory=memory)
    append(log, b"a" * 100)
    append(log, b"b" * 100)
    assert calls == []
    append(log, b"c" * 100)
    assert calls == [memory.used] and memory.used > 350


def test_eviction_takes_only_closed_committed_segments_and_moves_the_log_start() -> None:
    log = Log(LogConfig(segment_bytes=300))  # two 150-byte batches a segment
    for i in range(6):
        append(log, bytes([i]) * 100)
    assert len(log.segments) == 3 and log.segments[1].base_offset == 2
    assert log.evict_oldest_segment(high_watermark=1) == 0  # offset 1 is not committed
    freed = log.evict_oldest_segment(high_watermark=2)
    assert freed > 0 and log.log_start_offset == log.local_log_start_offset == 2
    assert log.evict_oldest_segment(high_watermark=6) > 0
    assert log.evict_oldest_segment(high_watermark=6) == 0  # the active segment stays
    assert log.log_start_offset == 4 and log.log_end_offset == 6


def test_eviction_in_a_tiered_log_takes_only_what_the_remote_tier_holds() -> None:
    log = Log(LogConfig(segment_bytes=300, remote_storage_enable=True))
    for i in range(6):
        append(log, bytes([i]) * 100)
    assert log.evict_oldest_segment(high_watermark=6) == 0  # not copied yet
    log.segment_copied(log.segments_to_copy(6)[0])
    assert log.evict_oldest_segment(high_watermark=6) > 0
    assert log.log_start_offset == 0 and log.local_log_start_offset == 2  # remote has 0-1


@pytest.mark.parametrize(("policy", "kept"), [("delete", False), ("compact", True), ("", True)])
def test_retention_deletes_only_under_the_delete_cleanup_policy(policy: str, kept: bool) -> None:
    from purgatory.broker.config.broker_config import load_config, validate_topic_configs

    topic = {"cleanup.policy": policy, "segment.bytes": "400", "retention.bytes": "600"}
    configs = {**load_config(environ={}).topic_defaults(), **validate_topic_configs(topic)}
    log = Log(LogConfig.from_topic_configs(configs))
    for i in range(30):
        append(log, bytes([i]) * 100, ts=0)
    log.delete_old_segments(10**13)  # long past retention.ms too
    assert (log.log_start_offset == 0) is kept


def test_the_active_segment_rolls_when_a_batch_is_segment_ms_past_its_first() -> None:
    # Kafka's rule by record timestamps: the first batch's at 1,000 starts the clock.
    log = Log(LogConfig(segment_ms=100))
    append(log, b"a", ts=1_000)
    append(log, b"b", ts=1_100)  # exactly segment.ms past: not yet
    assert len(log.segments) == 1
    append(log, b"c", ts=1_101)
    assert [s.base_offset for s in log.segments] == [0, 2]
    append(log, b"d", ts=1_150)  # the new segment's clock started at 1,101
    append(log, b"e", ts=1_202)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]


def test_a_segment_whose_first_batch_has_no_timestamp_rolls_by_size_only() -> None:
    log = Log(LogConfig(segment_ms=100))
    append(log, b"a", ts=-1)
    append(log, b"b", ts=10_000)
    assert len(log.segments) == 1


def test_after_a_truncation_the_segment_active_again_keeps_its_first_timestamp() -> None:
    log = Log(LogConfig(segment_ms=100))
    append(log, b"a", ts=1_000)
    append(log, b"b", ts=1_101)  # rolls: a second segment starts at offset 1
    log.truncate_to(1)  # gone again: the first segment is the active one
    assert [s.base_offset for s in log.segments] == [0]
    append(log, b"c", ts=1_050)
    assert len(log.segments) == 1
    append(log, b"d", ts=1_101)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_an_empty_follower_starting_inside_the_leaders_first_batch_takes_it_whole() -> None:
    # DeleteRecords moved the leader's log start into a batch: a follower that starts over
    # there (empty, at offset 3) is sent the batch holding it, from offset 0.
    leader = Log()
    append(leader, b"a", b"b", b"c", b"d", b"e", b"f")
    assert leader.maybe_increment_log_start_offset(3)
    [batch] = leader.read(3, 10**6)
    follower = Log()
    follower.reset_to(3)
    follower.append_as_follower(batch, validate_batch(batch, verify_records=False))
    assert (follower.log_start_offset, follower.log_end_offset) == (3, 6)
    assert [r.offset for b in follower.read(3, 10**6) for r in decode_records(b)] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]
    with pytest.raises(OffsetOutOfRange):
        follower.read(2, 10**6)
    # A follower that holds records still refuses a batch from before its end.
    with pytest.raises(ValueError, match="starts at offset 0"):
        follower.append_as_follower(batch, validate_batch(batch, verify_records=False))
