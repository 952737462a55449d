"""RemoteLogManager: moves closed segments of tiered partitions to the remote store, applies
remote and local retention, and serves remote reads through the reader pool (Kafka's class
of that name, with its copy and expiration tasks folded into one periodic pass)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import structlog
from prometheus_client.core import HistogramMetricFamily, Metric

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.log.tiered.remote_log_reader import RemoteLogReaderPool
from purgatory.broker.log.tiered.remote_storage import (
    RemoteFetchInfo,
    RemotePartition,
    RemoteStorage,
)
from purgatory.broker.ops.metrics import add_histogram, counter, gauge
from purgatory.broker.purgatory import Periodic, Scheduler
from purgatory.broker.replication.partition import Partition


def remote_partition(partition: Partition) -> RemotePartition:
    return (partition.topic_id, partition.index)


class RemoteLogManager:
    """One per broker. Every ``remote.log.manager.task.interval.ms``, for each tiered
    partition replica (leader or follower: each broker tiers the replicas it holds, so the
    remote tier survives a change of leader), in this order:

    1. copy closed segments whose records are all below the high watermark;
    2. apply retention (``Log.delete_old_segments``) and delete the remote segments it
       dropped from the store;

    and drop stored data of partitions this broker no longer holds.
    """

    def __init__(
        self,
        config: BrokerConfig,
        partitions: Callable[[], Iterable[Partition]],
        scheduler: Scheduler,
        storage: RemoteStorage | None = None,
    ) -> None:
        self.config = config
        self.partitions = partitions
        self.storage = storage or RemoteStorage(config)
        self.readers = RemoteLogReaderPool(
            config["remote.log.reader.threads"],
            config["remote.log.reader.max.pending.tasks"],
            self.storage.fetch_log_segment,
            scheduler.precise_s,
        )
        self.copied_bytes = 0
        self.copied_segments = 0
        self.deleted_segments = 0
        self.task = Periodic(
            scheduler,
            lambda: config["remote.log.manager.task.interval.ms"],
            lambda: self.run_once(scheduler.wall_ms()),
        )
        self.log = structlog.get_logger("remote_log_manager").bind(broker_id=config.broker_id)

    def start(self) -> None:
        self.task.start()

    async def shutdown(self) -> None:
        self.task.cancel()
        await self.readers.shutdown()

    def run_once(self, now_ms: int) -> None:
        """One pass of copying and retention at wall-clock time ``now_ms``."""
        held = set()
        for partition in self.partitions():
            log = partition.log
            if not log.tiered:
                continue
            key = remote_partition(partition)
            held.add(key)
            # Below the last stable offset, as Kafka's copier: no open transaction's
            # records, nor an ended one's whose marker is not committed, go remote.
            for segment in log.segments_to_copy(partition.last_stable_offset):
                self.storage.copy_log_segment(key, segment)
                log.segment_copied(segment)
                self.copied_bytes += segment.size_bytes
                self.copied_segments += 1
            for gone in log.delete_old_segments(now_ms):
                self.storage.delete_log_segment(key, gone.base_offset)
                self.deleted_segments += 1
            self.storage.retain(key, (s.base_offset for s in log.remote_segments))
        for key in self.storage.partitions():
            if key not in held:
                self.storage.delete_partition(key)

    def remote_fetch_info(
        self, partition: Partition, fetch_offset: int, max_bytes: int
    ) -> RemoteFetchInfo | None:
        """What to read for a fetch at ``fetch_offset`` if the remote tier holds it."""
        segment = partition.log.remote_segment_for(fetch_offset)
        if segment is None:
            return None
        return RemoteFetchInfo(
            remote_partition(partition),
            partition.topic,
            partition.index,
            segment.base_offset,
            fetch_offset,
            max_bytes,
        )

    def collect_metrics(self) -> Iterator[Metric]:
        """Kafka's RemoteLogManager and remote reader pool metrics."""
        readers = self.readers
        yield gauge(
            "purgatory_remote_log_reader_task_queue_size",
            "Remote reads queued behind the running ones.",
            readers.queue_size,
        )
        yield gauge(
            "purgatory_remote_log_reader_running",
            "Remote reads running (at most remote.log.reader.threads).",
            readers.running,
        )
        yield gauge(
            "purgatory_remote_log_reader_avg_idle_ratio",
            "Fraction of the remote reader slots' time spent idle, over the last 10 s or more.",
            readers.avg_idle_ratio(),
        )
        yield counter(
            "purgatory_remote_log_reader_busy_seconds",
            "Slot-seconds the remote readers spent reading.",
            readers.busy_seconds(),
        )
        hist = HistogramMetricFamily(
            "purgatory_remote_log_reader_fetch_time_seconds",
            "Time of a remote read, from its start on a reader to its end.",
        )
        add_histogram(hist, [], readers.read_time)
        yield hist
        yield counter("purgatory_remote_fetch_requests", "Remote reads run.", readers.reads)
        yield counter(
            "purgatory_remote_fetch_bytes",
            "Record bytes read from the remote tier.",
            readers.bytes_read,
        )
        yield counter("purgatory_remote_fetch_errors", "Remote reads that failed.", readers.errors)
        yield counter(
            "purgatory_remote_fetch_rejected",
            "Remote reads refused because the reader queue was full.",
            readers.rejected,
        )
        yield counter(
            "purgatory_remote_copy_bytes",
            "Bytes of segments copied to the remote tier.",
            self.copied_bytes,
        )
        yield counter(
            "purgatory_remote_copy_requests",
            "Segments copied to the remote tier.",
            self.copied_segments,
        )
        yield counter(
            "purgatory_remote_delete_requests",
            "Remote segments deleted by retention.",
            self.deleted_segments,
        )
        yield gauge(
            "purgatory_remote_log_size_bytes",
            "Bytes this broker's replicas hold in the remote tier.",
            self.storage.size_bytes,
        )
