"""ShareCoordinator: the share groups' partition state, kept in ``__share_group_state``
(Kafka's ShareCoordinatorService and ShareCoordinatorShard in one).

The state of share-partition (group G, topic T, partition P) lives in partition
hash(``G:T:P``) mod ``share.coordinator.state.topic.num.partitions`` of the internal topic;
the leader of that partition is its share coordinator. The data partition's leader reads
the state when it starts leading (ReadShareGroupState) and writes it after every change
(WriteShareGroupState): each write is a full snapshot, appended with acks=-1 and applied
to memory only once the in-sync replicas have it. A broker that becomes leader of a state
partition replays it from the start (COORDINATOR_LOAD_IN_PROGRESS meanwhile); one that
stops leading it drops its share-partitions (NOT_COORDINATOR from then on).

Fencing: a read or write carries the data partition's leader epoch; one older than the
newest this coordinator has seen for the share-partition (written, or read by a newer
leader) is FENCED_LEADER_EPOCH: an old leader must not overwrite its successor's state.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import msgspec
import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.internal_topics import SHARE_GROUP_STATE_TOPIC
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.broker.coordinator.share.share_coordinator_records import (
    decode_key,
    decode_value,
    snapshot_key,
    snapshot_value,
)
from purgatory.broker.coordinator.share.share_group_offset import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    coordinator_key,
)
from purgatory.broker.purgatory import Scheduler
from purgatory.broker.replication.fetch_params import TopicPartition
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import (
    CorruptRecordError,
    batch_base_offset,
    decode_records,
    encode_batch,
    iter_batches,
)

# How an append's error reads to the share-partition's leader (as the group coordinator's).
_APPEND_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
}


class ShareCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        scheduler: Scheduler,
        create_topic: Callable[[], None],
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.scheduler = scheduler
        self.create_topic = create_topic
        self.num_partitions = config["share.coordinator.state.topic.num.partitions"]
        # Invariants: a key is in ``states`` only if its partition is in ``owned``; the
        # leader epoch fence of a key is never below its stored state's leader epoch.
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}  # the newest seen (fence)
        self.owned: set[int] = set()  # state partitions led and loaded
        self.loading: dict[int, int] = {}  # state partition -> leader epoch being loaded
        self.partition_epochs: dict[int, int] = {}  # of the partitions owned or loading
        # Each write's turn per key: a write's snapshot is applied only if no later
        # write of the key was applied first.
        self._written: dict[SharePartitionKey, int] = {}
        self._applied: dict[SharePartitionKey, int] = {}
        self._writes = 0
        replica_manager.leadership_listeners.append(self._leadership)
        self.log = structlog.get_logger("share_coordinator").bind(broker_id=config.broker_id)

    def shutdown(self) -> None:
        for index in list(self.owned | set(self.loading)):
            self._unload(index)

    # -- where state lives -----------------------------------------------------------------

    def partition_for(self, key: SharePartitionKey) -> int:
        """Kafka's ``Utils.abs("groupId:topicId:partition".hashCode) % N``."""
        return partition_for(coordinator_key(key), self.num_partitions)

    def find_coordinator(self, key: SharePartitionKey) -> tuple[int, int]:
        """(error, broker id) of the key's share coordinator: the live leader of its
        ``__share_group_state`` partition, which is created on the first ask
        (COORDINATOR_NOT_AVAILABLE until it exists)."""
        return self.metadata.coordinator_of(
            SHARE_GROUP_STATE_TOPIC, self.partition_for(key), self.create_topic
        )

    def ownership_error(self, key: SharePartitionKey) -> int:
        """NONE if this broker is the key's share coordinator now, else why not."""
        index = self.partition_for(key)
        if index in self.owned:
            return ErrorCode.NONE
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    # -- reading and writing ---------------------------------------------------------------

    def read_state(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[int, ShareGroupOffset | None]:
        """The share-partition's state as last stored: (NONE, None) when nothing was
        ever written (its leader starts at ``share.auto.offset.reset``). A leader epoch
        older than one seen is FENCED_LEADER_EPOCH; a newer one fences the leaders
        before it (-1: no fencing either way)."""
        error = self._check(key)
        if error != ErrorCode.NONE:
            return error, None
        if leader_epoch >= 0:
            if leader_epoch < self.leader_epochs.get(key, -1):
                return ErrorCode.FENCED_LEADER_EPOCH, None
            self.leader_epochs[key] = leader_epoch
        return ErrorCode.NONE, self.states.get(key)

    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[PersisterStateBatch],
    ) -> asyncio.Future[int]:
        """Store the share-partition's whole state (it replaces the one before); resolves
        to NONE once the in-sync replicas of its state partition have it, else to the
        error (FENCED_LEADER_EPOCH for a leader older than one seen, FENCED_STATE_EPOCH
        for a state epoch older than the stored one; NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE for the sender to retry).
        A state or leader epoch of -1 keeps the stored one."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        error = self._check(key)
        if error == ErrorCode.NONE and start_offset < -1:
            error = ErrorCode.INVALID_REQUEST
        if error == ErrorCode.NONE and 0 <= leader_epoch < self.leader_epochs.get(key, -1):
            error = ErrorCode.FENCED_LEADER_EPOCH
        before = self.states.get(key)
        if error == ErrorCode.NONE and before is not None and 0 <= state_epoch < before.state_epoch:
            error = ErrorCode.FENCED_STATE_EPOCH
        if error != ErrorCode.NONE:
            future.set_result(error)
            return future
        if leader_epoch < 0:
            leader_epoch = before.leader_epoch if before is not None else -1
        if state_epoch < 0:
            state_epoch = before.state_epoch if before is not None else 0
        if leader_epoch >= 0:
            self.leader_epochs[key] = max(leader_epoch, self.leader_epochs.get(key, -1))
        state = ShareGroupOffset(state_epoch, leader_epoch, start_offset, list(batches))
        self._writes += 1
        turn = self._written[key] = self._writes
        index = self.partition_for(key)
        epoch = self.partition_epochs.get(index)

        def stored(code: int) -> None:
            if (
                code == ErrorCode.NONE
                and self.partition_epochs.get(index) == epoch
                and index in self.owned
                and turn > self._applied.get(key, 0)
            ):
                self.states[key] = state
                self._applied[key] = turn
            if not future.done():
                future.set_result(code)

        self._append(index, [(snapshot_key(key), snapshot_value(state))], stored)
        return future

    def delete_state(self, group_id: str, keys: list[SharePartitionKey]) -> asyncio.Future[int]:
        """Forget the share-partitions of a deleted group or topic (tombstones), each in
        its own state partition; resolves to the first error, else NONE."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        by_partition: dict[int, list[SharePartitionKey]] = {}
        for key in keys:
            if key.group_id != group_id or self._check(key) != ErrorCode.NONE:
                continue
            by_partition.setdefault(self.partition_for(key), []).append(key)
        pending = len(by_partition)
        errors: list[int] = []
        if not pending:
            future.set_result(ErrorCode.NONE)
            return future

        def deleted(index: int, gone: list[SharePartitionKey], code: int) -> None:
            nonlocal pending
            if code == ErrorCode.NONE and index in self.owned:
                for key in gone:
                    self.states.pop(key, None)
                    self._applied.pop(key, None)
                    self._written.pop(key, None)
            elif code != ErrorCode.NONE:
                errors.append(code)
            pending -= 1
            if pending == 0 and not future.done():
                future.set_result(errors[0] if errors else ErrorCode.NONE)

        for index, gone in by_partition.items():
            self._append(
                index,
                [(snapshot_key(key), None) for key in gone],
                functools.partial(deleted, index, gone),
            )
        return future

    def _check(self, key: SharePartitionKey) -> int:
        if not key.group_id or not key.topic_id or key.partition < 0:
            return ErrorCode.INVALID_REQUEST
        return self.ownership_error(key)

    def _append(
        self, index: int, records: list[tuple[bytes, bytes | None]], done: Callable[[int], None]
    ) -> None:
        """Append to state partition ``index`` with acks=-1; ``done(error)`` once the
        in-sync replicas have it, or it failed."""
        batch = encode_batch(records, timestamp_ms=self.scheduler.wall_ms())
        responses, waiting = self.replica_manager.append_records(
            self.config["share.coordinator.write.timeout.ms"],
            -1,
            [((SHARE_GROUP_STATE_TOPIC, index), batch)],
            internal_topics_allowed=True,
        )

        def settle(code: int) -> None:
            done(_APPEND_ERRORS.get(code, code) if code else ErrorCode.NONE)

        if waiting is None:
            settle(responses[0][1].error)
        else:
            waiting.add_done_callback(lambda d: settle(d.result()[0][1].error))

    # -- loading on leadership -------------------------------------------------------------

    def _leadership(self, key: TopicPartition, leader_epoch: int, leads: bool) -> None:
        if key[0] == SHARE_GROUP_STATE_TOPIC:
            self.leadership_changed(key[1], leader_epoch, leads)

    def leadership_changed(self, index: int, leader_epoch: int, is_leader: bool) -> None:
        """The replica manager's news about a ``__share_group_state`` partition."""
        if is_leader:
            if self.partition_epochs.get(index) == leader_epoch:
                return  # still leading in the same epoch (an ISR change)
            self._unload(index)
            self.loading[index] = leader_epoch
            self.partition_epochs[index] = leader_epoch
            replay: dict[SharePartitionKey, ShareGroupOffset | None] = {}
            self.scheduler.call_soon(lambda: self._load(index, leader_epoch, 0, replay))
        elif index in self.owned or index in self.loading:
            self._unload(index)

    def _unload(self, index: int) -> None:
        self.owned.discard(index)
        self.loading.pop(index, None)
        self.partition_epochs.pop(index, None)
        keys = self.states.keys() | self.leader_epochs.keys()
        for key in [k for k in keys if self.partition_for(k) == index]:
            self.states.pop(key, None)
            self.leader_epochs.pop(key, None)
            self._applied.pop(key, None)
            self._written.pop(key, None)

    def _load(
        self,
        index: int,
        epoch: int,
        offset: int,
        replay: dict[SharePartitionKey, ShareGroupOffset | None],
    ) -> None:
        """Replay the partition from ``offset`` one chunk at a time, then take its state."""
        if self.loading.get(index) != epoch:
            return  # leadership moved on meanwhile
        partition = self.replica_manager.partitions.get((SHARE_GROUP_STATE_TOPIC, index))
        if partition is None or not partition.is_leader:
            self._unload(index)
            return
        log = partition.log
        offset = max(offset, log.local_log_start_offset)
        next_offset = offset
        if offset < log.log_end_offset:
            chunk = b"".join(log.read(offset, self.config["share.coordinator.load.buffer.size"]))
            for batch in iter_batches(chunk):
                try:
                    records = decode_records(batch)
                    for record in records:
                        if record.key is not None:
                            key = decode_key(record.key)
                            value = record.value
                            replay[key] = None if value is None else decode_value(value)
                    end = records[-1].offset + 1 if records else batch_base_offset(batch) + 1
                    next_offset = max(next_offset, end)
                except (CorruptRecordError, ValueError, msgspec.DecodeError) as exc:
                    self.log.error(
                        "share_state_partition_unreadable", partition=index, error=str(exc)
                    )
                    break
            if next_offset > offset:
                self.scheduler.call_soon(lambda: self._load(index, epoch, next_offset, replay))
                return
        self.loading.pop(index, None)
        self.owned.add(index)
        for key, state in replay.items():
            if state is not None:
                self.states[key] = state
                self.leader_epochs[key] = max(state.leader_epoch, self.leader_epochs.get(key, -1))
        self.log.info("share_state_partition_loaded", partition=index, keys=len(self.states))
