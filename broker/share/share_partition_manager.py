"""SharePartitionManager (Kafka's): this broker's SharePartitions, one per (share group,
topic, partition) it leads and a share consumer fetched from.

A SharePartition is made on first use, starting where the group's
``share.auto.offset.reset`` says (``latest``, the default: the high watermark;
``earliest``: the log start offset), and dropped, its locks cancelled, when this broker
stops leading the partition or the topic is deleted (or deleted and made again). Its state
is in memory only: Kafka persists it in ``__share_group_state`` through the share
coordinator, which is not built here, so a new leader starts the group over at the reset
offset. All SharePartitions share one timing wheel for their acquisition locks (Kafka's
``share-group-lock-timeout`` timer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog

from purgatory.broker.purgatory import Scheduler, SystemTimer
from purgatory.broker.share.share_partition import SharePartition, SharePartitionStats
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.config.broker_config import BrokerConfig
    from purgatory.broker.replication.fetch_params import TopicPartition
    from purgatory.broker.replication.partition import Partition
    from purgatory.broker.replication.replica_manager import ReplicaManager

# (group id, topic, partition)
SharePartitionKey = tuple[str, str, int]

AUTO_OFFSET_RESET = "share.auto.offset.reset"
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"


class SharePartitionManager:
    """Invariants: every SharePartition in ``partitions`` is of a partition this broker
    leads, of the topic id it was made for (``_topic_ids``); each is in ``_by_partition``
    under its (topic, partition) and in ``_by_group`` under its group."""

    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        group_config: Callable[[str], Mapping[str, str]],
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.group_config = group_config  # a group's dynamic configs (GroupConfig), by group id
        self.timer = SystemTimer(scheduler)
        self.stats = SharePartitionStats()  # every SharePartition's counts (metrics)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self._topic_ids: dict[SharePartitionKey, object] = {}
        self._by_partition: dict[TopicPartition, set[SharePartitionKey]] = {}
        self._by_group: dict[str, set[SharePartitionKey]] = {}
        # Told when a SharePartition may have records to acquire without a new append (a
        # lock expired, records released, its start offset moved): a waiting ShareFetch
        # for it may complete now.
        self.on_acquirable: Callable[[SharePartition], object] | None = None
        replica_manager.leadership_listeners.append(self._leadership)
        self.log = structlog.get_logger("share_partition_manager").bind(broker_id=config.broker_id)

    # -- finding -----------------------------------------------------------------------------

    def share_partition(
        self, group_id: str, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> SharePartition | ErrorCode:
        """The group's SharePartition of a partition this broker leads, made on first use
        (Kafka's getOrCreateSharePartition), else why not (as ReplicaManager.leader_partition:
        NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH). Its lock duration follows the group's
        ``share.record.lock.duration.ms`` as it is now, and its start offset the log's."""
        leader = self.replica_manager.leader_partition(topic, partition, current_leader_epoch)
        if isinstance(leader, ErrorCode):
            return leader
        key = (group_id, topic, partition)
        configs = self.group_config(group_id)
        share_partition = self.partitions.get(key)
        if share_partition is not None and self._topic_ids[key] != leader.topic_id:
            self._drop(key)  # the topic was deleted and made again: a new log
            share_partition = None
        if share_partition is None:
            share_partition = self._create(key, leader, configs)
        else:
            share_partition.update_log_start_offset(leader.log.log_start_offset)
        share_partition.lock_duration_ms = self.record_lock_duration_ms(group_id, configs)
        return share_partition

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        """The SharePartition if one exists, without making one."""
        return self.partitions.get((group_id, topic, partition))

    def record_lock_duration_ms(
        self, group_id: str, configs: Mapping[str, str] | None = None
    ) -> int:
        """The group's acquisition lock duration: its ``share.record.lock.duration.ms``, else
        the broker's ``group.share.record.lock.duration.ms`` (ShareFetch's
        acquisition_lock_timeout_ms)."""
        if configs is None:
            configs = self.group_config(group_id)
        value = configs.get(RECORD_LOCK_DURATION_MS)
        if value is not None:
            return int(value)
        return self.config["group.share.record.lock.duration.ms"]

    def start_offset_for(self, group_id: str, partition: Partition) -> int:
        """Where a new SharePartition starts: the group's ``share.auto.offset.reset``
        (``earliest``: the log start offset; ``latest``, the default: the high watermark,
        as Kafka's offsetForLatestTimestamp reading uncommitted)."""
        reset = self.group_config(group_id).get(AUTO_OFFSET_RESET, "latest")
        if reset == "earliest":
            return partition.log.log_start_offset
        return partition.high_watermark

    # -- releasing ---------------------------------------------------------------------------

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's share session closed (or it left the group): its acquired records
        in every partition of the group are available again."""
        for key in list(self._by_group.get(group_id, ())):
            self.partitions[key].release_acquired(member_id)

    def on_topics_deleted(self, topics: set[str]) -> None:
        """The metadata deleted topics: their SharePartitions go (the replica manager also
        reports the lost leadership; this covers a topic made again under the same name)."""
        for key in [k for k in self.partitions if k[1] in topics]:
            self._drop(key)

    def shutdown(self) -> None:
        for key in list(self.partitions):
            self._drop(key)

    def __len__(self) -> int:
        return len(self.partitions)

    # -- internals ---------------------------------------------------------------------------

    def _create(
        self, key: SharePartitionKey, leader: Partition, configs: Mapping[str, str]
    ) -> SharePartition:
        group_id, topic, index = key
        start = self.start_offset_for(group_id, leader)
        share_partition = SharePartition(
            group_id,
            topic,
            index,
            start,
            self.timer,
            self.record_lock_duration_ms(group_id, configs),
            self.config["group.share.delivery.count.limit"],
            self.config["group.share.partition.max.record.locks"],
            self.stats,
        )
        share_partition.on_acquirable = self._acquirable
        self.partitions[key] = share_partition
        self._topic_ids[key] = leader.topic_id
        self._by_partition.setdefault((topic, index), set()).add(key)
        self._by_group.setdefault(group_id, set()).add(key)
        self.log.debug(
            "share_partition_created", group_id=group_id, topic=topic, partition=index, start=start
        )
        return share_partition

    def _drop(self, key: SharePartitionKey) -> None:
        share_partition = self.partitions.pop(key, None)
        if share_partition is None:
            return
        share_partition.close()
        del self._topic_ids[key]
        group_id, topic, index = key
        of_partition = self._by_partition[(topic, index)]
        of_partition.discard(key)
        if not of_partition:
            del self._by_partition[(topic, index)]
        of_group = self._by_group[group_id]
        of_group.discard(key)
        if not of_group:
            del self._by_group[group_id]

    def _leadership(self, key: TopicPartition, leader_epoch: int, leads: bool) -> None:
        """Kafka's SharePartitionListener: a partition this broker no longer leads (a
        follower now, or removed) takes its SharePartitions with it."""
        if leads:
            return
        for share_key in list(self._by_partition.get(key, ())):
            self._drop(share_key)

    def _acquirable(self, share_partition: SharePartition) -> None:
        if self.on_acquirable is not None:
            self.on_acquirable(share_partition)
