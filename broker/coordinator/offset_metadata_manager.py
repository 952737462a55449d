"""OffsetMetadataManager: the committed offsets of the groups this broker coordinates
(OffsetCommit, OffsetFetch, OffsetDelete, and offset retention), as Kafka's group
coordinator names the part of it that keeps offsets. Membership is the GroupCoordinator's;
storage in ``__consumer_offsets`` the GroupMetadataManager's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.consumer_group import ConsumerGroup
from purgatory.broker.coordinator.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)
from purgatory.broker.coordinator.group_metadata_manager import Group, GroupMetadataManager
from purgatory.broker.coordinator.share_group import ShareGroup
from purgatory.broker.purgatory import Periodic, Scheduler
from purgatory.protocol.errors import ErrorCode

OffsetToCommit = tuple[int, int, str | None]  # offset, leader epoch, metadata
A = TypeVar("A")
B = TypeVar("B")


def mapped(future: asyncio.Future[A], to: Callable[[A], B]) -> asyncio.Future[B]:
    """A future of ``to(result)`` once ``future`` has its result. Whoever waits for it may
    have let go first (the connection closed, and cancelled it): then nothing is set."""
    out: asyncio.Future[B] = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future[A]) -> None:
        exc = None if f.cancelled() else f.exception()  # read, even if nobody waits
        if out.done():
            return
        if f.cancelled():
            out.cancel()
        elif exc is not None:
            out.set_exception(exc)
        else:
            out.set_result(to(f.result()))

    future.add_done_callback(done)
    return out


class OffsetMetadataManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        scheduler: Scheduler,
        manager: GroupMetadataManager,
        coordinator_error: Callable[[str], int],
        keep_alive: Callable[[GroupMetadata, MemberMetadata], None],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.scheduler = scheduler
        self.manager = manager
        self.coordinator_error = coordinator_error
        self.keep_alive = keep_alive  # a member's commit counts as its heartbeat
        self.expired_offsets = 0
        self.cleanup = Periodic(
            scheduler,
            lambda: config["offsets.retention.check.interval.ms"],
            self.expire_offsets,
        )
        self.log = structlog.get_logger("offsets").bind(broker_id=config.broker_id)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> (
        tuple[int, dict[TopicPartition, int]]
        | asyncio.Future[tuple[int, dict[TopicPartition, int]]]
    ):
        """OffsetDelete: (group error, error per partition). The offsets of topics a
        consumer group still consumes stay (GROUP_SUBSCRIBED_TO_TOPIC)."""
        error = self.coordinator_error(group_id)
        if error:
            return error, {}
        group = self.manager.groups.get(group_id)
        if group is None or group.is_dead():
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] | None = set()
        if not group.is_in_empty_state():
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
        results: dict[TopicPartition, int] = {}
        deleting: list[TopicPartition] = []
        for tp in partitions:
            if self.metadata.partition(*tp) is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed is not None and tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                if tp in group.offsets:
                    deleting.append(tp)
        if not deleting:
            return ErrorCode.NONE, results
        stored = self.manager.delete_offsets(group, deleting)
        return mapped(stored, lambda code: (code, results))

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetToCommit],
        kafka_version: int | None = None,
    ) -> dict[TopicPartition, int] | asyncio.Future[dict[TopicPartition, int]]:
        """OffsetCommit: one error per partition. A commit with generation -1 (and no
        member) is a group that only stores offsets here; it needs an Empty group.
        ``kafka_version``: the Kafka listener's OffsetCommit version (a KIP-848 member
        must commit with v9+, which carries its member epoch)."""
        error = self.coordinator_error(group_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self.manager.groups[group_id] = GroupMetadata(
                group_id, GroupState.EMPTY, self.scheduler.wall_ms()
            )
        error = self._commit_error(group, generation_id, member_id, group_instance_id)
        if (
            not error
            and isinstance(group, ConsumerGroup)
            and kafka_version is not None
            and kafka_version < 9
            and (member := group.members.get(member_id)) is not None
            and member.classic is None
        ):
            error = ErrorCode.UNSUPPORTED_VERSION  # Kafka's validateOffsetCommit
        if error:
            return dict.fromkeys(offsets, error)
        if isinstance(group, GroupMetadata) and member_id in group.members:
            self.keep_alive(group, group.members[member_id])
        results, valid = self._checked(offsets)
        if not valid:
            return results
        stored = self.manager.store_offsets(group, valid)
        return mapped(stored, lambda code: {**results, **dict.fromkeys(valid, code)})

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetToCommit],
    ) -> dict[TopicPartition, int] | asyncio.Future[dict[TopicPartition, int]]:
        """TxnOffsetCommit: the producer's transaction commits these offsets for the group
        (Kafka's handleTxnCommitOffsets: a group not known is created Empty; a member or
        generation given is checked, KIP-447). They count once the transaction commits."""
        error = self.coordinator_error(group_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.manager.groups.get(group_id)
        if group is None:
            group = self.manager.groups[group_id] = GroupMetadata(
                group_id, GroupState.EMPTY, self.scheduler.wall_ms()
            )
        if group.is_dead():
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif isinstance(group, ShareGroup):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif isinstance(group, ConsumerGroup):
            error = _consumer_group_txn_error(group, generation_id, member_id)
        elif (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            error = ErrorCode.FENCED_INSTANCE_ID
        elif member_id and member_id not in group.members:  # "": no member named
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error:
            return dict.fromkeys(offsets, error)
        results, valid = self._checked(offsets)
        if not valid:
            return results
        stored = self.manager.store_txn_offsets(group, producer_id, valid)
        return mapped(stored, lambda code: {**results, **dict.fromkeys(valid, code)})

    def pending_txn_partitions(self, group_id: str) -> frozenset[TopicPartition]:
        """The partitions an open transaction commits offsets of for the group."""
        group = self.manager.groups.get(group_id)
        if group is None:
            return frozenset()
        return frozenset(tp for pending in group.pending_txn_offsets.values() for tp in pending)

    def _checked(
        self, offsets: dict[TopicPartition, OffsetToCommit]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """(the partitions refused, with their errors; the offsets to store)."""
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        now = self.scheduler.wall_ms()
        limit = self.config["offset.metadata.max.bytes"]
        topics = self.metadata.topics
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata.encode()) > limit:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif self.metadata.partition(*tp) is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                topic_id = topics[tp[0]].topic_id
                valid[tp] = CommittedOffset(offset, leader_epoch, metadata or "", now, topic_id)
        return results, valid

    def _commit_error(
        self, group: Group, generation_id: int, member_id: str, instance: str | None
    ) -> int:
        if group.is_dead():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if isinstance(group, ConsumerGroup):
            return _consumer_group_commit_error(group, generation_id, member_id)
        if isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND  # a share group commits no offsets
        if instance is not None:
            registered = group.static_members.get(instance)
            if registered is not None and registered != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, CommittedOffset | None]]:
        """OffsetFetch: (group error, committed offset per partition, None where nothing is
        committed). ``partitions`` None: every partition the group committed."""
        error = self.coordinator_error(group_id)
        if error:
            return error, {}
        group = self.manager.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def member_fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ by a consumer group's member (Kafka's ``validateOffsetFetch``):
        it must be one, in its current epoch; without a member id and epoch (-1), anyone
        may fetch. Other groups do not check."""
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Topics are deleted (Kafka's GroupCoordinator.onPartitionsDeleted): every group
        this broker coordinates forgets its offsets of them now, and tombstones for them go
        to ``__consumer_offsets`` so the next coordinator forgets them too; an Empty group
        left without offsets goes. A topic made again under the same name is a new
        incarnation, read from its start."""
        now = self.scheduler.wall_ms()
        for group in self.manager.owned_groups():
            if group.is_dead():
                continue
            gone = [tp for tp in group.offsets if tp[0] in topics]
            if not gone:
                continue
            self.log.info(
                "offsets_of_deleted_topics_removed", group=group.group_id, offsets=len(gone)
            )
            if group.is_in_empty_state() and len(gone) == len(group.offsets):
                self.manager.delete_group(group, now, at_once=True)
            else:
                self.manager.delete_offsets(group, gone, at_once=True)

    def expire_offsets(self) -> None:
        """Offset retention (``GroupMetadata.expired_offsets``); an Empty group left without
        offsets goes too."""
        now = self.scheduler.wall_ms()
        retention = self.config["offsets.retention.minutes"] * 60_000
        for group in self.manager.owned_groups():
            if group.is_dead():
                continue
            expired = group.expired_offsets(now, retention)
            if group.is_in_empty_state() and len(expired) == len(group.offsets):
                self.expired_offsets += len(expired)
                self.manager.delete_group(group, now)
            elif expired:
                self.expired_offsets += len(expired)
                self.log.info("offsets_expired", group=group.group_id, offsets=len(expired))
                self.manager.delete_offsets(group, expired)


def _consumer_group_commit_error(group: ConsumerGroup, member_epoch: int, member_id: str) -> int:
    """Kafka's ``ConsumerGroup.validateOffsetCommit``: a commit without a member (epoch
    -1) needs an empty group; a member's must carry its current epoch."""
    if member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        # A classic member's generation is its epoch: it is told as classic groups tell.
        if member.classic is not None:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def _consumer_group_txn_error(group: ConsumerGroup, member_epoch: int, member_id: str) -> int:
    """TxnOffsetCommit to a consumer group: a member named must be one, in its epoch
    (ILLEGAL_GENERATION, as Kafka answers transactional producers)."""
    if not member_id:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch >= 0 and member_epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
