"""The log cleaner (broker/log/cleaner/) on in-memory logs and a manual clock."""

from __future__ import annotations

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.log.cleaner.cleaner import Cleaning
from purgatory.broker.log.cleaner.cleaner_manager import (
    LogCleanerManager,
    cleanable_range,
    dirty_ratio,
)
from purgatory.broker.log.cleaner.log_cleaner import LogCleaner
from purgatory.broker.log.log import Log, LogConfig
from purgatory.broker.log.log_validator import LogValidator, RecordValidationError
from purgatory.broker.purgatory import ManualScheduler
from purgatory.protocol import kafka_records
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import ConsumerRecord, decode_records, encode_batch, validate_batch

NOW = 1_700_000_000_000
DAY = 86_400_000


def compacted(**kw: object) -> Log:
    fields: dict[str, object] = {"segment_bytes": 600, "compact": True}
    fields.update(kw)
    return Log(LogConfig(**fields))  # type: ignore[arg-type]


def put(
    log: Log,
    records: list[tuple[bytes | None, bytes | None]],
    ts: int = NOW - DAY,
    **producer: int,
) -> int:
    batch = kafka_records.encode([(ts, k, v, []) for k, v in records], **producer)
    info = validate_batch(batch)
    return log.append(batch, info, 0)


def everything(log: Log) -> list[ConsumerRecord]:
    return decode_records(b"".join(log.read(log.local_log_start_offset, 1 << 30)))


def clean(log: Log, now: int = NOW, horizons: dict[int, int] | None = None, **kw: int) -> Cleaning:
    _first_dirty, end = cleanable_range(log, log.log_end_offset, now)
    cleaning = Cleaning(log, end, now, {} if horizons is None else horizons, **kw)
    for _ in cleaning.slices():
        pass
    return cleaning


def updates(log: Log, n: int, keys: int = 10) -> None:
    for i in range(n):
        put(log, [(b"k%d" % (i % keys), b"v%d" % i)])


def test_cleaning_keeps_the_latest_record_of_each_key_at_its_offset() -> None:
    log = compacted()
    updates(log, 300)
    end_before, size_before = log.log_end_offset, log.size_bytes
    active_base = log.active_segment.base_offset
    cleaning = clean(log)
    records = everything(log)
    assert log.log_end_offset == end_before  # the log end never moves
    assert log.size_bytes < size_before / 5
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))  # gaps, never a reused offset
    latest = {r.key: r for r in records}
    assert {k: r.value for k, r in latest.items()} == {
        b"k%d" % k: b"v%d" % max(i for i in range(300) if i % 10 == k) for k in range(10)
    }
    for r in records:  # every record kept is where it was written
        assert r.value == b"v%d" % r.offset
    cleaned = [r for r in records if r.offset < active_base]
    assert len({r.key for r in cleaned}) == len(cleaned)  # one per key below the active segment
    assert log.cleaner_checkpoint == active_base
    assert cleaning.stats.records_removed == cleaning.stats.records_read - len(cleaned)
    # A consumer reading from an offset the cleaner removed gets the next record kept.
    gap = next(o for o in range(active_base) if o not in offsets)
    assert decode_records(b"".join(log.read(gap, 1 << 20)))[-1].offset >= gap


def test_dirty_ratio_counts_bytes_past_the_cleaner_checkpoint() -> None:
    log = compacted(min_cleanable_dirty_ratio=0.5)
    updates(log, 200)
    first_dirty, end = cleanable_range(log, log.log_end_offset, NOW)
    assert (first_dirty, end) == (0, log.active_segment.base_offset)
    assert dirty_ratio(log, first_dirty, end) == 1.0
    manager = LogCleanerManager()
    assert manager.grab_filthiest([("t-0", log, log.log_end_offset)], NOW) is not None
    clean(log)
    first_dirty, end = cleanable_range(log, log.log_end_offset, NOW)
    assert dirty_ratio(log, first_dirty, end) == 0.0
    assert manager.grab_filthiest([("t-0", log, log.log_end_offset)], NOW) is None
    # A few segments more: dirty, but under the ratio.
    while len(log.segments) < 4:
        updates(log, 1)
    first_dirty, end = cleanable_range(log, log.log_end_offset, NOW)
    ratio = dirty_ratio(log, first_dirty, end)
    assert 0 < ratio < 0.9
    assert manager.grab_filthiest([("t-0", log, log.log_end_offset)], NOW) is None
    log_low = compacted(min_cleanable_dirty_ratio=ratio / 2)
    log_low.segments, log_low.cleaner_checkpoint = log.segments, log.cleaner_checkpoint
    assert manager.grab_filthiest([("t-0", log_low, log.log_end_offset)], NOW) is not None


def test_nothing_past_the_high_watermark_or_the_active_segment_is_cleaned() -> None:
    log = compacted()
    updates(log, 100)
    hw = log.segments[2].base_offset + 1  # inside the third segment
    _, end = cleanable_range(log, hw, NOW)
    assert end == log.segments[1].next_offset
    assert LogCleanerManager().grab_filthiest([("t", compacted(), 0)], NOW) is None
    assert not [r for r in everything(log) if r.offset >= end and r.value is None]


def test_min_compaction_lag_keeps_young_records_dirty() -> None:
    log = compacted(min_compaction_lag_ms=60_000)
    for i in range(60):  # old records, then young ones
        put(log, [(b"k%d" % (i % 3), b"v%d" % i)], ts=NOW - DAY if i < 30 else NOW - 1_000)
    _first_dirty, end = cleanable_range(log, log.log_end_offset, NOW)
    young = next(s for s in log.segments if s.max_timestamp > NOW - 60_000)
    assert end <= young.base_offset
    clean(log)
    assert [r.offset for r in everything(log) if r.offset >= young.base_offset] == list(
        range(young.base_offset, 60)
    )
    _, later_end = cleanable_range(log, log.log_end_offset, NOW + 120_000)
    assert later_end == log.active_segment.base_offset


def test_max_compaction_lag_forces_cleaning_under_the_ratio() -> None:
    log = compacted(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=DAY)
    updates(log, 100)
    manager = LogCleanerManager()
    assert manager.grab_filthiest([("t", log, log.log_end_offset)], NOW - DAY + 1) is None
    chosen = manager.grab_filthiest([("t", log, log.log_end_offset)], NOW + 1)
    assert chosen is not None and chosen.forced


def test_tombstones_go_once_delete_retention_passed_since_they_were_cleaned() -> None:
    log = compacted(delete_retention_ms=60_000)
    updates(log, 50, keys=5)
    put(log, [(b"k4", None)])  # a tombstone
    updates(log, 60, keys=3)  # k0..k2 again; k3 and k4's tombstone stay
    horizons: dict[int, int] = {}
    clean(log, NOW, horizons)
    assert b"k4" in {r.key for r in everything(log)}  # kept: its horizon starts now
    assert list(horizons.values()) == [NOW + 60_000]
    manager = LogCleanerManager()
    manager.horizons["t"] = horizons
    assert manager.grab_filthiest([("t", log, log.log_end_offset)], NOW + 59_999) is None
    chosen = manager.grab_filthiest([("t", log, log.log_end_offset)], NOW + 60_000)
    assert chosen is not None and chosen.forced
    cleaning = Cleaning(log, chosen.end, NOW + 60_000, horizons)
    for _ in cleaning.slices():
        pass
    keys = {r.key for r in everything(log)}
    assert b"k4" not in keys and b"k3" in keys
    assert cleaning.stats.tombstones_removed == 1
    assert horizons == {}


def test_each_slice_reads_a_bounded_number_of_records() -> None:
    log = compacted(segment_bytes=4000)
    for i in range(200):  # batches of 5 records
        put(log, [(b"k%d" % ((5 * i + j) % 37), b"v") for j in range(5)])
    _, end = cleanable_range(log, log.log_end_offset, NOW)
    cleaning = Cleaning(log, end, NOW, {}, slice_records=50)
    steps = sum(1 for _ in cleaning.slices())
    stats = cleaning.stats
    assert stats.max_slice_records <= 50 + 5 - 1  # whole batches: up to one more batch
    assert steps >= (stats.map_records + stats.records_read) // 55
    assert stats.slices == steps + 1


def test_an_idempotent_producers_last_batch_survives_emptied() -> None:
    log = compacted()
    for seq in range(0, 30, 3):  # producer 7: 10 batches of 3 records, keys a, b, c
        batch = kafka_records.encode(
            [(NOW, k, b"p%d" % seq, []) for k in (b"a", b"b", b"c")],
            producer_id=7,
            producer_epoch=0,
            base_sequence=seq,
        )
        log.producer_state.check(validate_batch(batch))
        log.append(batch, validate_batch(batch), 0)
    last_of_7 = log.log_end_offset - 1
    updates(log, 60, keys=3)  # another writer supersedes every key (a, b, c are k0..k2? no)
    for k in (b"a", b"b", b"c"):
        put(log, [(k, b"new")])
    updates(log, 30, keys=3)  # roll on past them
    clean(log)
    stored = [b for s in log.segments for b in s.batches]
    producer_batches = [b for b in stored if int.from_bytes(b[43:51], "big") == 7]
    assert len(producer_batches) == 1  # only its last batch, empty, is left
    info = kafka_records.validate(producer_batches[0], stored=True)
    assert (info.base_offset + info.record_count - 1, info.base_sequence) == (last_of_7, 27)
    assert int.from_bytes(producer_batches[0][57:61], "big") == 0
    assert decode_records(producer_batches[0]) == []  # a consumer reads nothing from it
    # A follower replicating the cleaned log learns the producer's sequence from it.
    follower = compacted()
    for batch in stored:
        follower.append_as_follower(batch, validate_batch(batch, verify_records=False, stored=True))
    assert follower.log_end_offset == log.log_end_offset
    assert follower.producer_state.producers[7].last_sequence == 29
    retry = kafka_records.encode(
        [(NOW, b"a", b"x", [])], producer_id=7, producer_epoch=0, base_sequence=31
    )
    with pytest.raises(Exception, match="expected 30"):
        follower.producer_state.check(validate_batch(retry))


def test_our_own_batches_are_split_at_the_records_removed() -> None:
    log = compacted()
    for i in range(40):
        batch = encode_batch([(b"a", b"%d" % i), (b"k%d" % i, b"x"), (b"b", b"%d" % i)])
        log.append(batch, validate_batch(batch), 0)
    active_base = log.active_segment.base_offset
    assert active_base > 60
    clean(log)
    records = everything(log)
    for r in records:
        assert r.value == (b"x" if r.key == b"k%d" % (r.offset // 3) else b"%d" % (r.offset // 3))
    assert len([r for r in records if r.key == b"a" and r.offset < active_base]) == 1
    assert len([r for r in records if r.offset < active_base]) == active_base // 3 + 2


def test_keyless_records_are_refused_on_a_compacted_topic() -> None:
    validator = LogValidator(2**63 - 1, 2**63 - 1, 1 << 20, compacted=True)
    batch = kafka_records.encode([(NOW, b"k", b"v", []), (NOW, None, b"v", [])])
    with pytest.raises(RecordValidationError) as refused:
        validator.validate(batch, NOW)
    assert refused.value.code == ErrorCode.INVALID_RECORD
    assert "Compacted topic cannot accept message without key" in refused.value.message
    assert refused.value.record_errors[0][0] == 1
    with pytest.raises(RecordValidationError):
        validator.validate(encode_batch([(None, b"v")]), NOW)
    validator.validate(kafka_records.encode([(NOW, b"k", None, [])]), NOW)  # a tombstone


def test_the_broker_cleaner_runs_on_its_backoff_in_slices() -> None:
    scheduler = ManualScheduler(wall_start_ms=NOW)
    config = load_config(environ={}, overrides={"log.cleaner.backoff.ms": 1000, "broker.id": 0})
    log = compacted(min_cleanable_dirty_ratio=0.1)
    cleaner = LogCleaner(
        config, scheduler, lambda: [("t-0", log, log.log_end_offset)], slice_records=20
    )
    cleaner.start()
    updates(log, 300)
    size_before = log.size_bytes
    scheduler.advance(999)
    assert log.size_bytes == size_before  # not before its backoff
    scheduler.advance(1)
    assert log.size_bytes < size_before / 5
    assert cleaner.cleanings == 1 and cleaner.records_removed > 200
    assert sum(cleaner.slice_time.counts) > 300 // 20
    names = {m.name for m in cleaner.collect_metrics()}
    assert "purgatory_log_cleaner_max_dirty_ratio" in names
    disabled = load_config(environ={}, overrides={"log.cleaner.enable": False, "broker.id": 0})
    idle = LogCleaner(disabled, scheduler, lambda: [("t-0", log, log.log_end_offset)])
    idle.start()
    assert not idle.periodic._handle


def test_a_follower_replicates_a_cleaned_log_across_its_gaps() -> None:
    leader = compacted()
    updates(leader, 300)
    clean(leader)
    follower = compacted()
    while follower.log_end_offset < leader.log_end_offset:  # as the replica fetcher does
        for batch in leader.read(follower.log_end_offset, 700):
            info = validate_batch(batch, verify_records=False, stored=True)
            if info.base_offset + info.record_count <= follower.log_end_offset:
                continue  # already held (a read starts at the batch before a gap)
            follower.append_as_follower(batch, info)
    assert follower.batch_checksums(0) == leader.batch_checksums(0)
    assert [r.offset for r in everything(follower)] == [r.offset for r in everything(leader)]


def test_a_cleaning_the_log_changed_under_is_aborted_and_leaves_it_whole() -> None:
    log = compacted()
    updates(log, 300)
    _, end = cleanable_range(log, log.log_end_offset, NOW)
    cleaning = Cleaning(log, end, NOW, {}, slice_records=10)
    steps = cleaning.slices()
    for _ in range(40):  # into the copy phase
        next(steps)
    log.truncate_to(log.segments[1].base_offset + 3)  # a follower's divergent suffix goes
    before = everything(log)
    for _ in steps:
        pass
    assert cleaning.stats.aborted
    assert everything(log) == before
    assert log.cleaner_checkpoint == 0


def test_a_full_offset_map_ends_the_cleaning_at_the_segment_that_filled_it() -> None:
    log = compacted()
    for i in range(200):  # every key new: nothing to remove, the map grows by each record
        put(log, [(b"key-%d" % i, b"v")])
    cleaning = clean(log, max_map_entries=20)
    assert len(cleaning.offset_map) < 40
    assert 0 < log.cleaner_checkpoint < log.active_segment.base_offset
    checkpoint = log.cleaner_checkpoint
    clean(log, max_map_entries=20)  # the next cleaning goes on from there
    assert log.cleaner_checkpoint > checkpoint


def test_a_log_whose_cleaning_fails_is_marked_uncleanable() -> None:
    scheduler = ManualScheduler(wall_start_ms=NOW)
    config = load_config(environ={}, overrides={"log.cleaner.backoff.ms": 10, "broker.id": 0})
    log = compacted(min_cleanable_dirty_ratio=0.1)
    updates(log, 100)
    log.segments[0].batches[0] = log.segments[0].batches[0][:-3]  # records cut short
    cleaner = LogCleaner(config, scheduler, lambda: [("t-0", log, log.log_end_offset)])
    cleaner.start()
    scheduler.advance(10)
    assert cleaner.manager.uncleanable == {"t-0"}
    gauge = next(
        m
        for m in cleaner.collect_metrics()
        if m.name == "purgatory_log_cleaner_uncleanable_partitions"
    )
    assert gauge.samples[0].value == 1
    scheduler.advance(100)  # not tried again
    assert cleaner.cleanings == 0 and not cleaner.busy


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_compressed_again_with_their_codec(codec: int) -> None:
    log = compacted(segment_bytes=400)
    for i in range(60):
        plain = kafka_records.encode(
            [(NOW, b"k%d" % (j % 3), b"v%d-%d" % (i, j), []) for j in range(4)]
        )
        batch = bytearray(plain)
        batch[22] |= codec
        entries = [e[3] for e in kafka_records.record_entries(plain)]
        stored = kafka_records.with_records(bytes(batch), entries)
        log.append(stored, validate_batch(stored), 0)
    active_base = log.active_segment.base_offset
    clean(log)
    cleaned = [b for s in log.segments[:-1] for b in s.batches]
    assert all(b[22] & 7 == codec for b in cleaned)
    records = [r for r in everything(log) if r.offset < active_base]
    assert sorted(r.key for r in records) == [b"k0", b"k1", b"k2"]
