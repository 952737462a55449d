"""AlterPartitionManager: a leader's channel to the controller for ISR changes.

The replica manager proposes a new ISR as a ``LeaderAndIsr`` and gets back the one the
controller accepted; this module alone turns that into an AlterPartition request, sends it
(to the controller in this process, or over the controller connection) and reads the
answer (Kafka's AlterPartitionManager).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from purgatory.broker.controller.controller import Controller
from purgatory.broker.controller.metadata_cache import AlterPartitionRefused, LeaderAndIsr
from purgatory.clients.connection import Connection
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        local_controller: Callable[[], Controller | None],
        controller_connection: Callable[[], Awaitable[Connection]],
        timeout_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.local_controller = local_controller
        self.controller_connection = controller_connection
        self.timeout_ms = timeout_ms

    async def submit(self, topic: str, partition: int, proposed: LeaderAndIsr) -> LeaderAndIsr:
        """Ask for ``proposed.isr``, with the leader and partition epochs the leader holds.

        Raises AlterPartitionRefused when the controller says no, ConnectionError or
        KafkaError when it cannot be asked."""
        request = ib.AlterPartitionRequest(
            self.broker_id,
            [
                ib.AlterPartitionTopic(
                    topic,
                    [
                        ib.AlterPartitionPartition(
                            partition, proposed.leader_epoch, proposed.isr, proposed.partition_epoch
                        )
                    ],
                )
            ],
        )
        controller = self.local_controller()
        if controller is not None:
            response = controller.alter_partition(request)
        else:
            conn = await self.controller_connection()
            response = await conn.send(
                ApiKey.ALTER_PARTITION, request, timeout_ms=self.timeout_ms()
            )
        if response.error_code:
            raise AlterPartitionRefused(response.error_code)
        result = response.topics[0].partitions[0]
        if result.error_code:
            raise AlterPartitionRefused(result.error_code)
        return LeaderAndIsr(
            result.leader_id, result.leader_epoch, list(result.isr), result.partition_epoch
        )
