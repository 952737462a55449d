"""GroupMetadataManager: the groups this broker coordinates, kept in ``__consumer_offsets``.

A group lives in partition hash(group) mod ``offsets.topic.num.partitions`` of the
internal topic; the leader of that partition is its coordinator. Every change that must
outlive the coordinator (a commit, a generation's assignment, a deletion) is appended
there with acks=-1 through the Produce purgatory and applied to memory only once the
in-sync replicas have it. A broker that becomes leader of such a partition replays it
from the start (COORDINATOR_LOAD_IN_PROGRESS meanwhile); one that stops leading it drops
its groups (NOT_COORDINATOR from then on). As Kafka's GroupMetadataManager.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterator
from typing import TypeVar

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from purgatory.broker.coordinator.consumer_group_records import (
    ConsumerGroupReplay,
    group_tombstones,
)
from purgatory.broker.coordinator.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)
from purgatory.broker.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TxnOffsetCommitKey,
    decode_group,
    decode_key,
    decode_offset,
    encode,
    partition_for,
)
from purgatory.broker.coordinator.share_group import ShareGroup, ShareGroupState
from purgatory.broker.coordinator.share_group_records import (
    SHARE_GROUP_KEYS,
    ShareGroupReplay,
)
from purgatory.broker.coordinator.share_group_records import (
    group_tombstones as share_group_tombstones,
)
from purgatory.broker.purgatory import Scheduler
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import TopicState
from purgatory.protocol.kafka_records import CONTROL_FLAG, parse_end_txn_marker
from purgatory.protocol.records import (
    CorruptRecordError,
    batch_base_offset,
    decode_records,
    encode_batch,
    is_kafka_batch,
    iter_batches,
)

T = TypeVar("T")

_LOAD_BATCH_BYTES = 1 << 20  # replayed per loop turn, so a long load never stalls others

# How an append's error reads to a group member (Kafka's GroupMetadataManager mapping).
_APPEND_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}

# a classic group, a KIP-848 consumer group, or a KIP-932 share group
Group = GroupMetadata | ConsumerGroup | ShareGroup


def group_type(group: Group) -> str:
    """Kafka's GroupType name: ``classic``, ``consumer`` (KIP-848) or ``share`` (KIP-932)."""
    if isinstance(group, ConsumerGroup):
        return "consumer"
    if isinstance(group, ShareGroup):
        return "share"
    return "classic"


class GroupMetadataManager:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        scheduler: Scheduler,
        on_loaded: Callable[[Group], None],
        on_unloaded: Callable[[Group], None],
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.scheduler = scheduler
        self.on_loaded = on_loaded
        self.on_unloaded = on_unloaded
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()  # offsets partitions led and loaded
        self.loading: dict[int, int] = {}  # offsets partition -> leader epoch being loaded
        self.leader_epochs: dict[int, int] = {}  # of the partitions owned or loading
        self.num_partitions = config["offsets.topic.num.partitions"]
        self.log = structlog.get_logger("group_metadata").bind(broker_id=config.broker_id)

    # -- ownership ------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ownership_error(self, group_id: str) -> int:
        """NONE if this broker coordinates the group now, else why not."""
        p = self.partition_for(group_id)
        if p in self.owned:
            return ErrorCode.NONE
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def owned_groups(self) -> Iterator[Group]:
        return iter(list(self.groups.values()))

    def leadership_changed(self, index: int, leader_epoch: int, is_leader: bool) -> None:
        """The replica manager's news about an ``__consumer_offsets`` partition."""
        if is_leader:
            if self.leader_epochs.get(index) == leader_epoch:
                return  # still leading in the same epoch (an ISR change)
            self._unload(index)
            self.loading[index] = leader_epoch
            self.leader_epochs[index] = leader_epoch
            self.scheduler.call_soon(lambda: self._load(index, leader_epoch, 0, _Replay()))
        elif index in self.owned or index in self.loading:
            self._unload(index)

    def _unload(self, index: int) -> None:
        self.owned.discard(index)
        self.loading.pop(index, None)
        self.leader_epochs.pop(index, None)
        for group in self.owned_groups():
            if self.partition_for(group.group_id) == index:
                del self.groups[group.group_id]
                self.on_unloaded(group)

    # -- loading --------------------------------------------------------------------------

    def _load(self, index: int, epoch: int, offset: int, replay: _Replay) -> None:
        """Replay the partition from ``offset`` one chunk at a time, then take its groups."""
        if self.loading.get(index) != epoch:
            return  # leadership moved on meanwhile
        partition = self.replica_manager.partitions.get((OFFSETS_TOPIC, index))
        if partition is None or not partition.is_leader:
            self._unload(index)
            return
        log = partition.log
        offset = max(offset, log.local_log_start_offset)
        next_offset = offset
        if offset < log.log_end_offset:
            for batch in iter_batches(b"".join(log.read(offset, _LOAD_BATCH_BYTES))):
                try:
                    next_offset = max(next_offset, replay.batch(batch))
                except (CorruptRecordError, ValueError) as exc:
                    self.log.error("offsets_partition_unreadable", partition=index, error=str(exc))
                    break
            if next_offset > offset:
                self.scheduler.call_soon(lambda: self._load(index, epoch, next_offset, replay))
                return
        self._finish_load(index, replay)

    def _finish_load(self, index: int, replay: _Replay) -> None:
        groups, offsets = replay.groups, replay.offsets
        now = self.scheduler.wall_ms()
        loaded: dict[str, Group] = {}
        for group_id, value in groups.items():
            if value is not None:
                loaded[group_id] = _group_from(group_id, value)
        loaded.update(replay.consumer.groups_built(now))
        loaded.update(replay.share.groups_built(now))
        topics = self.metadata.topics
        stale: dict[str, list[TopicPartition]] = {}
        for (group_id, tp), commit in offsets.items():
            if commit is None:
                continue
            if _of_deleted_topic(commit, topics.get(tp[0])):
                stale.setdefault(group_id, []).append(tp)
                continue
            group = loaded.get(group_id)
            if group is None:  # a group that only commits offsets
                group = loaded[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now)
            group.offsets[tp] = _committed(commit)
        for (group_id, producer_id), pending in replay.pending.items():
            group = loaded.get(group_id)
            if group is None:
                group = loaded[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now)
            group.pending_txn_offsets[producer_id] = {
                tp: _committed(value) for tp, value in pending.items()
            }
        self.loading.pop(index, None)
        self.owned.add(index)
        for group in loaded.values():
            self.groups[group.group_id] = group
            self.on_loaded(group)
        self.log.info("offsets_partition_loaded", partition=index, groups=len(loaded))
        for group_id, partitions in stale.items():
            # Their topic was deleted before a coordinator wrote these tombstones (it
            # failed meanwhile, or this partition was loading).
            self.log.info(
                "offsets_of_deleted_topics_removed", group=group_id, offsets=len(partitions)
            )
            self.append(
                group_id,
                [(_key(OffsetCommitKey(group_id, t, p)), None) for t, p in partitions],
            )

    # -- storing --------------------------------------------------------------------------

    def append(self, group_id: str, records: list[Record]) -> asyncio.Future[int]:
        """Append records about a group to its partition with acks=-1; the future resolves
        to NONE once the in-sync replicas have them, else to the error a member is told."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        batch = encode_batch(records, timestamp_ms=self.scheduler.wall_ms())
        key = (OFFSETS_TOPIC, self.partition_for(group_id))
        responses, done = self.replica_manager.append_records(
            self.config["offsets.commit.timeout.ms"],
            -1,
            [(key, batch)],
            internal_topics_allowed=True,
        )

        def settle(code: int) -> None:
            if not future.done():
                future.set_result(_APPEND_ERRORS.get(code, code) if code else ErrorCode.NONE)

        if done is None:
            settle(responses[0][1].error)
        else:
            done.add_done_callback(lambda d: settle(d.result()[0][1].error))
        return future

    def answer_when_stored(
        self, group_id: str, records: list[Record], result: T, failed: Callable[[int], T]
    ) -> T | asyncio.Future[T]:
        """``result`` once ``records`` are in the group's partition, ``failed(error)`` if
        they are not stored; ``result`` at once when there is nothing to store. (A modern
        group's state changes at once, as Kafka's uncommitted timeline state does; its
        member is answered when the change is durable.)"""
        if not records:
            return result
        stored = self.append(group_id, records)
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future[int]) -> None:
            if not answer.done():
                code = f.result()
                answer.set_result(result if code == ErrorCode.NONE else failed(code))

        stored.add_done_callback(done)
        return answer

    def append_in_background(self, group_id: str, records: list[Record]) -> None:
        """Append what nobody waits for (a member fenced by a timeout): a failure is
        logged, the group's state in memory stays as changed."""

        def done(f: asyncio.Future[int]) -> None:
            if f.result() != ErrorCode.NONE:
                self.log.warning("group_records_not_stored", group=group_id, error=f.result())

        self.append(group_id, records).add_done_callback(done)

    def store_offsets(
        self, group: Group, offsets: dict[TopicPartition, CommittedOffset]
    ) -> asyncio.Future[int]:
        """Append the commits; once stored they replace the group's committed offsets."""
        records: list[Record] = [
            (_key(OffsetCommitKey(group.group_id, topic, index)), _value(o))
            for (topic, index), o in offsets.items()
        ]
        future = self.append(group.group_id, records)

        def stored(f: asyncio.Future[int]) -> None:
            if f.result() == ErrorCode.NONE and self.groups.get(group.group_id) is group:
                group.offsets.update(offsets)

        future.add_done_callback(stored)
        # The caller's copy: a member whose connection closes cancels it, never the
        # outcome the group's state follows.
        return asyncio.shield(future)

    def store_txn_offsets(
        self,
        group: Group,
        producer_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
    ) -> asyncio.Future[int]:
        """TxnOffsetCommit: append the offsets as the producer's transaction's; they become
        the group's when its commit marker is written (``complete_txn_offsets``)."""
        records: list[Record] = [
            (_key(TxnOffsetCommitKey(group.group_id, topic, index, producer_id)), _value(o))
            for (topic, index), o in offsets.items()
        ]
        future = self.append(group.group_id, records)

        def stored(f: asyncio.Future[int]) -> None:
            if f.result() == ErrorCode.NONE and self.groups.get(group.group_id) is group:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

        future.add_done_callback(stored)
        return asyncio.shield(future)

    def complete_txn_offsets(self, index: int, producer_id: int, committed: bool) -> None:
        """The producer's marker is in partition ``index``: its transaction's offsets in
        the partition's groups become their committed offsets, or are dropped."""
        if index not in self.owned:
            return  # loading: the replay meets the marker in the log
        for group in self.owned_groups():
            if self.partition_for(group.group_id) != index:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and committed:
                group.offsets.update(pending)

    def store_group(
        self, group: GroupMetadata, assignment: dict[str, bytes]
    ) -> asyncio.Future[int]:
        """Append the group's generation: members, their subscriptions and ``assignment``."""
        protocol = group.protocol_name
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id,
            group.state_timestamp_ms,
            [
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(protocol) if protocol else b"",
                    assignment.get(m.member_id, b""),
                )
                for m in group.members.values()
            ],
        )
        return self.append(
            group.group_id, [(_key(GroupMetadataKey(group.group_id)), encode(value))]
        )

    def delete_group(self, group: Group, now_ms: int, at_once: bool = False) -> asyncio.Future[int]:
        """The group is Dead and gone from memory now; its records and offsets are
        deleted (tombstones) once stored."""
        if isinstance(group, ConsumerGroup):
            group.state = ConsumerGroupState.DEAD
        elif isinstance(group, ShareGroup):
            group.state = ShareGroupState.DEAD
        else:
            group.transition_to(GroupState.DEAD, now_ms)
        self.groups.pop(group.group_id, None)
        self.log.info("group_deleted", group=group.group_id, offsets=len(group.offsets))
        return self.delete_offsets(group, list(group.offsets), delete_group=True, at_once=at_once)

    def delete_offsets(
        self,
        group: Group,
        partitions: list[TopicPartition],
        delete_group: bool = False,
        at_once: bool = False,
    ) -> asyncio.Future[int]:
        """Tombstones for ``partitions`` (and the group itself); applied once stored, or
        ``at_once`` (offsets of a deleted topic: no fetch may see them meanwhile)."""
        records: list[Record] = [
            (_key(OffsetCommitKey(group.group_id, t, p)), None) for t, p in partitions
        ]
        if delete_group and isinstance(group, ConsumerGroup):
            records.extend(group_tombstones(group))
        elif delete_group and isinstance(group, ShareGroup):
            records.extend(share_group_tombstones(group))
        elif delete_group:
            records.append((_key(GroupMetadataKey(group.group_id)), None))
        future = self.append(group.group_id, records)
        if at_once:
            for tp in partitions:
                group.offsets.pop(tp, None)

        def stored(f: asyncio.Future[int]) -> None:
            code = f.result()
            if code == ErrorCode.NONE and not at_once:  # (at once: a newer commit may be here)
                for tp in partitions:
                    group.offsets.pop(tp, None)
            elif code != ErrorCode.NONE and at_once:
                self.log.warning("offset_tombstones_not_stored", group=group.group_id, error=code)

        future.add_done_callback(stored)
        # The caller's copy: a member whose connection closes cancels it, never the
        # outcome the group's state follows.
        return asyncio.shield(future)


def _key(key: OffsetCommitKey | GroupMetadataKey | TxnOffsetCommitKey) -> bytes:
    data = encode(key)
    assert data is not None
    return data


def _of_deleted_topic(commit: OffsetCommitValue, topic: TopicState | None) -> bool:
    """An offset read back whose topic is gone, or made again (a new topic id). This
    broker's metadata is at least as new as the commit's: a commit names a topic its
    coordinator knew, and that coordinator led the partition before the metadata this
    broker leads it by."""
    if topic is None:
        return True
    return bool(commit.topic_id) and commit.topic_id != topic.topic_id


def _group_from(group_id: str, value: GroupMetadataValue) -> GroupMetadata:
    """A group as its latest record left it: Empty when it had no members, else Stable
    (the members must heartbeat within their session timeouts, or they are removed)."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(
        group_id,
        state,
        value.state_timestamp_ms,
        generation_id=value.generation_id,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol_name,
        leader_id=value.leader_id,
    )
    protocol = value.protocol_name or ""
    for m in value.members:
        member = MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            value.protocol_type,
            [(protocol, m.subscription)],
            assignment=m.assignment,
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    return group


def _value(o: CommittedOffset) -> bytes | None:
    return encode(
        OffsetCommitValue(o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms, o.topic_id)
    )


def _committed(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(
        value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms, value.topic_id
    )


class _Replay:
    """What replaying an ``__consumer_offsets`` partition found so far: the last record
    per group and per committed offset, and the offsets of transactions not yet ended
    (a commit marker makes them committed offsets, an abort marker drops them)."""

    __slots__ = ("consumer", "groups", "offsets", "pending", "share")

    def __init__(self) -> None:
        self.consumer = ConsumerGroupReplay()
        self.share = ShareGroupReplay()
        self.groups: dict[str, GroupMetadataValue | None] = {}
        self.offsets: dict[tuple[str, TopicPartition], OffsetCommitValue | None] = {}
        self.pending: dict[tuple[str, int], dict[TopicPartition, OffsetCommitValue]] = {}

    def batch(self, batch: memoryview) -> int:
        """Replay one batch; returns the offset after it."""
        if is_kafka_batch(batch) and batch[_ATTRIBUTES_LOW] & CONTROL_FLAG:
            committed, _ = parse_end_txn_marker(batch)
            (producer_id,) = _PRODUCER_ID.unpack_from(batch, _PRODUCER_ID_AT)
            for key in [k for k in self.pending if k[1] == producer_id]:
                ended = self.pending.pop(key)
                if committed:
                    for tp, value in ended.items():
                        self.offsets[(key[0], tp)] = value
            return batch_base_offset(batch) + 1
        records = decode_records(batch)
        for record in records:
            self.record(record.key, record.value)
        return records[-1].offset + 1 if records else batch_base_offset(batch) + 1

    def record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        parsed = decode_key(key)
        if isinstance(parsed, OffsetCommitKey):
            tp = (parsed.topic, parsed.partition)
            self.offsets[(parsed.group, tp)] = None if value is None else decode_offset(value)
        elif isinstance(parsed, TxnOffsetCommitKey):
            if value is not None:
                pending = self.pending.setdefault((parsed.group, parsed.producer_id), {})
                pending[(parsed.topic, parsed.partition)] = decode_offset(value)
        elif isinstance(parsed, GroupMetadataKey):
            self.groups[parsed.group] = None if value is None else decode_group(value)
        elif isinstance(parsed, SHARE_GROUP_KEYS):
            self.share.record(parsed, value)
        else:
            self.consumer.record(parsed, value)


_ATTRIBUTES_LOW = 22  # the low byte of a v2 batch's attributes
_PRODUCER_ID_AT = 43
_PRODUCER_ID = struct.Struct(">q")
