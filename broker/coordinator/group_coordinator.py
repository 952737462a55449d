"""GroupCoordinator: Kafka's classic consumer group protocol, and the groups' offsets.

Members join (JoinGroup), the broker picks a protocol they all support and hands the
leader everyone's subscription, the leader's assignment goes to each member (SyncGroup),
and members stay by heartbeating within their session timeout. A join, a leave or an
expired session starts a rebalance: a new generation, whose id fences members of the old
one. The ``Rebalancer`` takes a group from one generation to the next; ``MemberSessions``
keeps each member's session in the "Heartbeat" purgatory. Committed offsets and each generation live
in ``__consumer_offsets`` (``GroupMetadataManager``). Both protocols' API layers call the
methods here with plain values; an answer that must wait is a future.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from purgatory.broker.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from purgatory.broker.coordinator.consumer_group_records import group_tombstones
from purgatory.broker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
    TopicPartition,
)
from purgatory.broker.coordinator.group_metadata_manager import Group, GroupMetadataManager
from purgatory.broker.coordinator.group_metrics import group_families
from purgatory.broker.coordinator.member_sessions import MemberSessions
from purgatory.broker.coordinator.offset_metadata_manager import OffsetMetadataManager
from purgatory.broker.coordinator.rebalancer import Rebalancer
from purgatory.broker.coordinator.share_group import ShareGroup, ShareGroupState
from purgatory.broker.coordinator.share_group_coordinator import ShareGroupCoordinator
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.broker.purgatory import Scheduler
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.common.broker_state import GroupInfo
from purgatory.protocol.errors import ErrorCode

MAX_GROUP_ID_LENGTH = 249
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's: a new member's first join may wait this long
UNKNOWN_MEMBER_ID = ""


class GroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        scheduler: Scheduler,
        metrics: BrokerMetrics,
        create_offsets_topic: Callable[[], None],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.scheduler = scheduler
        self.create_offsets_topic = create_offsets_topic
        self.manager = GroupMetadataManager(
            config, replica_manager, metadata, scheduler, self._loaded, self._unloaded
        )
        replica_manager.leadership_listeners.append(self._leadership)
        self.sessions = MemberSessions(scheduler, self.on_expire_heartbeat)
        self.rebalancer = Rebalancer(config, scheduler, self.manager, self.sessions)
        self.offsets = OffsetMetadataManager(
            config,
            metadata,
            scheduler,
            self.manager,
            self._coordinator_error,
            self.sessions.heard_from,
        )
        self.consumer_groups = ConsumerGroupCoordinator(
            config,
            metadata,
            scheduler,
            self.manager,
            self._coordinator_error,
            self._retire,
            self._adopt,
        )
        self.share_groups = ShareGroupCoordinator(
            config, metadata, scheduler, self.manager, self._coordinator_error
        )
        metrics.register(group_families(self))
        self.log = structlog.get_logger("group_coordinator").bind(broker_id=config.broker_id)

    def start(self) -> None:
        self.offsets.cleanup.start()

    def shutdown(self) -> None:
        self.offsets.cleanup.cancel()
        for group in self.manager.owned_groups():
            self._unloaded(group)
        self.rebalancer.cancel_all()
        self.sessions.cancel_all()
        self.consumer_groups.shutdown()
        self.share_groups.shutdown()

    @property
    def groups(self) -> dict[str, Group]:
        return self.manager.groups

    def _now(self) -> int:
        return self.scheduler.wall_ms()

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    # -- where groups live -----------------------------------------------------------------

    def find_coordinator(self, group_id: str) -> tuple[int, int]:
        """(error, broker id) of the group's coordinator: the leader of its partition of
        ``__consumer_offsets``, which is created on the first ask."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, -1
        return self.metadata.coordinator_of(
            OFFSETS_TOPIC, self.manager.partition_for(group_id), self.create_offsets_topic
        )

    def _coordinator_error(self, group_id: str) -> int:
        if not group_id or len(group_id) > MAX_GROUP_ID_LENGTH:
            return ErrorCode.INVALID_GROUP_ID
        return self.manager.ownership_error(group_id)

    def _leadership(self, key: TopicPartition, leader_epoch: int, leads: bool) -> None:
        if key[0] == OFFSETS_TOPIC:
            self.manager.leadership_changed(key[1], leader_epoch, leads)

    def complete_txn_offsets(self, index: int, producer_id: int, committed: bool) -> None:
        """A transaction's marker is in ``__consumer_offsets`` partition ``index``."""
        self.manager.complete_txn_offsets(index, producer_id, committed)

    def on_topics_deleted(self, topics: set[str]) -> None:
        """The metadata deleted topics (Kafka's onPartitionsDeleted): the groups here lose
        their offsets of them."""
        self.offsets.on_topics_deleted(topics)

    def _loaded(self, group: Group) -> None:
        """A group read back from its partition: its members must heartbeat again within
        their session timeouts."""
        if isinstance(group, ConsumerGroup):
            for consumer in group.members.values():
                self.consumer_groups.member_loaded(group, consumer)
            return
        if isinstance(group, ShareGroup):
            for member_id in group.members:
                self.share_groups.member_loaded(group, member_id)
            return
        for member in group.members.values():
            self.sessions.heard_from(group, member)

    def _unloaded(self, group: Group) -> None:
        """This broker no longer coordinates the group: whoever waits is told to look for
        the new coordinator."""
        if isinstance(group, ConsumerGroup):
            group.state = ConsumerGroupState.DEAD
            self.consumer_groups.group_unloaded(group)
            return
        if isinstance(group, ShareGroup):
            group.state = ShareGroupState.DEAD
            self.share_groups.group_unloaded(group)
            return
        state = group.state
        group.state = GroupState.DEAD
        for member in group.members.values():
            if state is GroupState.PREPARING_REBALANCE:
                group.complete_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            group.complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self.sessions.check(group, member.member_id)
        for member_id in group.pending_members:
            self.sessions.check(group, member_id)
        self.rebalancer.check(group)

    def _retire(self, group: GroupMetadata) -> None:
        """The classic group became a consumer group (KIP-848's upgrade): whoever waits
        in a join or sync rejoins, and its sessions and rebalance end here."""
        group.state = GroupState.DEAD
        for member in group.members.values():
            group.complete_join(
                member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
            )
            group.complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self.sessions.check(group, member.member_id)
        for member_id in group.pending_members:
            self.sessions.check(group, member_id)
        self.rebalancer.check(group)

    def _adopt(self, group: GroupMetadata, reason: str) -> None:
        """A consumer group became this classic group (KIP-848's downgrade): its members'
        sessions start, it is stored, and it rebalances."""
        for member in group.members.values():
            self.sessions.heard_from(group, member)
        self.manager.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        self.rebalancer.maybe_prepare(group, reason)

    def _classic_from_empty(self, consumer: ConsumerGroup) -> GroupMetadata:
        """An empty consumer group becomes a classic group when a classic member joins
        (Kafka's ``maybeDeleteEmptyConsumerGroup``): its records go, its offsets stay."""
        group = GroupMetadata(consumer.group_id, GroupState.EMPTY, self._now())
        group.offsets = consumer.offsets
        group.pending_txn_offsets = consumer.pending_txn_offsets
        consumer.state = ConsumerGroupState.DEAD
        self.consumer_groups.group_unloaded(consumer)
        self.manager.append(consumer.group_id, group_tombstones(consumer))
        self.groups[consumer.group_id] = group
        self.log.info("consumer_group_converted", group=consumer.group_id)
        return group

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        error = self._coordinator_error(group_id)
        if error:
            return JoinResult(error, member_id)
        config = self.config
        if not (
            config["group.min.session.timeout.ms"]
            <= session_timeout_ms
            <= config["group.max.session.timeout.ms"]
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0: the session timeout serves for both
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            if not group.is_empty():
                # A classic member in a consumer group (KIP-848's mixed groups).
                return self.consumer_groups.classic_members.join(
                    group,
                    member_id,
                    group_instance_id,
                    require_known_member_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                )
            group = self._classic_from_empty(group)
        elif isinstance(group, ShareGroup) and not group.is_dead():
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        elif not isinstance(group, GroupMetadata):
            group = None
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._now())
        if group.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = MemberMetadata(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        if member_id == UNKNOWN_MEMBER_ID:
            result = self._join_new_member(group, member, require_known_member_id)
        else:
            result = self._join_known_member(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self.rebalancer.check(group)
        if group.is_empty() and group.generation_id == 0 and not group.offsets:
            self.groups.pop(group_id, None)  # nobody joined after all
        return result

    def _join_new_member(
        self, group: GroupMetadata, joining: MemberMetadata, require_known_member_id: bool
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if len(group.members) + len(group.pending_members) >= self.config["group.max.size"]:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        instance = joining.group_instance_id
        joining.member_id = f"{instance or joining.client_id}-{uuid.uuid4()}"
        if instance is not None:
            old_member_id = group.static_members.get(instance)
            if old_member_id is not None and old_member_id in group.members:
                return self._replace_static_member(group, old_member_id, joining)
            return self._add_member_and_rebalance(group, joining)
        if require_known_member_id:  # JoinGroup v4+: join again with this id
            group.pending_members.add(joining.member_id)
            self.sessions.watch_pending(group, joining.member_id, joining.session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, joining.member_id)
        return self._add_member_and_rebalance(group, joining)

    def _join_known_member(
        self, group: GroupMetadata, joining: MemberMetadata
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = joining.member_id
        if member_id in group.pending_members:
            return self._add_member_and_rebalance(group, joining)
        error = group.member_error(member_id, joining.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, joining)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(joining.protocols):  # a retried join: the same answer again
                return group.join_result(member)
            return self._update_member_and_rebalance(group, member, joining)
        if state is GroupState.STABLE:
            if member_id == group.leader_id or not member.matches(joining.protocols):
                return self._update_member_and_rebalance(group, member, joining)
            return group.join_result(member)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = self._future()
        member.is_new = True
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        self.sessions.heard_from(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalancer.maybe_prepare(group, f"member {member.member_id} joined")
        return future

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, joining: MemberMetadata
    ) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = self._future()
        member.protocols = joining.protocols
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        member.session_timeout_ms = joining.session_timeout_ms
        member.client_id, member.client_host = joining.client_id, joining.client_host
        # A join sent again while the first still waits: the first gives way.
        group.complete_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.set_awaiting_join(member, future)
        self.rebalancer.maybe_prepare(group, f"member {member.member_id} rejoined")
        return future

    def _replace_static_member(
        self, group: GroupMetadata, old_member_id: str, joining: MemberMetadata
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member back under a new member id (a restart): it takes its old place.
        In a Stable group with unchanged protocols there is no rebalance: it gets the
        current generation and, from SyncGroup, its old assignment."""
        old = group.members[old_member_id]
        fenced = JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id)
        group.complete_join(old, fenced)
        group.complete_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        assert joining.group_instance_id is not None
        member = group.replace_static_member(
            joining.group_instance_id, old_member_id, joining.member_id
        )
        self.sessions.check(group, old_member_id)
        unchanged = member.matches(joining.protocols)
        member.client_id, member.client_host = joining.client_id, joining.client_host
        member.session_timeout_ms = joining.session_timeout_ms
        member.rebalance_timeout_ms = joining.rebalance_timeout_ms
        if group.state is GroupState.STABLE and unchanged:
            self.sessions.heard_from(group, member)
            return self._store_replaced_static_member(group, member, old_member_id)
        future: asyncio.Future[JoinResult] = self._future()
        member.protocols = joining.protocols
        group.set_awaiting_join(member, future)
        self.sessions.heard_from(group, member)
        self.rebalancer.maybe_prepare(group, f"static member {member.group_instance_id} rejoined")
        return future

    def _store_replaced_static_member(
        self, group: GroupMetadata, member: MemberMetadata, old_member_id: str
    ) -> asyncio.Future[JoinResult]:
        """Kafka's ``updateStaticMemberAndRebalance`` in a Stable group: the new member id
        is stored with the generation before the join is answered, so that a coordinator
        loading the group after a failover knows it (else it fences the restarted member,
        FENCED_INSTANCE_ID, on its first TxnOffsetCommit or heartbeat). If the store
        fails, the old member id is put back and the join answered with the error."""
        future: asyncio.Future[JoinResult] = self._future()
        instance = member.group_instance_id
        assert instance is not None
        new_member_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}

        def stored(done: asyncio.Future[int]) -> None:
            error = done.result()
            if future.done():
                return
            if error:
                if group.static_members.get(instance) == new_member_id:
                    group.replace_static_member(instance, new_member_id, old_member_id)
                future.set_result(JoinResult(error, UNKNOWN_MEMBER_ID))
                return
            self.sessions.heard_from(group, member)
            result = group.join_result(member)
            # The leader is told the members but must not assign again (KIP-345).
            future.set_result(result._replace(skip_assignment=new_member_id == group.leader_id))

        self.manager.store_group(group, assignment).add_done_callback(stored)
        return future

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        error = self._coordinator_error(group_id)
        if error:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return self.consumer_groups.classic_members.sync(
                group, member_id, group_instance_id, generation_id, protocol_type, protocol_name
            )
        if not isinstance(group, GroupMetadata):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.member_error(member_id, group_instance_id)
        if error:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            self.sessions.heard_from(group, member)
            return SyncResult(
                ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
            )
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        future: asyncio.Future[SyncResult] = self._future()
        group.complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a repeat
        member.awaiting_sync = future
        self.sessions.heard_from(group, member)
        if member_id == group.leader_id:
            self.rebalancer.store_assignment(group, assignments)
        return future

    # -- Heartbeat and sessions --------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self._coordinator_error(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # as Kafka: the member cannot be judged until it is loaded
        if error:
            return error
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return self.consumer_groups.classic_members.heartbeat(
                group, member_id, group_instance_id, generation_id
            )
        if not isinstance(group, GroupMetadata):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.member_error(member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.sessions.heard_from(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        if group.state is GroupState.DEAD:
            return
        if pending:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.state is GroupState.PREPARING_REBALANCE:
                    self.rebalancer.check(group)
                elif group.is_empty() and not group.offsets and group.generation_id == 0:
                    self.groups.pop(group.group_id, None)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        self.log.info(
            "member_removed", group=group.group_id, member=member_id, reason="session timeout"
        )
        self._remove_member_and_update_group(group, member, "session timeout")

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        group.complete_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.rebalancer.maybe_prepare(group, f"member {member.member_id} left: {reason}")
        elif group.state is GroupState.PREPARING_REBALANCE:
            self.rebalancer.check(group)

    # -- LeaveGroup ------------------------------------------------------------------------

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(group error, one error per leaving (member id, instance id))."""
        error = self._coordinator_error(group_id)
        if error:
            return error, [error] * len(members)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return ErrorCode.NONE, self.consumer_groups.classic_members.leave(group, members)
        if not isinstance(group, GroupMetadata):
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(
                members
            )
        return ErrorCode.NONE, [self._leave(group, m, i) for m, i in members]

    def _leave(self, group: GroupMetadata, member_id: str, instance: str | None) -> int:
        if instance is not None:
            registered = group.static_members.get(instance)
            if registered is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id not in (UNKNOWN_MEMBER_ID, registered):
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = registered
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.sessions.check(group, member_id)
            if group.state is GroupState.PREPARING_REBALANCE:
                self.rebalancer.check(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.log.info("member_left", group=group.group_id, member=member_id)
        self.sessions.stop(group, member)
        self._remove_member_and_update_group(group, member, "left the group")
        return ErrorCode.NONE

    # -- describing, listing, deleting -----------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        """(error, the classic group); a group this coordinator does not have as a classic
        group is (NONE, None): Dead, as Kafka's DescribeGroups describes it."""
        error = self._coordinator_error(group_id)
        if error:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, group if isinstance(group, GroupMetadata) else None

    def describe_any_group(self, group_id: str) -> tuple[int, Group | None]:
        """(error, the group, classic or consumer); (NONE, None) when it is not here."""
        error = self._coordinator_error(group_id)
        if error:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, None if group is None or group.is_dead() else group

    def list_groups(self) -> tuple[int, list[Group]]:
        """Every group coordinated here (COORDINATOR_LOAD_IN_PROGRESS while a partition
        of them is still loading, with the groups known so far)."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        groups = [g for g in self.manager.owned_groups() if not g.is_dead()]
        return error, groups

    def delete_groups(
        self, group_ids: list[str]
    ) -> dict[str, int] | asyncio.Future[dict[str, int]]:
        """Delete empty groups with their offsets (NON_EMPTY_GROUP while members are in
        one, GROUP_ID_NOT_FOUND for one unknown); answered once the deletions are stored."""
        results: dict[str, int] = {}
        waiting: list[tuple[str, asyncio.Future[int]]] = []
        for group_id in group_ids:
            error = self._coordinator_error(group_id)
            group = self.groups.get(group_id) if not error else None
            if error:
                results[group_id] = error
            elif group is None or group.is_dead():
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in_empty_state():
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                waiting.append((group_id, self.manager.delete_group(group, self._now())))
        if not waiting:
            return results

        async def stored() -> dict[str, int]:
            for group_id, deletion in waiting:
                results[group_id] = await deletion
            return results

        return asyncio.ensure_future(stored())

    # -- observation -----------------------------------------------------------------------

    def describe(self) -> list[GroupInfo]:
        """The groups coordinated here, for ``/v1/state``."""
        return [g.describe() for g in sorted(self.manager.owned_groups(), key=lambda g: g.group_id)]
