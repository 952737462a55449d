"""The metrics of share groups on the partition leaders (Kafka's ShareGroupMetrics and
SharePartitionMetrics, summed over the broker's share partitions), read from the
SharePartitionManager when scraped. The ShareFetch purgatory is the replica manager's and
is exported with the other purgatories (``purgatory_size{purgatory="ShareFetch"}``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from purgatory.broker.ops.metrics import counter, gauge

if TYPE_CHECKING:
    from purgatory.broker.share.share_partition_manager import SharePartitionManager


def share_partition_families(manager: SharePartitionManager) -> Callable[[], Iterator[Metric]]:
    def collect() -> Iterator[Metric]:
        stats = manager.stats
        yield gauge(
            "purgatory_share_partitions",
            "Share partitions this broker holds: one per share group and partition it leads "
            "that the group fetched from.",
            len(manager),
        )
        yield gauge(
            "purgatory_share_acquisition_locks",
            "Acquisition locks waiting on the timing wheel (one per acquire call whose "
            "records are not all acknowledged or released yet).",
            len(manager.timer),
        )
        yield counter(
            "purgatory_share_records_acquired",
            "Records acquired by share consumers; a record delivered again counts again.",
            stats.acquired,
        )
        yield counter(
            "purgatory_share_records_acknowledged",
            "Records acknowledged with ACCEPT (Kafka's RecordAcknowledgementsPerSec, "
            "ackType=Accept).",
            stats.accepted,
        )
        yield counter(
            "purgatory_share_records_released",
            "Records released: acknowledged with RELEASE, or held by a share session that closed.",
            stats.released,
        )
        yield counter(
            "purgatory_share_records_rejected",
            "Records acknowledged with REJECT (Kafka's RecordAcknowledgementsPerSec, "
            "ackType=Reject).",
            stats.rejected,
        )
        yield counter(
            "purgatory_share_records_archived",
            "Records archived: rejected, acknowledged as gaps, or released or timed out at "
            "the delivery count limit.",
            stats.archived,
        )
        yield counter(
            "purgatory_share_acquisition_lock_timeouts",
            "Records whose acquisition lock expired before an acknowledgement: available "
            "again for redelivery, or archived at the delivery count limit (Kafka's "
            "AcquisitionLockTimeoutPerSec).",
            stats.lock_timeouts,
        )

    return collect
