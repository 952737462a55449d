"""AlterPartitionManager: a leader's channel to the controller for ISR changes.

The replica manager proposes a new ISR as a ``LeaderAndIsr`` and gets back the one the
controller accepted and the quorum committed; this module alone turns that into an
AlterPartition request, sends it through the controller channel and reads the answer
(Kafka's AlterPartitionManager).
"""

from __future__ import annotations

from collections.abc import Callable

from purgatory.broker.controller.controller_channel import ControllerChannel
from purgatory.broker.controller.metadata_cache import AlterPartitionRefused, LeaderAndIsr
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey


class AlterPartitionManager:
    def __init__(
        self, broker_id: int, channel: ControllerChannel, broker_epoch: Callable[[], int]
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch

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
                            partition,
                            proposed.leader_epoch,
                            proposed.isr,
                            proposed.partition_epoch,
                            list(proposed.broker_epochs),
                        )
                    ],
                )
            ],
            self.broker_epoch(),
        )
        response = await self.channel.call(ApiKey.ALTER_PARTITION, request)
        if response.error_code:
            raise AlterPartitionRefused(response.error_code)
        result = response.topics[0].partitions[0]
        if result.error_code:
            raise AlterPartitionRefused(result.error_code)
        return LeaderAndIsr(
            result.leader_id, result.leader_epoch, list(result.isr), result.partition_epoch
        )
