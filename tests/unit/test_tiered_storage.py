"""Segments, the remote tier and its retention, the simulated store and the reader pool."""

from __future__ import annotations

import asyncio
import random
import statistics

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.log.log import Log, LogConfig, OffsetOutOfRange
from purgatory.broker.log.log_validator import LogValidator
from purgatory.broker.log.tiered.remote_log_manager import RemoteLogManager
from purgatory.broker.log.tiered.remote_log_reader import ReaderQueueFull, RemoteLogReaderPool
from purgatory.broker.log.tiered.remote_storage import (
    LatencyModel,
    RemoteFetchInfo,
    RemoteStorage,
    RemoteStorageError,
)
from purgatory.broker.purgatory import ManualScheduler
from purgatory.broker.replication.partition import Partition
from purgatory.protocol.records import decode_records, encode_batch, validate_batch

RECORD = 100  # value bytes per record; one record per batch below


def append(log: Log, value: bytes, ts: int = 0) -> int:
    batch = encode_batch([(None, value)], timestamp_ms=ts)
    return log.append(batch, validate_batch(batch), 0)


def batch_size() -> int:
    return len(encode_batch([(None, b"x" * RECORD)], timestamp_ms=0))


def tiered(**overrides: int) -> Log:
    size = batch_size()
    settings = {"segment_bytes": 3 * size, "local_retention_bytes": 4 * size} | overrides
    return Log(LogConfig(remote_storage_enable=True, **settings))


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


# -- segments ------------------------------------------------------------------------------


def test_a_log_rolls_a_new_segment_when_the_next_batch_would_overflow_the_active_one() -> None:
    log = Log(LogConfig(segment_bytes=3 * batch_size()))
    for i in range(10):
        append(log, bytes([i]) * RECORD)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert [len(s) for s in log.segments] == [3, 3, 3, 1]
    assert log.size_bytes == sum(s.size_bytes for s in log.segments)
    # Reads cross segment boundaries.
    assert offsets(b"".join(log.read(2, 10**6))) == list(range(2, 10))


def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own() -> None:
    log = Log(LogConfig(segment_bytes=14))
    for i in range(3):
        append(log, bytes([i]) * RECORD)
    assert [len(s) for s in log.segments] == [1, 1, 1]


# -- tiering -------------------------------------------------------------------------------


def test_only_closed_segments_below_the_high_watermark_are_copied() -> None:
    log = tiered()
    for i in range(10):
        append(log, bytes([i]) * RECORD)
    assert [s.base_offset for s in log.segments_to_copy(high_watermark=5)] == [0]
    assert [s.base_offset for s in log.segments_to_copy(high_watermark=10)] == [0, 3, 6]
    for segment in log.segments_to_copy(10):
        log.segment_copied(segment)
    assert log.remote_log_end_offset == 9
    assert log.segments_to_copy(10) == []  # the active segment [9] is never copied
    with pytest.raises(ValueError, match="out of order"):
        log.segment_copied(log.segments[0])


def test_copied_segments_leave_the_local_tier_beyond_local_retention_and_reads_go_remote() -> None:
    log = tiered()
    for i in range(10):
        append(log, bytes([i]) * RECORD)
    log.delete_old_segments(now_ms=None)
    assert log.local_log_start_offset == 0  # nothing copied yet: nothing may go
    for segment in log.segments_to_copy(10):
        log.segment_copied(segment)
    log.delete_old_segments(now_ms=None)
    # 4 batches of local retention: [6,7,8] and [9] stay; the log start is still 0.
    assert log.local_log_start_offset == 6
    assert log.log_start_offset == 0
    assert [s.base_offset for s in log.remote_segments] == [0, 3, 6]
    assert log.in_remote_tier(0) and log.in_remote_tier(5) and not log.in_remote_tier(6)
    found = log.remote_segment_for(4)
    assert found is not None and found.base_offset == 3
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 10**6)
    assert offsets(b"".join(log.read(6, 10**6))) == [6, 7, 8, 9]


def test_whole_log_retention_deletes_remote_segments_and_moves_the_log_start() -> None:
    size = batch_size()
    log = tiered(retention_bytes=7 * size, local_retention_bytes=2 * size)
    for i in range(12):
        append(log, bytes([i]) * RECORD)
    for segment in log.segments_to_copy(12):
        log.segment_copied(segment)
    deleted = log.delete_old_segments(now_ms=None)
    # 12 batches in all, keep >= 7: segment [0,1,2] goes (9 remain), then [3,4,5] would
    # leave 6 < 7, so it stays.
    assert [s.base_offset for s in deleted] == [0]
    assert log.log_start_offset == 3
    assert log.local_log_start_offset == 9  # copied [3..8] left locally, [9..11] active
    assert log.remote_segment_for(1) is None


def test_time_retention_applies_to_both_tiers_by_each_segments_newest_record() -> None:
    log = tiered(retention_ms=1_000, local_retention_ms=100, local_retention_bytes=-2)
    for i in range(7):
        append(log, bytes([i]) * RECORD, ts=10_000 + i * 100)
    for segment in log.segments_to_copy(7):
        log.segment_copied(segment)
    # Segment [0..2] is newest at 10_200, [3..5] at 10_500.
    log.delete_old_segments(now_ms=10_450)
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 3)
    log.delete_old_segments(now_ms=11_300)
    assert (log.log_start_offset, log.local_log_start_offset) == (3, 6)


def test_segments_not_copied_yet_are_kept_locally_until_whole_log_retention_takes_them() -> None:
    size = batch_size()
    log = tiered(retention_bytes=4 * size, local_retention_bytes=0)
    for i in range(10):
        append(log, bytes([i]) * RECORD)
    log.delete_old_segments(now_ms=None)
    # Never copied (the remote tier is down, say): whole-log retention still bounds it.
    # 10 batches, keep >= 4: [0..2] and [3..5] go, [6..8] would leave 1.
    assert log.log_start_offset == log.local_log_start_offset == 6
    assert [s.base_offset for s in log.segments_to_copy(10)] == [6]


def test_a_follower_that_starts_over_drops_both_tiers() -> None:
    log = tiered()
    for i in range(10):
        append(log, bytes([i]) * RECORD)
    for segment in log.segments_to_copy(10):
        log.segment_copied(segment)
    log.reset_to(42)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (42, 42, 42)
    assert log.remote_segments == [] and log.remote_log_end_offset == 42


# -- the RemoteLogManager and the store ----------------------------------------------------


def partition_with(log: Log, high_watermark: int) -> Partition:
    validator = LogValidator(2**63 - 1, 3_600_000, 10**8)
    partition = Partition("t", 0, "tid", 0, log, 10**6, 1, validator, leader_id=0)
    partition.high_watermark = high_watermark
    return partition


async def test_the_remote_log_manager_copies_serves_and_deletes_segments() -> None:
    config = load_config(environ={}, overrides={"remote.storage.latency.ms": "0"})
    size = batch_size()
    log = tiered(retention_bytes=7 * size, local_retention_bytes=1)
    partitions = [partition_with(log, 0)]
    manager = RemoteLogManager(config, lambda: partitions, ManualScheduler())
    for i in range(9):
        append(log, bytes([i]) * RECORD)
    manager.run_once(now_ms=0)
    assert manager.storage.size_bytes == 0  # nothing committed: nothing copied
    partitions[0].high_watermark = 9
    manager.run_once(now_ms=0)
    assert manager.copied_segments == 2 and log.local_log_start_offset == 6
    info = manager.remote_fetch_info(partitions[0], 4, 10**6)
    assert info is not None and info.segment_base_offset == 3
    assert offsets(await manager.storage.fetch_log_segment(info)) == [4, 5]  # that segment only
    for i in range(9, 12):
        append(log, bytes([i]) * RECORD)
    partitions[0].high_watermark = 12
    manager.run_once(now_ms=0)
    # [0..2] fell to retention.bytes: gone from the log and from the store.
    assert log.log_start_offset == 3 and manager.deleted_segments == 1
    assert sorted(manager.storage.segments[("tid", 0)]) == [3, 6]
    with pytest.raises(RemoteStorageError, match="deleted"):
        await manager.storage.fetch_log_segment(info._replace(segment_base_offset=0))
    partitions.clear()  # the partition left this broker
    manager.run_once(now_ms=0)
    assert manager.storage.size_bytes == 0 and manager.storage.partitions() == []


async def test_the_store_fails_reads_at_its_error_rate_and_takes_its_latency() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    config = load_config(
        environ={},
        overrides={"remote.storage.error.rate": "1.0", "remote.storage.latency.ms": "250"},
    )
    store = RemoteStorage(config, sleep=sleep)
    info = RemoteFetchInfo(("tid", 0), "t", 0, 0, 0, 100)
    with pytest.raises(RemoteStorageError, match="simulated remote read failure"):
        await store.fetch_log_segment(info)
    assert slept == [0.25]
    config.set_dynamic("remote.storage.error.rate", "0", at="now")
    with pytest.raises(RemoteStorageError, match="deleted"):  # no failure now, but no data
        await store.fetch_log_segment(info)


def test_the_log_normal_latency_model_has_the_configured_median_and_p99() -> None:
    model = LatencyModel("lognormal", 20.0, 200.0)
    rng = random.Random(7)
    samples = sorted(model.sample_ms(rng) for _ in range(40_000))
    assert statistics.median(samples) == pytest.approx(20.0, rel=0.05)
    assert samples[int(0.99 * len(samples))] == pytest.approx(200.0, rel=0.1)
    assert LatencyModel("fixed", 20.0, 200.0).sample_ms(rng) == 20.0


# -- the reader pool -----------------------------------------------------------------------


class GatedReads:
    """Reads that finish when the test says so."""

    def __init__(self) -> None:
        self.started: list[RemoteFetchInfo] = []
        self.gates: dict[int, asyncio.Future[bytes]] = {}

    async def read(self, info: RemoteFetchInfo) -> bytes:
        self.started.append(info)
        gate = self.gates[info.fetch_offset] = asyncio.get_running_loop().create_future()
        return await gate

    def finish(self, offset: int, data: bytes = b"ok") -> None:
        self.gates[offset].set_result(data)


def info_at(offset: int) -> RemoteFetchInfo:
    return RemoteFetchInfo(("tid", 0), "t", 0, 0, offset, 100)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_pool_runs_threads_reads_queues_max_pending_and_refuses_more() -> None:
    reads = GatedReads()
    now = [0.0]
    pool = RemoteLogReaderPool(2, 3, reads.read, lambda: now[0])
    futures = [pool.submit(info_at(i)) for i in range(5)]
    await settle()
    assert pool.running == 2 and pool.queue_size == 3
    assert [i.fetch_offset for i in reads.started] == [0, 1]
    with pytest.raises(ReaderQueueFull, match=r"remote\.log\.reader\.max\.pending\.tasks"):
        pool.submit(info_at(5))
    assert pool.rejected == 1
    now[0] = 1.0
    reads.finish(0, b"zero")
    await settle()
    assert futures[0].result() == b"zero"
    assert [i.fetch_offset for i in reads.started] == [0, 1, 2]  # the queue moved up
    assert pool.running == 2 and pool.queue_size == 2
    assert pool.read_time.sum == pytest.approx(1.0)
    await pool.shutdown()  # the reads still gated end with the test
    assert all(f.cancelled() for f in futures[1:])


async def test_a_cancelled_queued_read_leaves_the_queue_and_a_running_one_keeps_its_slot() -> None:
    reads = GatedReads()
    pool = RemoteLogReaderPool(1, 10, reads.read, lambda: 0.0)
    running = pool.submit(info_at(0))
    queued = pool.submit(info_at(1))
    last = pool.submit(info_at(2))
    await settle()
    queued.cancel()
    running.cancel()  # as Kafka: the read goes on, only its answer is dropped
    await settle()
    assert pool.queue_size == 1 and pool.running == 1 and pool.cancelled == 1
    reads.finish(0)
    await settle()
    assert [i.fetch_offset for i in reads.started] == [0, 2]  # read 1 never ran
    reads.finish(2, b"two")
    await settle()
    assert last.result() == b"two" and pool.running == 0 and pool.reads == 2


async def test_a_failed_read_reaches_its_future_and_is_counted() -> None:
    async def failing(_: RemoteFetchInfo) -> bytes:
        raise RemoteStorageError("boom")

    pool = RemoteLogReaderPool(1, 1, failing, lambda: 0.0)
    future = pool.submit(info_at(0))
    with pytest.raises(RemoteStorageError, match="boom"):
        await future
    assert pool.errors == 1 and pool.running == 0


async def test_the_idle_ratio_is_the_idle_share_of_slot_time_over_the_last_window() -> None:
    reads = GatedReads()
    now = [0.0]
    pool = RemoteLogReaderPool(2, 1, reads.read, lambda: now[0])
    pool.submit(info_at(0))
    await settle()
    now[0] = 20.0  # one of two slots busy for 20 s
    assert pool.avg_idle_ratio() == pytest.approx(0.5)
    assert pool.busy_seconds() == pytest.approx(20.0)
    reads.finish(0)
    await settle()
    now[0] = 40.0  # idle for the next 20 s
    assert pool.avg_idle_ratio() == pytest.approx(1.0)
