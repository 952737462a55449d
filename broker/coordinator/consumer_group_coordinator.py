"""ConsumerGroupCoordinator: the group coordinator's side of KIP-848's consumer group
protocol (Kafka's GroupMetadataManager ``consumerGroupHeartbeat`` and its timers).

A member heartbeats (ConsumerGroupHeartbeat) with its subscription and the partitions it
owns. Each heartbeat, in one step on the event loop:

1. updates the member; a changed subscription (or topics that appeared, went or grew)
   bumps the group epoch;
2. recomputes the target assignment with the group's server-side assignor when the
   group epoch is ahead of it;
3. moves the member one reconciliation step towards its target (revocations first,
   ``current_assignment_builder``);

then writes what changed to ``__consumer_offsets`` (acks=-1) and answers once stored.
The other members learn of a new target on their own next heartbeat: nobody stops.
A member's session (``group.consumer.session.timeout.ms``) and its time to revoke
(its rebalance timeout) are keyed timeouts on the timing wheel (``CoordinatorTimer``);
either fences it out of the group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.config.group_configs import _assignor_names
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator import consumer_group_records as records
from purgatory.broker.coordinator.assignor import assignors as build_assignors
from purgatory.broker.coordinator.assignor.partition_assignor import MemberSubscription
from purgatory.broker.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    member_topics,
    subscription_metadata,
)
from purgatory.broker.coordinator.consumer_group_checks import (
    HeartbeatRequest,
    HeartbeatResult,
    Refused,
    check_member_epoch,
    compiled_regex,
    fenced_instance,
    join_key,
    new_member_id,
    rebalance_key,
    session_key,
    sync_key,
    unknown_member,
    validate_heartbeat,
)
from purgatory.broker.coordinator.consumer_group_classic_members import ClassicMembers
from purgatory.broker.coordinator.coordinator_timer import CoordinatorTimer
from purgatory.broker.coordinator.current_assignment_builder import OwnedPartitions, reconcile
from purgatory.broker.coordinator.group_metadata import GroupMetadata
from purgatory.broker.coordinator.group_metadata_manager import GroupMetadataManager
from purgatory.broker.coordinator.group_records import Record
from purgatory.broker.purgatory import Scheduler
from purgatory.protocol.errors import ErrorCode

T = TypeVar("T")


class ConsumerGroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        scheduler: Scheduler,
        manager: GroupMetadataManager,
        coordinator_error: Callable[[str], int],
        retire_classic: Callable[[GroupMetadata], None],
        adopt_classic: Callable[[GroupMetadata, str], None],
    ) -> None:
        self.config = config
        # The classic side of the coordinator: a classic group that became a consumer
        # group (its waiters rejoin, its sessions end), and one made from a consumer group
        # (its sessions start, it rebalances).
        self.retire_classic = retire_classic
        self.adopt_classic = adopt_classic
        self.metadata = metadata
        self.scheduler = scheduler
        self.manager = manager
        self.coordinator_error = coordinator_error
        self.timer = CoordinatorTimer(scheduler)
        names = _assignor_names(config["group.consumer.assignors"])
        self.assignors = build_assignors(names)
        self.default_assignor = names[0]
        self._regex_epoch = -2  # the metadata epoch the regex matches are of
        self._regex_matches: dict[str, frozenset[str]] = {}
        self.rebalances = 0  # group epoch bumps (Kafka's consumer group rebalances)
        self.classic_members = ClassicMembers(self)
        self.log = structlog.get_logger("consumer_group").bind(broker_id=config.broker_id)

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def now(self) -> int:
        return self.scheduler.wall_ms()

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(
        self, request: HeartbeatRequest, version: int, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        try:
            validate_heartbeat(request, version, self.assignors)
            error = self.coordinator_error(request.group_id)
            if error:
                return HeartbeatResult(error)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except Refused as refused:
            return HeartbeatResult(refused.error, refused.message)

    def _heartbeat(
        self, request: HeartbeatRequest, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        out: list[Record] = []
        group_id = request.group_id
        joining = request.member_epoch == 0
        group = self._group(group_id, joining, out)
        member_id = request.member_id or new_member_id()
        if (
            member_id not in group.members
            and (request.instance_id is None or group.static_member(request.instance_id) is None)
            and len(group.members) >= self.config["group.consumer.max.size"]
        ):
            raise Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config['group.consumer.max.size']} members.",
            )
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member = self.static_member(group, member_id, request, joining, out)

        updated = replace(
            member,
            instance_id=request.instance_id
            if request.instance_id is not None
            else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(request.subscribed_topic_regex or None)
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=client_id,
            client_host=client_host,
        )
        updated = self.update_member(group, member, updated, request.owned, out)
        self.schedule_session(group_id, member_id)

        full = joining or (
            request.rebalance_timeout_ms != -1
            and (
                request.subscribed_topic_names is not None
                or request.subscribed_topic_regex is not None
            )
            and request.owned is not None
        )
        result = HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            updated.member_epoch,
            # the group's consumer.heartbeat.interval.ms (GroupConfig), else the broker's
            int(self.metadata.group_config(group_id)["consumer.heartbeat.interval.ms"]),
            updated.assigned if full or updated.assigned != member.assigned else None,
        )
        return self.stored(group_id, out, result)

    def update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: OwnedPartitions,
        out: list[Record],
    ) -> ConsumerGroupMember:
        """Steps 1-3 of a heartbeat (or of a classic member's join): the member updated, a
        new group epoch if what the group subscribes to changed, a new target assignment
        if the epoch is ahead of it, one reconciliation step of the member."""
        group_id, member_id = group.group_id, updated.member_id
        bump = False
        if updated.subscription() != member.subscription() or member_id not in group.members:
            out.append(records.member_metadata(group_id, updated))
            # Kafka's hasMemberSubscriptionChanged: a new member subscribing to nothing
            # is no new epoch.
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        group.update_member(updated)
        bump = self.refresh_subscriptions(group) or bump
        if bump:
            self.bump(group, out)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, out)
        updated = self._reconcile(group, group.members[member_id], owned, out)
        group.update_state(self.now())
        return updated

    def _group(self, group_id: str, create: bool, out: list[Record]) -> ConsumerGroup:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: an empty classic group becomes a
        consumer group when a member joins it."""
        group = self.manager.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return group
        if group is None or group.is_dead():
            if not create:
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        elif not create or not isinstance(group, GroupMetadata):
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        elif not group.is_empty():
            if not self.classic_members.upgrade_allowed(group):
                raise Refused(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
                )
            return self.classic_members.upgrade(group, out)
        consumer = ConsumerGroup(group_id, self.now())
        if isinstance(group, GroupMetadata):
            # The classic group's record goes; its offsets stay the group's.
            out.append(records.classic_group_tombstone(group_id))
            consumer.offsets = group.offsets
            consumer.pending_txn_offsets = group.pending_txn_offsets
            self.log.info("classic_group_converted", group=group_id)
        self.manager.groups[group_id] = consumer
        return consumer

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, request: HeartbeatRequest, joining: bool
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise unknown_member(member_id, group.group_id)
            self.log.info("consumer_group_member_joins", group=group.group_id, member=member_id)
            return ConsumerGroupMember(member_id)
        check_member_epoch(member, request.member_epoch, request.owned)
        return member

    def static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        request: HeartbeatRequest,
        joining: bool,
        out: list[Record],
        classic: bool = False,
    ) -> ConsumerGroupMember:
        instance = request.instance_id
        assert instance is not None
        existing = group.static_member(instance)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if (
                not classic
                and existing.classic is None
                and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
            ):
                raise Refused(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance} cannot join the "
                    f"group because the instance id is is owned by {existing.member_id} member.",
                )
            # The instance comes back under a new member id: it takes the old member's
            # place and assignment, from epoch 0.
            target = group.target_assignment.get(existing.member_id, {})
            self.remove(group, existing, out)
            replacement = replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            group.target_assignment[member_id] = target
            out.append(records.target_member(group.group_id, member_id, target))
            self.log.info(
                "static_member_replaced",
                group=group.group_id,
                instance=instance,
                old=existing.member_id,
                member=member_id,
            )
            group.update_member(replacement)
            out.append(records.current_assignment(group.group_id, replacement))
            return replacement
        if existing is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance} is unknown.")
        if existing.member_id != member_id:
            raise fenced_instance(member_id, instance, existing.member_id)
        if not classic:
            check_member_epoch(existing, request.member_epoch, request.owned)
        return existing

    def refresh_subscriptions(self, group: ConsumerGroup) -> bool:
        """Recompute what the group subscribes to from the members and the topics that
        exist now; a change is a new group epoch (True)."""
        regexes = {m.subscribed_topic_regex for m in group.members.values()} - {None}
        matches = self._matches(regexes) if regexes else {}
        names = group.subscribed_topic_names(matches)
        metadata = subscription_metadata(names, self.metadata.topics)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _matches(self, regexes: set[str | None]) -> dict[str, frozenset[str]]:
        """Each regex's matching topics (a full match, as Kafka's RE2J ``matches``),
        computed once per metadata image. Internal topics match too, as in Kafka's
        refreshRegularExpressions: a client that wants none leaves them out of its regex."""
        if self._regex_epoch != self.metadata.epoch:
            self._regex_epoch = self.metadata.epoch
            self._regex_matches = {}
        names = list(self.metadata.topics)
        for regex in regexes:
            if regex is not None and regex not in self._regex_matches:
                pattern = compiled_regex(regex)
                self._regex_matches[regex] = frozenset(n for n in names if pattern.fullmatch(n))
        return self._regex_matches

    def bump(self, group: ConsumerGroup, out: list[Record]) -> None:
        group.group_epoch += 1
        self.rebalances += 1
        out.append(records.group_metadata(group))
        self.log.info("consumer_group_epoch_bumped", group=group.group_id, epoch=group.group_epoch)

    def _assign(self, group: ConsumerGroup, out: list[Record]) -> None:
        """Kafka's TargetAssignmentBuilder: the target of every member for the group
        epoch; a record for each member whose target changed, then the epoch's."""
        assignor = self.assignors[self.assignor_of(group)]
        ids_by_name = group.subscription_metadata
        members = {
            m.member_id: MemberSubscription(
                frozenset(
                    ids_by_name[n][0]
                    for n in member_topics(m, self._regex_matches)
                    if n in ids_by_name
                ),
                group.target_assignment.get(m.member_id, {}),
                m.rack_id,
            )
            for m in group.members.values()
        }
        partitions = dict(ids_by_name.values())
        target = assignor.assign(members, partitions)
        for member_id in group.members:
            new = {t: frozenset(ps) for t, ps in target.get(member_id, {}).items() if ps}
            if new != group.target_assignment.get(member_id):
                group.target_assignment[member_id] = new
                out.append(records.target_member(group.group_id, member_id, new))
        group.assignment_epoch = group.group_epoch
        out.append(records.target_metadata(group))

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: OwnedPartitions,
        out: list[Record],
    ) -> ConsumerGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(
            member,
            group.assignment_epoch,
            group.target_assignment.get(member.member_id, {}),
            group.current_partition_epoch,
            owned,
        )
        if updated == member:
            return member
        group.update_member(updated)
        out.append(records.current_assignment(group.group_id, updated))
        key = rebalance_key(group.group_id, member.member_id)
        if updated.state is MemberState.UNREVOKED_PARTITIONS and updated.classic is None:
            epoch, timeout = updated.member_epoch, updated.rebalance_timeout_ms
            self.timer.schedule(
                key, timeout, lambda: self._rebalance_timed_out(group, member.member_id, epoch)
            )
        else:
            self.timer.cancel(key)
        return updated

    # -- leaving, and being fenced --------------------------------------------------------

    def _leave(
        self, request: HeartbeatRequest
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        group_id, member_id, instance = request.group_id, request.member_id, request.instance_id
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.is_dead():
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        out: list[Record] = []
        if instance is None:
            member = group.members.get(member_id)
            if member is None:
                raise unknown_member(member_id, group_id)
        else:
            found = group.static_member(instance)
            if found is None:
                raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance} is unknown.")
            if found.member_id != member_id:
                raise fenced_instance(member_id, instance, found.member_id)
            member = found
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # It will be back: it keeps its place and partitions for its session.
                away = replace(
                    member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH), pending_revocation={}
                )
                group.update_member(away)
                group.update_state(self.now())
                self.timer.cancel(rebalance_key(group_id, member_id))
                out.append(records.current_assignment(group_id, away))
                self.log.info("static_member_away", group=group_id, member=member_id)
                result = HeartbeatResult(
                    ErrorCode.NONE, None, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH
                )
                return self.stored(group_id, out, result)
        self.log.info("consumer_group_member_left", group=group_id, member=member_id)
        self._fence(group, member, out)
        result = HeartbeatResult(ErrorCode.NONE, None, member_id, request.member_epoch)
        return self.stored(group_id, out, result)

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember, out: list[Record]) -> None:
        """Kafka's ``consumerGroupFenceMember``: the member goes, the group epoch grows,
        and the others are given its partitions as they heartbeat; or, when every other
        member speaks the classic protocol, the group becomes a classic group."""
        if self.classic_members.downgrade_allowed(group, member.member_id):
            self.classic_members.downgrade(group, member.member_id, out)
            return
        self.remove(group, member, out)
        self.refresh_subscriptions(group)
        self.bump(group, out)
        group.update_state(self.now())

    def remove(self, group: ConsumerGroup, member: ConsumerGroupMember, out: list[Record]) -> None:
        group.remove_member(member.member_id)
        self.cancel_timers(group.group_id, member.member_id)
        out.extend(records.member_tombstones(group.group_id, member.member_id))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (session_key, rebalance_key, join_key, sync_key):
            self.timer.cancel(key(group_id, member_id))

    def schedule_session(
        self, group_id: str, member_id: str, classic: ClassicMemberMetadata | None = None
    ) -> None:
        """A member's session starts over: the group's session timeout (its
        consumer.session.timeout.ms, else the broker's), or the one a classic member joined
        with."""
        timeout = (
            classic.session_timeout_ms
            if classic is not None
            else int(self.metadata.group_config(group_id)["consumer.session.timeout.ms"])
        )
        self.timer.schedule(
            session_key(group_id, member_id),
            timeout,
            lambda: self._session_expired(group_id, member_id),
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        self.fence_by_timer(group_id, member_id, "the member session expired")

    def _rebalance_timed_out(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = group.members.get(member_id)
        if member is not None and member.member_epoch == epoch:
            self.fence_by_timer(
                group.group_id, member_id, f"it failed to transition from epoch {epoch} in time"
            )

    def fence_by_timer(self, group_id: str, member_id: str, reason: str) -> None:
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.is_dead():
            return
        member = group.members.get(member_id)
        if member is None:
            return
        self.log.info("consumer_group_member_fenced", group=group_id, member=member_id, why=reason)
        out: list[Record] = []
        self._fence(group, member, out)
        self.manager.append_in_background(group_id, out)

    def member_loaded(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member read back from ``__consumer_offsets``: its session starts now, and
        its time to revoke if it was revoking."""
        self.schedule_session(group.group_id, member.member_id, member.classic)
        if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
            epoch = member.member_epoch
            self.timer.schedule(
                rebalance_key(group.group_id, member.member_id),
                member.rebalance_timeout_ms,
                lambda: self._rebalance_timed_out(group, member.member_id, epoch),
            )

    def group_unloaded(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self.cancel_timers(group.group_id, member_id)

    # -- storing --------------------------------------------------------------------------

    def stored(
        self,
        group_id: str,
        out: list[Record],
        result: T,
        failed: Callable[[int], T] = HeartbeatResult,  # type: ignore[assignment]
    ) -> T | asyncio.Future[T]:
        return self.manager.answer_when_stored(group_id, out, result, failed)

    # -- ConsumerGroupDescribe ------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error, message, group) of ConsumerGroupDescribe."""
        error = self.coordinator_error(group_id)
        if error:
            return error, None, None
        group = self.manager.groups.get(group_id)
        if group is None or group.is_dead():
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ConsumerGroup):
            return (
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {group_id} is not a consumer group.",
                None,
            )
        return ErrorCode.NONE, None, group

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The server-side assignor the group's target assignment is made by."""
        return group.preferred_assignor(self.default_assignor)


__all__ = [
    "ConsumerGroupCoordinator",
    "HeartbeatRequest",
    "HeartbeatResult",
]
