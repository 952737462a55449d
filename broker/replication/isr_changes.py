"""A leader's ISR proposals in flight (Kafka keeps this in ``Partition``: its pending ISR
state, ``submitAlterPartition`` and the handling of the answer).

A leader proposes a new ISR (a follower caught up, or fell behind); the controller
accepts it with a new partition epoch, or refuses it. At most one proposal per partition
is in flight (``Partition.isr_change_pending``); the answer is applied only if this
broker still leads the same partition and the answer is not older than what it holds.
The proposal travels through the controller channel's ``AlterPartitionManager``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from purgatory.broker.controller.metadata_cache import AlterPartitionRefused, LeaderAndIsr
from purgatory.broker.replication.partition import Partition
from purgatory.broker.replication.replication_metrics import ReplicationMetrics
from purgatory.protocol.errors import KafkaError

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
        partition.isr_change_pending = True
        task = asyncio.ensure_future(self._alter(partition, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _alter(self, partition: Partition, new_isr: list[int]) -> None:
        proposed = LeaderAndIsr(
            self.broker_id, partition.leader_epoch, new_isr, partition.partition_epoch
        )
        old = list(partition.isr)
        try:
            result = await self.alter_isr(partition.topic, partition.index, proposed)
        except (ConnectionError, KafkaError) as exc:
            self.log.warning(
                "alter_partition_refused"
                if isinstance(exc, AlterPartitionRefused)
                else "alter_partition_failed",
                topic=partition.topic,
                partition=partition.index,
                error=str(exc),
            )
            return
        finally:
            partition.isr_change_pending = False
        if not self.still_leads(partition):
            return
        if result.partition_epoch >= partition.partition_epoch:
            partition.isr = list(result.isr)
            partition.partition_epoch = result.partition_epoch
        self.metrics.isr_shrinks += len(set(old) - set(result.isr))
        self.metrics.isr_expands += len(set(result.isr) - set(old))
        self.isr_changed(partition)
