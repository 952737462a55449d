"""MetadataCache: this broker's copy of the controller's picture of the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from purgatory.protocol.errors import KafkaError
from purgatory.protocol.inter_broker_messages import (
    PartitionState,
    TopicState,
    UpdateMetadataRequest,
)


class LeaderAndIsr(NamedTuple):
    """A partition's leadership and ISR as the controller holds them (Kafka's LeaderAndIsr)."""

    leader_id: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int  # grows with every change of the ISR (fences stale updates)


class AlterPartitionRefused(KafkaError):
    """The controller refused an ISR change (fenced epoch, stale ISR, ineligible replica)."""


@dataclass(frozen=True)
class PartitionChange:
    """What a metadata update means for one partition on this broker."""

    topic: str
    partition: int
    state: PartitionState | None  # None: the partition is gone
    topic_id: str
    configs: dict[str, str]


class MetadataCache:
    """Topics, partition leaders and epochs as last pushed by the controller.

    Invariant: ``incarnation``/``epoch`` identify the update applied last. Epochs keep
    growing across controllers (a new controller carries on from the newest picture it can
    find), so an update with a lower epoch is stale and refused; the same one again (same
    epoch, same controller) is acknowledged and changes nothing; anything newer replaces
    the picture whole, whichever controller sent it.
    """

    def __init__(self, members: dict[int, tuple[str, int]], controller_id: int) -> None:
        self.members = members
        self.controller_id = controller_id
        self.topics: dict[str, TopicState] = {}
        self.topic_names: dict[str, str] = {}  # topic id (hex) -> name
        self.live_brokers: frozenset[int] = frozenset(members) or frozenset({controller_id})
        self.broker_incarnations: dict[int, str] = {}
        self.incarnation = ""
        self.epoch = -1

    def apply(self, update: UpdateMetadataRequest) -> list[PartitionChange] | None:
        """Apply a full-picture update; return the partition changes, or None if stale."""
        if update.metadata_epoch < self.epoch:
            return None
        if (
            update.metadata_epoch == self.epoch
            and update.controller_incarnation == self.incarnation
        ):
            return []  # the same picture again (a retried or repeated push)
        old = self.topics
        new = {t.name: t for t in update.topics}
        changes: list[PartitionChange] = []
        for name, topic in new.items():
            before = old.get(name)
            same_topic = before is not None and before.topic_id == topic.topic_id
            before_parts = (
                {p.partition_index: p for p in before.partitions}
                if before is not None and same_topic
                else {}
            )
            for part in topic.partitions:
                if before_parts.get(part.partition_index) != part:
                    changes.append(
                        PartitionChange(
                            name, part.partition_index, part, topic.topic_id, topic.configs
                        )
                    )
            if before is not None and not same_topic:
                changes.extend(
                    PartitionChange(name, p.partition_index, None, before.topic_id, before.configs)
                    for p in before.partitions
                )
        for name, before in old.items():
            if name not in new:
                changes.extend(
                    PartitionChange(name, p.partition_index, None, before.topic_id, before.configs)
                    for p in before.partitions
                )
        # Removals first, so a re-created topic's partitions start from empty logs.
        changes.sort(key=lambda c: c.state is not None)
        self.topics = new
        self.topic_names = {t.topic_id: name for name, t in new.items()}
        self.live_brokers = frozenset(update.live_brokers)
        self.broker_incarnations = dict(update.broker_incarnations)
        self.incarnation = update.controller_incarnation
        self.epoch = update.metadata_epoch
        self.controller_id = update.controller_id
        return changes

    def snapshot(self) -> UpdateMetadataRequest | None:
        """The picture last applied, or None before the first one."""
        if self.epoch < 0:
            return None
        return UpdateMetadataRequest(
            self.controller_id,
            self.incarnation,
            self.epoch,
            list(self.topics.values()),
            sorted(self.live_brokers),
            dict(self.broker_incarnations),
        )

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        state = self.topics.get(topic)
        if state is None or not 0 <= partition < len(state.partitions):
            return None
        return state.partitions[partition]
