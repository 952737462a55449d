"""MemberSessions: each group member's session, a ``DelayedHeartbeat`` in the
"Heartbeat" purgatory watched on (group id, member id). A heartbeat, join or sync of the
member ends its current wait and starts the next; a wait that times out hands the member
to the coordinator for removal."""

from __future__ import annotations

from collections.abc import Callable

from purgatory.broker.coordinator.delayed_heartbeat import DelayedHeartbeat
from purgatory.broker.coordinator.group_metadata import GroupMetadata, MemberMetadata
from purgatory.broker.purgatory import DelayedOperationPurgatory, Scheduler, SystemTimer

OnExpire = Callable[[GroupMetadata, str, bool], None]


class MemberSessions:
    def __init__(self, scheduler: Scheduler, on_expire: OnExpire) -> None:
        self.purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory(
            "Heartbeat", SystemTimer(scheduler)
        )
        self.on_expire = on_expire

    def heard_from(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """The member is alive: end its current session wait and start the next (Kafka's
        completeAndScheduleNextHeartbeatExpiration)."""
        member.heartbeat_satisfied = True
        self.check(group, member.member_id)
        member.heartbeat_satisfied = False
        self._watch(group, member.member_id, False, timeout_ms or member.session_timeout_ms)

    def watch_pending(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """A member told MEMBER_ID_REQUIRED must join again with its id in time."""
        self._watch(group, member_id, True, timeout_ms)

    def stop(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """The member leaves: its session ends without expiring."""
        member.is_leaving = True
        self.check(group, member.member_id)

    def check(self, group: GroupMetadata, member_id: str) -> None:
        self.purgatory.check_and_complete((group.group_id, member_id))

    def cancel_all(self) -> None:
        self.purgatory.cancel_all()

    def _watch(self, group: GroupMetadata, member_id: str, pending: bool, timeout_ms: int) -> None:
        operation = DelayedHeartbeat(self, group, member_id, pending, timeout_ms)
        self.purgatory.try_complete_else_watch(operation, ((group.group_id, member_id),))
