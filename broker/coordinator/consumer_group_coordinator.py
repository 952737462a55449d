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
import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

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
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    member_topics,
)
from purgatory.broker.coordinator.consumer_group_migration import (
    MigrationRefused,
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from purgatory.broker.coordinator.coordinator_timer import CoordinatorTimer
from purgatory.broker.coordinator.current_assignment_builder import OwnedPartitions, reconcile
from purgatory.broker.coordinator.group_metadata import GroupMetadata, JoinResult, SyncResult
from purgatory.broker.coordinator.group_metadata_manager import GroupMetadataManager
from purgatory.broker.coordinator.group_records import Record
from purgatory.broker.purgatory import Scheduler
from purgatory.protocol.errors import ErrorCode

MAX_REGEX_LENGTH = 1000
T = TypeVar("T")


class HeartbeatRequest(NamedTuple):
    """A ConsumerGroupHeartbeat's fields (None: not sent, i.e. unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[str, list[int]]] | None = None  # (topic id, partitions)


class HeartbeatResult(NamedTuple):
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class _Refused(Exception):
    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


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
        self.log = structlog.get_logger("consumer_group").bind(broker_id=config.broker_id)

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def _now(self) -> int:
        return self.scheduler.wall_ms()

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------

    def heartbeat(
        self, request: HeartbeatRequest, version: int, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        try:
            self._validate(request, version)
            error = self.coordinator_error(request.group_id)
            if error:
                return HeartbeatResult(error)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except _Refused as refused:
            return HeartbeatResult(refused.error, refused.message)

    def _validate(self, request: HeartbeatRequest, version: int) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        epoch = request.member_epoch
        if version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            _not_empty(request.member_id, "MemberId can't be empty.")
        _not_empty(request.group_id, "GroupId can't be empty.")
        _not_empty(request.instance_id, "InstanceId can't be empty.")
        _not_empty(request.rack_id, "RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise _invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                    "when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        assignor = request.server_assignor
        if assignor is not None and assignor not in self.assignors:
            raise _Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors)}.",
            )
        regex = request.subscribed_topic_regex
        if regex:
            _compiled(regex)

    def _heartbeat(
        self, request: HeartbeatRequest, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        out: list[Record] = []
        group_id = request.group_id
        joining = request.member_epoch == 0
        group = self._group(group_id, joining, out)
        member_id = request.member_id or _new_member_id()
        if (
            member_id not in group.members
            and (request.instance_id is None or group.static_member(request.instance_id) is None)
            and len(group.members) >= self.config["group.consumer.max.size"]
        ):
            raise _Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config['group.consumer.max.size']} members.",
            )
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request, joining)
        else:
            member = self._static_member(group, member_id, request, joining, out)

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
        updated = self._update_member(group, member, updated, request.owned, out)
        self._schedule_session(group_id, member_id)

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
        return self._stored(group_id, out, result)

    def _update_member(
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
        bump = self._refresh_subscriptions(group, out) or bump
        if bump:
            self._bump(group, out)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, out)
        updated = self._reconcile(group, group.members[member_id], owned, out)
        group.update_state(self._now())
        return updated

    def _group(self, group_id: str, create: bool, out: list[Record]) -> ConsumerGroup:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: an empty classic group becomes a
        consumer group when a member joins it."""
        group = self.manager.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            return group
        if group is None or group.is_dead():
            if not create:
                raise _Refused(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                )
        elif not create or not isinstance(group, GroupMetadata):
            raise _Refused(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        elif not group.is_empty():
            if not self._upgrade_allowed(group):
                raise _Refused(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
                )
            return self._upgrade(group, out)
        consumer = ConsumerGroup(group_id, self._now())
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
                raise _unknown_member(member_id, group.group_id)
            self.log.info("consumer_group_member_joins", group=group.group_id, member=member_id)
            return ConsumerGroupMember(member_id)
        _check_epoch(member, request.member_epoch, request.owned)
        return member

    def _static_member(
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
                raise _Refused(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance} cannot join the "
                    f"group because the instance id is is owned by {existing.member_id} member.",
                )
            # The instance comes back under a new member id: it takes the old member's
            # place and assignment, from epoch 0.
            target = group.target_assignment.get(existing.member_id, {})
            self._remove(group, existing, out)
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
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance} is unknown.")
        if existing.member_id != member_id:
            raise _fenced_instance(member_id, instance, existing.member_id)
        if not classic:
            _check_epoch(existing, request.member_epoch, request.owned)
        return existing

    def _refresh_subscriptions(self, group: ConsumerGroup, out: list[Record]) -> bool:
        """Recompute what the group subscribes to from the members and the topics that
        exist now; a change is a new group epoch (True)."""
        regexes = {m.subscribed_topic_regex for m in group.members.values()} - {None}
        matches = self._matches(regexes) if regexes else {}
        topics = self.metadata.topics
        metadata: dict[str, tuple[str, int]] = {}
        for name in group.subscribed_topic_names(matches):
            topic = topics.get(name)
            if topic is not None and topic.partitions:
                metadata[name] = (topic.topic_id, len(topic.partitions))
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
                pattern = _compiled(regex)
                self._regex_matches[regex] = frozenset(n for n in names if pattern.fullmatch(n))
        return self._regex_matches

    def _bump(self, group: ConsumerGroup, out: list[Record]) -> None:
        group.group_epoch += 1
        self.rebalances += 1
        out.append(records.group_metadata(group))
        self.log.info("consumer_group_epoch_bumped", group=group.group_id, epoch=group.group_epoch)

    def _assign(self, group: ConsumerGroup, out: list[Record]) -> None:
        """Kafka's TargetAssignmentBuilder: the target of every member for the group
        epoch; a record for each member whose target changed, then the epoch's."""
        assignor = self.assignors[self._preferred_assignor(group)]
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

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        return group.preferred_assignor(self.default_assignor)

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
        key = _rebalance_key(group.group_id, member.member_id)
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
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        out: list[Record] = []
        if instance is None:
            member = group.members.get(member_id)
            if member is None:
                raise _unknown_member(member_id, group_id)
        else:
            found = group.static_member(instance)
            if found is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance} is unknown.")
            if found.member_id != member_id:
                raise _fenced_instance(member_id, instance, found.member_id)
            member = found
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # It will be back: it keeps its place and partitions for its session.
                away = replace(
                    member.with_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH), pending_revocation={}
                )
                group.update_member(away)
                group.update_state(self._now())
                self.timer.cancel(_rebalance_key(group_id, member_id))
                out.append(records.current_assignment(group_id, away))
                self.log.info("static_member_away", group=group_id, member=member_id)
                result = HeartbeatResult(
                    ErrorCode.NONE, None, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH
                )
                return self._stored(group_id, out, result)
        self.log.info("consumer_group_member_left", group=group_id, member=member_id)
        self._fence(group, member, out)
        result = HeartbeatResult(ErrorCode.NONE, None, member_id, request.member_epoch)
        return self._stored(group_id, out, result)

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember, out: list[Record]) -> None:
        """Kafka's ``consumerGroupFenceMember``: the member goes, the group epoch grows,
        and the others are given its partitions as they heartbeat; or, when every other
        member speaks the classic protocol, the group becomes a classic group."""
        if self._downgrade_allowed(group, member.member_id):
            self._downgrade(group, member.member_id, out)
            return
        self._remove(group, member, out)
        self._refresh_subscriptions(group, out)
        self._bump(group, out)
        group.update_state(self._now())

    def _remove(self, group: ConsumerGroup, member: ConsumerGroupMember, out: list[Record]) -> None:
        group.remove_member(member.member_id)
        self._cancel_timers(group.group_id, member.member_id)
        out.extend(records.member_tombstones(group.group_id, member.member_id))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (_session_key, _rebalance_key, _join_key, _sync_key):
            self.timer.cancel(key(group_id, member_id))

    def _schedule_session(
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
            _session_key(group_id, member_id),
            timeout,
            lambda: self._session_expired(group_id, member_id),
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        self._fence_by_timer(group_id, member_id, "the member session expired")

    def _rebalance_timed_out(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = group.members.get(member_id)
        if member is not None and member.member_epoch == epoch:
            self._fence_by_timer(
                group.group_id, member_id, f"it failed to transition from epoch {epoch} in time"
            )

    def _fence_by_timer(self, group_id: str, member_id: str, reason: str) -> None:
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.is_dead():
            return
        member = group.members.get(member_id)
        if member is None:
            return
        self.log.info("consumer_group_member_fenced", group=group_id, member=member_id, why=reason)
        out: list[Record] = []
        self._fence(group, member, out)
        stored = self.manager.append(group_id, out)
        stored.add_done_callback(functools.partial(_log_failure, self.log, group_id))

    def member_loaded(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A member read back from ``__consumer_offsets``: its session starts now, and
        its time to revoke if it was revoking."""
        self._schedule_session(group.group_id, member.member_id, member.classic)
        if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
            epoch = member.member_epoch
            self.timer.schedule(
                _rebalance_key(group.group_id, member.member_id),
                member.rebalance_timeout_ms,
                lambda: self._rebalance_timed_out(group, member.member_id, epoch),
            )

    def group_unloaded(self, group: ConsumerGroup) -> None:
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)

    # -- classic members in a consumer group (KIP-848's online migration) -------------------

    def classic_join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """Kafka's ``classicGroupJoinToConsumerGroup``: a classic member joins (or
        rejoins) a consumer group. Its subscription and owned partitions come from its
        consumer protocol metadata; it gets its assignment in SyncGroup, as a follower (no
        member leads: the coordinator assigns)."""
        group_id = group.group_id
        unknown = not member_id
        new_id = member_id or _new_member_id()
        try:
            if (
                new_id not in group.members
                and len(group.members) >= self.config["group.consumer.max.size"]
            ):
                raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
            if not group.supports_classic_protocols(protocol_type, protocols):
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
            if unknown and instance_id is None and require_known_member_id:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            # Imported when first needed: kio's schemas take a broker's start ~0.15 s.
            from purgatory.protocol.consumer_protocol import (
                ConsumerProtocolError,
                decode_subscription,
            )

            try:
                subscription = decode_subscription(protocols[0][1])
            except ConsumerProtocolError:
                raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "") from None
            out: list[Record] = []
            if instance_id is None:
                member = group.members.get(new_id) or ConsumerGroupMember(new_id)
            else:
                request = HeartbeatRequest(group_id, new_id, -1, instance_id)
                member = self._static_member(group, new_id, request, unknown, out, classic=True)
        except _Refused as refused:
            return JoinResult(refused.error, member_id)
        topics = self.metadata.topics
        owned = [
            (topics[name].topic_id, ps)
            for name, ps in subscription.owned_partitions.items()
            if name in topics
        ]
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics),
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        updated = self._update_member(group, member, updated, owned, out)
        assert updated.classic is not None
        self.timer.cancel(_join_key(group_id, new_id))
        self._schedule_session(group_id, new_id, updated.classic)
        self.timer.schedule(
            _sync_key(group_id, new_id),
            rebalance_timeout_ms,
            lambda: self._fence_by_timer(group_id, new_id, "it did not sync in time"),
        )
        result = JoinResult(
            ErrorCode.NONE,
            new_id,
            updated.member_epoch,
            group.protocol_type,
            protocols[0][0],
            "",
            [],
        )
        return self._stored(group_id, out, result, lambda code: JoinResult(code, new_id))

    def classic_sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's assignment, as the
        consumer protocol writes one."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if member is None or member.classic is None:
            return SyncResult(error)
        name = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._schedule_join_timeout(group, member)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.timer.cancel(_sync_key(group.group_id, member.member_id))
        self._schedule_session(group.group_id, member.member_id, member.classic)
        from purgatory.protocol.consumer_protocol import Assignment, encode_assignment

        names = self.metadata.topic_names
        partitions = {names[t]: sorted(ps) for t, ps in member.assigned.items() if t in names}
        assignment = encode_assignment(Assignment(partitions))
        return SyncResult(ErrorCode.NONE, assignment, group.protocol_type, name)

    def classic_heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when the
        member must rejoin (a newer group epoch, partitions to revoke, or partitions it
        waited for that are free now)."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if member is None or member.classic is None:
            return error
        self._schedule_session(group.group_id, member.member_id, member.classic)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member)
            )
        ):
            self._schedule_join_timeout(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> list[int]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: one error per leaving member,
        answered at once (the records follow; a member whose leave is lost with its
        coordinator is fenced by its session instead)."""
        out: list[Record] = []
        errors: list[int] = []
        for member_id, instance in members:
            if instance is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance)
                if member is not None and member_id and member.member_id != member_id:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
            if member is None or member.classic is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self.log.info("consumer_group_member_left", group=group.group_id, member=member_id)
            if self._downgrade_allowed(group, member.member_id):
                self._downgrade(group, member.member_id, out)
                errors.append(ErrorCode.NONE)
                continue
            self._remove(group, member, out)
            errors.append(ErrorCode.NONE)
        if out and isinstance(self.manager.groups.get(group.group_id), ConsumerGroup):
            self._refresh_subscriptions(group, out)
            self._bump(group, out)
            group.update_state(self._now())
        if out:
            stored = self.manager.append(group.group_id, out)
            stored.add_done_callback(functools.partial(_log_failure, self.log, group.group_id))
        return errors

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> tuple[ConsumerGroupMember | None, int]:
        """Kafka's ``validateConsumerGroupMember`` for a classic request: the member, or
        None with why (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION)."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return None, ErrorCode.ILLEGAL_GENERATION
        return member, ErrorCode.NONE

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout."""
        key = _join_key(group.group_id, member.member_id)
        if not self.timer.is_scheduled(key):
            group_id, member_id = group.group_id, member.member_id
            self.timer.schedule(
                key,
                member.rebalance_timeout_ms,
                lambda: self._fence_by_timer(group_id, member_id, "it did not rejoin in time"),
            )

    def _upgrade_allowed(self, classic: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        if self.config["group.consumer.migration.policy"] not in ("upgrade", "bidirectional"):
            why = "the online upgrade is disabled"
        elif classic.protocol_type != ConsumerGroup.protocol_type:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.config["group.consumer.max.size"]:
            why = "the group size exceeds the consumer group maximum size"
        else:
            return True
        self.log.info("classic_group_not_upgraded", group=classic.group_id, why=why)
        return False

    def _upgrade(self, classic: GroupMetadata, out: list[Record]) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup``: the classic group with members becomes a
        consumer group; its members rejoin the ongoing rebalance, if any, and go on with
        the classic protocol."""
        try:
            group = consumer_group_from_classic(classic, self.metadata.topics, self._now())
        except MigrationRefused as exc:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, str(exc)) from None
        self.retire_classic(classic)
        self._refresh_subscriptions(group, [])
        out.append(records.classic_group_tombstone(classic.group_id))
        out.extend(records.all_records(group))
        self.manager.groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_session(group.group_id, member.member_id, member.classic)
        group.update_state(self._now())
        self.log.info("classic_group_upgraded", group=group.group_id, members=len(group.members))
        return group

    def _downgrade_allowed(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``."""
        return (
            group.all_classic_except(leaving_member_id)
            and len(group.members) > 1
            and self.config["group.consumer.migration.policy"] in ("downgrade", "bidirectional")
            and len(group.members) - 1 <= self.config["group.max.size"]
        )

    def _downgrade(self, group: ConsumerGroup, leaving_member_id: str, out: list[Record]) -> None:
        """Kafka's ``convertToClassicGroup``: the leaving member goes, the others, all
        classic, form a classic group that rebalances."""
        classic = classic_group_from_consumer(
            group, leaving_member_id, self.metadata.topic_names, self._now()
        )
        out.extend(records.group_tombstones(group))
        group.state = ConsumerGroupState.DEAD
        self.group_unloaded(group)
        self.manager.groups[group.group_id] = classic
        self.log.info("consumer_group_downgraded", group=group.group_id)
        self.adopt_classic(classic, f"Downgrade group {group.group_id} from consumer to classic.")

    # -- storing --------------------------------------------------------------------------

    def _stored(
        self,
        group_id: str,
        out: list[Record],
        result: T,
        failed: Callable[[int], T] = HeartbeatResult,  # type: ignore[assignment]
    ) -> T | asyncio.Future[T]:
        """``result`` once ``out`` is in the group's partition (the state changed at
        once, as Kafka's uncommitted timeline state does); ``failed(error)`` if not."""
        if not out:
            return result
        stored = self.manager.append(group_id, out)
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future[int]) -> None:
            if answer.done():
                return
            code = f.result()
            answer.set_result(result if code == ErrorCode.NONE else failed(code))

        stored.add_done_callback(done)
        return answer

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
        return self._preferred_assignor(group)

    def describe_topic_names(self) -> Mapping[str, str]:
        return self.metadata.topic_names


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("rebalance", group_id, member_id)


def _join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("join", group_id, member_id)


def _sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("sync", group_id, member_id)


def _new_member_id() -> str:
    """A member id as Kafka makes one (a random Uuid's URL-safe base64)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _not_empty(value: str | None, message: str) -> None:
    if value is not None and not value.strip():
        raise _invalid(message)


def _invalid(message: str) -> _Refused:
    return _Refused(ErrorCode.INVALID_REQUEST, message)


def _unknown_member(member_id: str, group_id: str) -> _Refused:
    return _Refused(
        ErrorCode.UNKNOWN_MEMBER_ID,
        f"Member {member_id} is not a member of group {group_id}.",
    )


def _fenced_instance(member_id: str, instance: str, owner: str) -> _Refused:
    return _Refused(
        ErrorCode.FENCED_INSTANCE_ID,
        f"Static member {member_id} with instance id {instance} was fenced by member {owner}.",
    )


def _check_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead is fenced; one
    behind only if it is the previous epoch and the member owns no more than it should
    (the answer with the new epoch may have been lost)."""
    if received > member.member_epoch:
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
    ):
        raise _Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )


def _is_subset(owned: OwnedPartitions, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(topic_id, ()) for topic_id, ps in owned for p in ps)


@functools.lru_cache(maxsize=1024)
def _compiled(regex: str) -> Any:
    """The regex, compiled by RE2 (linear time, as Kafka's RE2J: a hostile pattern cannot
    stall the coordinator); INVALID_REGULAR_EXPRESSION when it is not one."""
    import re2

    if len(regex) > MAX_REGEX_LENGTH:
        raise _Refused(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex is longer than {MAX_REGEX_LENGTH} characters.",
        )
    try:
        return re2.compile(regex)
    except re2.error as exc:
        raise _Refused(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.",
        ) from exc


def _log_failure(log: Any, group_id: str, stored: asyncio.Future[int]) -> None:
    code = stored.result()
    if code != ErrorCode.NONE:
        log.warning("consumer_group_records_not_stored", group=group_id, error=code)


__all__ = [
    "ConsumerGroupCoordinator",
    "ConsumerGroupState",
    "HeartbeatRequest",
    "HeartbeatResult",
]
