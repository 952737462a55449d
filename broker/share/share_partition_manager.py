"""SharePartitionManager (Kafka's): this broker's SharePartitions, one per (share group,
topic, partition) it leads and a share consumer fetched from.

A SharePartition is made on first use, starting where the group's
``share.auto.offset.reset`` says (``latest``, the default: the high watermark;
``earliest``: the log start offset), and dropped, its locks cancelled, when this broker
stops leading the partition or the topic is deleted (or deleted and made again). All
SharePartitions share one timing wheel for their acquisition locks (Kafka's
``share-group-lock-timeout`` timer).

With a persister (Kafka's DefaultStatePersister, broker/share/persister.py) the state
outlives the leader: a new SharePartition is INITIALIZING until its state is read back from
the share coordinator (a ShareFetch meanwhile waits in the ShareFetch purgatory, woken by
``on_acquirable`` when it ends), and ``write_state`` stores it after each acknowledgement,
release and lock expiry, one write at a time per partition (a write carries the state as it
is when it starts, so one write answers every change made before it). A write refused with
FENCED_LEADER_EPOCH means a newer leader took over: the SharePartition goes. Without one
(unit tests) the state is in memory only and a new leader starts at the reset offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from purgatory.broker.purgatory import Scheduler, SystemTimer
from purgatory.broker.share.share_partition import (
    PersistedState,
    SharePartition,
    SharePartitionState,
    SharePartitionStats,
    StateBatch,
)
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

# A write's errors that say this broker's SharePartition is stale (Kafka's fenceSharePartition).
_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH})


class StatePersister(Protocol):
    """Where share partitions' state is kept (Kafka's Persister): broker/share/persister.py's
    DefaultStatePersister, the share coordinator's client; a fake in unit tests."""

    def read_now(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None] | None:
        """``read``'s answer if it can be had without waiting, else None."""
        ...

    async def read(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None]:
        """(error, the state; None when nothing was ever written)."""
        ...

    async def write(
        self,
        group_id: str,
        topic_id: str,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> int:
        """The error code once the state is stored (NONE) or could not be."""
        ...


class _Writes:
    """One SharePartition's writes: at most one running; the futures of changes made since
    it started wait for the next."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.running = False
        self.waiting: list[asyncio.Future[int]] = []


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
        persister: StatePersister | None = None,
    ) -> None:
        self.config = config
        self.persister = persister
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.group_config = group_config  # a group's dynamic configs (GroupConfig), by group id
        self.timer = SystemTimer(scheduler)
        self.stats = SharePartitionStats()  # every SharePartition's counts (metrics)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self._topic_ids: dict[SharePartitionKey, object] = {}
        self._by_partition: dict[TopicPartition, set[SharePartitionKey]] = {}
        self._by_group: dict[str, set[SharePartitionKey]] = {}
        self._writes: dict[SharePartition, _Writes] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # reads and writes under way
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
        elif share_partition.state is SharePartitionState.ACTIVE:
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

    def release_member(self, group_id: str, member_id: str) -> list[asyncio.Future[int]]:
        """The member's share session closed (or it left the group): its acquired records
        in every partition of the group are available again. The writes of the partitions
        that changed (their error codes once stored)."""
        writes = []
        for key in list(self._by_group.get(group_id, ())):
            share_partition = self.partitions[key]
            if share_partition.release_acquired(member_id):
                writes.append(self.write_state(share_partition))
        return writes

    # -- the persisted state -----------------------------------------------------------------

    def write_state(self, share_partition: SharePartition) -> asyncio.Future[int]:
        """Store the SharePartition's state as it is now: a future of the error code
        (NONE once stored; at once without a persister)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.persister is None:
            future.set_result(ErrorCode.NONE)
            return future
        writes = self._writes.get(share_partition)
        if writes is None:
            writes = self._writes[share_partition] = _Writes()
        writes.waiting.append(future)
        if not writes.running:
            writes.running = True
            self._spawn(self._write(share_partition, writes))
        return future

    async def _write(self, share_partition: SharePartition, writes: _Writes) -> None:
        """Write until no change waits, each write answering the changes made before it."""
        assert self.persister is not None
        key = (share_partition.group_id, share_partition.topic, share_partition.partition)
        topic_id = str(self._topic_ids.get(key, ""))
        try:
            while writes.waiting:
                futures, writes.waiting = writes.waiting, []
                start, batches = share_partition.persisted_state()
                try:
                    code = await self.persister.write(
                        share_partition.group_id,
                        topic_id,
                        share_partition.partition,
                        share_partition.state_epoch,
                        share_partition.leader_epoch,
                        start,
                        batches,
                    )
                except asyncio.CancelledError:
                    writes.waiting[:0] = futures
                    raise
                if code != ErrorCode.NONE:
                    self.log.warning(
                        "share_state_write_failed",
                        group_id=key[0],
                        topic=key[1],
                        partition=key[2],
                        error=ErrorCode(code).name,
                    )
                    if code in _FENCED and self.partitions.get(key) is share_partition:
                        self._drop(key)
                for future in futures:
                    if not future.done():
                        future.set_result(code)
        finally:
            writes.running = False
            for future in writes.waiting:  # cancelled (shutdown): nobody will write them
                if not future.done():
                    future.set_result(ErrorCode.UNKNOWN_SERVER_ERROR)
            writes.waiting.clear()
            self._writes.pop(share_partition, None)

    async def _initialize(self, key: SharePartitionKey, share_partition: SharePartition) -> None:
        """Read the SharePartition's state back (waiting for the share coordinator)."""
        assert self.persister is not None
        group_id, _, index = key
        code, persisted = await self.persister.read(
            group_id, str(self._topic_ids[key]), index, share_partition.leader_epoch
        )
        if self.partitions.get(key) is share_partition:  # else dropped meanwhile
            self._initialized(key, share_partition, code, persisted)

    def _initialized(
        self,
        key: SharePartitionKey,
        share_partition: SharePartition,
        code: int,
        persisted: PersistedState | None,
        notify: bool = True,
    ) -> None:
        """The state read back: the SharePartition is ACTIVE (Kafka's initialize); nothing
        ever written, it starts at the reset offset, written at once so a later leader
        starts there too. A read that failed drops it (the next fetch makes it anew)."""
        group_id, topic, index = key
        if code != ErrorCode.NONE:
            self.log.warning(
                "share_state_read_failed",
                group_id=group_id,
                topic=topic,
                partition=index,
                error=ErrorCode(code).name,
            )
            self._drop(key)
        else:
            share_partition.initialize(persisted)
            if persisted is None:
                self.write_state(share_partition)
            self.log.debug(
                "share_partition_initialized",
                group_id=group_id,
                topic=topic,
                partition=index,
                start=share_partition.start_offset,
                end=share_partition.end_offset,
            )
        if notify:
            self._acquirable(share_partition)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _state_changed(self, share_partition: SharePartition) -> None:
        """A lock expired: the state is written, awaited by nobody."""
        self.write_state(share_partition)

    def on_topics_deleted(self, topics: set[str]) -> None:
        """The metadata deleted topics: their SharePartitions go (the replica manager also
        reports the lost leadership; this covers a topic made again under the same name)."""
        for key in [k for k in self.partitions if k[1] in topics]:
            self._drop(key)

    def shutdown(self) -> None:
        for key in list(self.partitions):
            self._drop(key)
        for task in self._tasks:
            task.cancel()

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
            initializing=self.persister is not None,
        )
        share_partition.leader_epoch = leader.leader_epoch
        share_partition.on_acquirable = self._acquirable
        share_partition.on_state_changed = self._state_changed
        self.partitions[key] = share_partition
        self._topic_ids[key] = leader.topic_id
        self._by_partition.setdefault((topic, index), set()).add(key)
        self._by_group.setdefault(group_id, set()).add(key)
        self.log.debug(
            "share_partition_created", group_id=group_id, topic=topic, partition=index, start=start
        )
        if self.persister is not None:
            now = self.persister.read_now(
                group_id, str(leader.topic_id), index, share_partition.leader_epoch
            )
            if now is None or now[0] != ErrorCode.NONE:
                self._spawn(self._initialize(key, share_partition))
            else:  # nothing waits on a SharePartition just made: nobody to tell
                self._initialized(key, share_partition, *now, notify=False)
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
