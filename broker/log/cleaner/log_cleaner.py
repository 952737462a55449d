"""The log cleaner of a broker: compacts its compacted logs on the event loop, a bounded
slice at a time (Kafka's ``LogCleaner`` and its cleaner thread).

Kafka runs cleaner threads; here one cleaner runs on the broker's scheduler:

A. every ``log.cleaner.backoff.ms`` (and at once after a cleaning ends) it asks the
   LogCleanerManager for the filthiest log among the replicas this broker holds, led or
   followed (every replica cleans its own log, as in Kafka);
B. a cleaning runs one slice (``Cleaning.slices``, at most ``SLICE_RECORDS`` records)
   per ``call_soon`` callback, so the loop serves requests between slices;
C. a cleaning that raises marks its log uncleanable (Kafka's uncleanable partitions) and
   is logged once; one the log aborted (it changed underneath) is simply tried again.

``log.cleaner.enable`` false: nothing is scheduled. Counters are kept as plain fields and
turned into metrics when scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator

import structlog
from prometheus_client.core import HistogramMetricFamily, Metric

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.log.cleaner.cleaner import SLICE_RECORDS, Cleaning
from purgatory.broker.log.cleaner.cleaner_manager import LogCleanerManager, LogToClean
from purgatory.broker.log.log import Log
from purgatory.broker.ops.metrics import add_histogram, counter, gauge
from purgatory.broker.purgatory import Periodic, Scheduler
from purgatory.common.histogram import Histogram

_BYTES_PER_MAP_ENTRY = 24  # Kafka's: a 16-byte hash and an 8-byte offset
_MAP_LOAD_FACTOR = 0.9
_SLICE_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)


class LogCleaner:
    """Cleans the logs ``logs()`` lists as (key, log, high watermark)."""

    def __init__(
        self,
        config: BrokerConfig,
        scheduler: Scheduler,
        logs: Callable[[], Iterable[tuple[Hashable, Log, int]]],
        *,
        slice_records: int = SLICE_RECORDS,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.logs = logs
        self.slice_records = slice_records
        self.manager = LogCleanerManager()
        self.periodic = Periodic(scheduler, lambda: config["log.cleaner.backoff.ms"], self.wake)
        self._running: tuple[LogToClean, Cleaning, Iterator[None]] | None = None
        self._started_s = 0.0
        # What Kafka's cleaner reports (LogCleaner's metrics), since the broker started.
        self.last_run_ms = scheduler.now_ms()
        self.cleanings = 0
        self.aborted = 0
        self.records_read = 0
        self.records_removed = 0
        self.bytes_read = 0
        self.bytes_removed = 0
        self.tombstones_removed = 0
        self.last_recopy_ratio = 0.0
        self.last_clean_time_s = 0.0
        self.max_clean_time_s = 0.0
        self.slice_time = Histogram(_SLICE_BUCKETS)
        self.max_slice_s = 0.0
        self.log = structlog.get_logger("log_cleaner").bind(broker_id=config.broker_id)

    @property
    def enabled(self) -> bool:
        return bool(self.config["log.cleaner.enable"])

    @property
    def busy(self) -> bool:
        return self._running is not None

    def start(self) -> None:
        if self.enabled:
            self.periodic.start()

    def stop(self) -> None:
        self.periodic.cancel()
        self._running = None

    def wake(self) -> None:
        """A: choose a log and start cleaning it (nothing if a cleaning runs)."""
        if self._running is not None or not self.enabled:
            return
        now = self.scheduler.wall_ms()
        chosen = self.manager.grab_filthiest(self.logs(), now)
        self.last_run_ms = self.scheduler.now_ms()
        if chosen is None:
            return
        max_entries = int(
            self.config["log.cleaner.dedupe.buffer.size"] / _BYTES_PER_MAP_ENTRY * _MAP_LOAD_FACTOR
        )
        cleaning = Cleaning(
            chosen.log,
            chosen.end,
            now,
            self.manager.horizons_of(chosen.key),
            max_map_entries=max(1, max_entries),
            slice_records=self.slice_records,
        )
        self._running = (chosen, cleaning, cleaning.slices())
        self._started_s = self.scheduler.precise_s()
        self.scheduler.call_soon(self._slice)

    def _slice(self) -> None:
        """B: one slice of the running cleaning."""
        running = self._running
        if running is None:
            return
        chosen, cleaning, steps = running
        started = self.scheduler.precise_s()
        try:
            next(steps)
        except StopIteration:
            self._observe(self.scheduler.precise_s() - started)
            self._finished(chosen, cleaning)
            return
        except Exception as exc:  # C: a log the cleaner cannot read
            self._running = None
            self.manager.uncleanable.add(chosen.key)
            self.log.error("log_cleaning_failed", log=str(chosen.key), error=repr(exc))
            return
        self._observe(self.scheduler.precise_s() - started)
        self.scheduler.call_soon(self._slice)

    def _observe(self, seconds: float) -> None:
        self.slice_time.observe(seconds)
        self.max_slice_s = max(self.max_slice_s, seconds)

    def _finished(self, chosen: LogToClean, cleaning: Cleaning) -> None:
        self._running = None
        stats = cleaning.stats
        elapsed = self.scheduler.precise_s() - self._started_s
        self.last_clean_time_s = elapsed
        self.max_clean_time_s = max(self.max_clean_time_s, elapsed)
        self.records_read += stats.records_read
        self.records_removed += stats.records_removed
        self.bytes_read += stats.bytes_read
        self.bytes_removed += stats.bytes_removed
        self.tombstones_removed += stats.tombstones_removed
        if stats.aborted:
            self.aborted += 1
        else:
            self.cleanings += 1
            if stats.bytes_read:
                self.last_recopy_ratio = stats.bytes_written / stats.bytes_read
        self.log.debug(
            "log_cleaned",
            log=str(chosen.key),
            dirty_ratio=round(chosen.dirty_ratio, 3),
            records_read=stats.records_read,
            records_removed=stats.records_removed,
            bytes_read=stats.bytes_read,
            bytes_removed=stats.bytes_removed,
            slices=stats.slices,
            aborted=stats.aborted,
        )
        self.scheduler.call_soon(self.wake)  # another log may be dirty too

    def collect_metrics(self) -> Iterator[Metric]:
        """Kafka's LogCleaner and LogCleanerManager metrics (docs/metrics.md)."""
        yield gauge(
            "purgatory_log_cleaner_max_clean_time_seconds",
            "The longest cleaning of one log, first slice to last (max-clean-time-secs).",
            self.max_clean_time_s,
        )
        yield gauge(
            "purgatory_log_cleaner_recopy_ratio",
            "Bytes written over bytes read by the last cleaning (cleaner-recopy-percent / 100).",
            self.last_recopy_ratio,
        )
        yield gauge(
            "purgatory_log_cleaner_max_dirty_ratio",
            "The largest dirty ratio of a compacted log at the last look (max-dirty-percent / 100).",
            self.manager.max_dirty_ratio,
        )
        yield gauge(
            "purgatory_log_cleaner_uncleanable_partitions",
            "Logs whose cleaning failed (uncleanable-partitions-count).",
            len(self.manager.uncleanable),
        )
        yield gauge(
            "purgatory_log_cleaner_time_since_last_run_seconds",
            "Since the cleaner last looked for a log to clean (time-since-last-run-ms).",
            max(0, self.scheduler.now_ms() - self.last_run_ms) / 1000,
        )
        yield counter("purgatory_log_cleaner_cleanings", "Cleanings completed.", self.cleanings)
        yield counter(
            "purgatory_log_cleaner_aborted_cleanings",
            "Cleanings given up because the log changed under them (retention, truncation).",
            self.aborted,
        )
        yield counter(
            "purgatory_log_cleaner_records_read",
            "Records the cleaner copied or dropped.",
            self.records_read,
        )
        yield counter(
            "purgatory_log_cleaner_records_removed",
            "Records the cleaner dropped (superseded, tombstones past their horizon, keyless).",
            self.records_removed,
        )
        yield counter(
            "purgatory_log_cleaner_bytes_read", "Batch bytes the cleaner read.", self.bytes_read
        )
        yield counter(
            "purgatory_log_cleaner_bytes_removed",
            "Batch bytes the cleaner freed.",
            self.bytes_removed,
        )
        yield counter(
            "purgatory_log_cleaner_tombstones_removed",
            "Tombstones dropped once delete.retention.ms had passed.",
            self.tombstones_removed,
        )
        hist = HistogramMetricFamily(
            "purgatory_log_cleaner_slice_time_seconds",
            "Time of one cleaner slice on the event loop (the stall it causes).",
        )
        add_histogram(hist, [], self.slice_time)
        yield hist
