"""ShareGroupCoordinator: the group coordinator's side of KIP-932's share groups (Kafka's
GroupMetadataManager ``shareGroupHeartbeat``): membership and assignment. The records
themselves are handed out by the partitions' leaders (ShareFetch, ``broker/share``).

A member heartbeats (ShareGroupHeartbeat) with its subscription; a changed subscription,
or subscribed topics that changed, bump the group epoch; the simple assignor then gives
every member its partitions, which it takes at once (no revocation: a partition may be
consumed by several members). The group lives in ``__consumer_offsets`` as Kafka's share
group records; a member that does not heartbeat within ``group.share.session.timeout.ms``
is fenced by a timeout on the timing wheel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator import share_group_records as records
from purgatory.broker.coordinator.consumer_group import Assignment, subscription_metadata
from purgatory.broker.coordinator.consumer_group_coordinator import HeartbeatResult
from purgatory.broker.coordinator.coordinator_timer import CoordinatorTimer
from purgatory.broker.coordinator.group_metadata_manager import GroupMetadataManager
from purgatory.broker.coordinator.group_records import Record
from purgatory.broker.coordinator.share_group import (
    ShareGroup,
    ShareGroupMember,
    ShareGroupState,
    simple_assignment,
)
from purgatory.broker.purgatory import Scheduler
from purgatory.protocol.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
SIMPLE_ASSIGNOR = "simple"


class ShareHeartbeatRequest(NamedTuple):
    """A ShareGroupHeartbeat's fields (None: not sent, i.e. unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None


class _Refused(Exception):
    def __init__(self, error: int, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class ShareGroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        scheduler: Scheduler,
        manager: GroupMetadataManager,
        coordinator_error: Callable[[str], int],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.scheduler = scheduler
        self.manager = manager
        self.coordinator_error = coordinator_error
        self.timer = CoordinatorTimer(scheduler)
        self.rebalances = 0
        self.log = structlog.get_logger("share_group").bind(broker_id=config.broker_id)

    def shutdown(self) -> None:
        self.timer.cancel_all()

    def _now(self) -> int:
        return self.scheduler.wall_ms()

    # -- ShareGroupHeartbeat --------------------------------------------------------------

    def heartbeat(
        self, request: ShareHeartbeatRequest, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        try:
            _validate(request)
            error = self.coordinator_error(request.group_id)
            if error:
                return HeartbeatResult(error)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except _Refused as refused:
            return HeartbeatResult(refused.error, refused.message)

    def _heartbeat(
        self, request: ShareHeartbeatRequest, client_id: str, client_host: str
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        out: list[Record] = []
        joining = request.member_epoch == 0
        group = self._group(request.group_id, joining)
        member_id = request.member_id
        limit = self.config["group.share.max.size"]
        if member_id not in group.members and len(group.members) >= limit:
            raise _Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {limit} members.",
            )
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            member = ShareGroupMember(member_id)
            self.log.info("share_group_member_joins", group=group.group_id, member=member_id)
        elif request.member_epoch not in (member.member_epoch, member.previous_member_epoch):
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                _fenced_message(request.member_epoch, member),
            )
        updated = replace(
            member,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            subscribed_topic_names=tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            client_id=client_id,
            client_host=client_host,
        )
        bump = member_id not in group.members
        if updated.subscription() != member.subscription() or bump:
            out.append(records.member_metadata(group.group_id, updated))
            bump = bump or updated.subscribed_topic_names != member.subscribed_topic_names
        group.members[member_id] = updated
        if self._refresh_subscriptions(group) or bump:
            self._bump(group, out)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, out)
        current = group.members[member_id]
        if current.member_epoch != group.assignment_epoch:
            current = current.with_assignment(
                group.assignment_epoch, group.target_assignment.get(member_id, {})
            )
            group.members[member_id] = current
            out.append(records.current_assignment(group.group_id, current))
        group.update_state(self._now())
        self._schedule_session(group.group_id, member_id)
        full = joining or request.subscribed_topic_names is not None
        result = HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            current.member_epoch,
            self.config["group.share.heartbeat.interval.ms"],
            current.assigned if full or current.assigned != member.assigned else None,
        )
        return self.manager.answer_when_stored(group.group_id, out, result, HeartbeatResult)

    def _group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.manager.groups.get(group_id)
        if isinstance(group, ShareGroup) and not group.is_dead():
            return group
        if group is not None and not group.is_dead():
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        share = ShareGroup(group_id, self._now())
        self.manager.groups[group_id] = share
        return share

    def _refresh_subscriptions(self, group: ShareGroup) -> bool:
        metadata = subscription_metadata(group.subscribed_topic_names(), self.metadata.topics)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _bump(self, group: ShareGroup, out: list[Record]) -> None:
        group.group_epoch += 1
        self.rebalances += 1
        out.append(records.group_metadata(group))

    def _assign(self, group: ShareGroup, out: list[Record]) -> None:
        ids = group.subscription_metadata
        member_topics = {
            m.member_id: frozenset(ids[n][0] for n in m.subscribed_topic_names if n in ids)
            for m in group.members.values()
        }
        target = simple_assignment(member_topics, dict(ids.values()))
        for member_id in group.members:
            new = target.get(member_id, {})
            if new != group.target_assignment.get(member_id):
                group.target_assignment[member_id] = new
                out.append(records.target_member(group.group_id, member_id, new))
        group.assignment_epoch = group.group_epoch
        out.append(records.target_metadata(group))

    # -- leaving, and being fenced ----------------------------------------------------------

    def _leave(
        self, request: ShareHeartbeatRequest
    ) -> HeartbeatResult | asyncio.Future[HeartbeatResult]:
        group = self._group(request.group_id, create=False)
        member = group.members.get(request.member_id)
        if member is None:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        self.log.info("share_group_member_left", group=group.group_id, member=member.member_id)
        out: list[Record] = []
        self._fence(group, member.member_id, out)
        result = HeartbeatResult(ErrorCode.NONE, None, member.member_id, LEAVE_GROUP_MEMBER_EPOCH)
        return self.manager.answer_when_stored(group.group_id, out, result, HeartbeatResult)

    def _fence(self, group: ShareGroup, member_id: str, out: list[Record]) -> None:
        group.members.pop(member_id, None)
        group.target_assignment.pop(member_id, None)
        self.timer.cancel(_session_key(group.group_id, member_id))
        out.extend(records.member_tombstones(group.group_id, member_id))
        self._refresh_subscriptions(group)
        self._bump(group, out)
        group.update_state(self._now())

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(
            _session_key(group_id, member_id),
            self.config["group.share.session.timeout.ms"],
            lambda: self._session_expired(group_id, member_id),
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.manager.groups.get(group_id)
        if not isinstance(group, ShareGroup) or group.is_dead() or member_id not in group.members:
            return
        self.log.info("share_group_member_fenced", group=group_id, member=member_id)
        out: list[Record] = []
        self._fence(group, member_id, out)
        self.manager.append_in_background(group_id, out)

    def member_loaded(self, group: ShareGroup, member_id: str) -> None:
        self._schedule_session(group.group_id, member_id)

    def group_unloaded(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self.timer.cancel(_session_key(group.group_id, member_id))

    # -- ShareGroupDescribe -----------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        error = self.coordinator_error(group_id)
        if error:
            return error, None, None
        group = self.manager.groups.get(group_id)
        if group is None or group.is_dead():
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
        return ErrorCode.NONE, None, group


def _validate(request: ShareHeartbeatRequest) -> None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
    if not request.group_id.strip():
        raise _Refused(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise _Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    epoch = request.member_epoch
    if not request.member_id.strip():
        raise _Refused(ErrorCode.INVALID_REQUEST, None)  # Kafka 4.3.1 answers no message
    if epoch == 0:
        if not request.subscribed_topic_names:
            raise _Refused(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            )
    elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise _Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def _fenced_message(epoch: int, member: ShareGroupMember) -> str:
    """Kafka 4.3.1's FENCED_MEMBER_EPOCH message for a share group member."""
    known = member.member_epoch
    if epoch > known:
        return (
            f"The share group member has a greater member epoch ({epoch}) than the one known "
            f"by the group coordinator ({known}). The member must abandon all its partitions "
            "and rejoin."
        )
    return (
        f"The share group member has a smaller member epoch ({epoch}) than the one known by "
        f"the group coordinator ({known}), and it does not match the previous member epoch "
        f"({member.previous_member_epoch}). The member must abandon all its partitions and "
        "rejoin."
    )


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("share-session", group_id, member_id)


__all__ = ["Assignment", "ShareGroupCoordinator", "ShareGroupState", "ShareHeartbeatRequest"]
