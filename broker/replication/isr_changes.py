"""A leader's ISR proposals in flight (Kafka keeps this in ``Partition``: its pending ISR
state, ``submitAlterPartition`` and the handling of the answer).

A leader proposes a new ISR (a follower caught up, or fell behind); the controller
accepts it with a new partition epoch once the metadata quorum has committed it, or
refuses it. At most one proposal per partition is in flight
(``Partition.proposed_isr``), and until it is answered the high watermark counts the
members of both ISRs; the answer is applied only if this broker still leads the same
partition and the answer is not older than what it holds. A proposal names the broker
epoch each member's fetches came with, so the controller refuses a member that has
restarted since (KIP-903). It travels through the ``AlterPartitionManager``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from purgatory.broker.controller.metadata_cache import AlterPartitionRefused, LeaderAndIsr
from purgatory.broker.replication.partition import Partition
from purgatory.broker.replication.replication_metrics import ReplicationMetrics
from purgatory.protocol.errors import ErrorCode, KafkaError

# (topic, partition, the proposed ISR) -> the leadership and ISR the controller accepted
AlterIsr = Callable[[str, int, LeaderAndIsr], Awaitable[LeaderAndIsr]]


class IsrChanges:
    def __init__(
        self,
        broker_id: int,
        alter_isr: AlterIsr,
        still_leads: Callable[[Partition], bool],
        isr_changed: Callable[[Partition], None],
        metrics: ReplicationMetrics,
    ) -> None:
        self.broker_id = broker_id
        self.alter_isr = alter_isr
        self.still_leads = still_leads
        self.isr_changed = isr_changed
        self.metrics = metrics
        self._tasks: set[asyncio.Future[None]] = set()
        self.log = structlog.get_logger("isr_changes").bind(broker_id=broker_id)

    def propose(self, partition: Partition, new_isr: list[int]) -> None:
        """Propose ``new_isr`` for ``partition``; the answer is applied when it comes."""
        partition.proposed_isr = list(new_isr)
        task = asyncio.ensure_future(self._alter(partition, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _alter(self, partition: Partition, new_isr: list[int]) -> None:
        """Send the proposal until it is answered, then apply the answer. While it is in
        flight the high watermark counts both ISRs, and it stays so after an answer that
        says this leader's view is stale (the change may have been committed by an earlier
        try whose answer was lost): until the committed metadata arrives, which replaces
        the proposal. Only an answer that says nothing was changed (an ineligible replica,
        an invalid ISR) takes it back at once (Kafka's Partition does the same)."""
        epochs = [
            partition.followers[r].broker_epoch if r in partition.followers else -1 for r in new_isr
        ]
        proposed = LeaderAndIsr(
            self.broker_id, partition.leader_epoch, new_isr, partition.partition_epoch, epochs
        )
        old = list(partition.isr)
        while True:
            if partition.proposed_isr != new_isr or not self.still_leads(partition):
                return  # the metadata moved on meanwhile: it holds the answer
            try:
                result = await self.alter_isr(partition.topic, partition.index, proposed)
                break
            except AlterPartitionRefused as exc:
                if exc.code == ErrorCode.NOT_CONTROLLER:  # asked a node that no longer is
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                self.log.warning(
                    "alter_partition_refused",
                    topic=partition.topic,
                    partition=partition.index,
                    error=str(exc),
                )
                if exc.code in _NOTHING_CHANGED and partition.proposed_isr == new_isr:
                    partition.proposed_isr = None
                return
            except (ConnectionError, KafkaError) as exc:
                self.log.warning(
                    "alter_partition_failed",
                    topic=partition.topic,
                    partition=partition.index,
                    error=str(exc),
                )
                await asyncio.sleep(RETRY_BACKOFF_S)
        # Counted once accepted, whether the answer or the committed metadata came first.
        self.metrics.isr_shrinks += len(set(old) - set(result.isr))
        self.metrics.isr_expands += len(set(result.isr) - set(old))
        if partition.proposed_isr != new_isr or not self.still_leads(partition):
            return
        partition.proposed_isr = None
        if result.partition_epoch >= partition.partition_epoch:
            partition.isr = list(result.isr)
            partition.partition_epoch = result.partition_epoch
        self.isr_changed(partition)


RETRY_BACKOFF_S = 0.05  # between tries of a proposal the controller could not be asked
# Refusals that prove the controller changed nothing (it checked the epochs first): the
# proposal is taken back at once. Any other keeps it until the metadata arrives.
_NOTHING_CHANGED = frozenset(
    {ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
)
