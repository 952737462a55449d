"""DelayedHeartbeat: a group member's session, waiting in the "Heartbeat" purgatory,
watched on (group id, member id)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.broker.coordinator.group_metadata import GroupState
from purgatory.broker.purgatory import DelayedOperation

if TYPE_CHECKING:
    from purgatory.broker.coordinator.group_metadata import GroupMetadata
    from purgatory.broker.coordinator.member_sessions import MemberSessions


class DelayedHeartbeat(DelayedOperation):
    """The session of ``member_id`` in ``group`` (or of a member told MEMBER_ID_REQUIRED,
    ``pending``). Each heartbeat, join or sync of the member completes it and starts the
    next. It completes when:

    A. the member showed it is alive (a heartbeat, or a join or sync it is waiting on);
    B. the member is gone already (it left, was removed or fenced, or the group died);
    C. a pending member joined with its id (it has a real session now);
    D. its timeout (the session timeout) passes first: the member is removed and the
       group rebalances.
    """

    __slots__ = ("group", "member_id", "pending", "sessions")

    def __init__(
        self,
        sessions: MemberSessions,
        group: GroupMetadata,
        member_id: str,
        pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms)
        self.sessions = sessions
        self.group = group
        self.member_id = member_id
        self.pending = pending

    def try_complete(self) -> bool:
        group = self.group
        if group.state is GroupState.DEAD:  # case B
            done = True
        elif self.pending:
            done = self.member_id not in group.pending_members  # case C, or B
        else:
            member = group.members.get(self.member_id)
            done = member is None or member.has_satisfied_heartbeat or member.is_leaving
        return done and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:  # case D
        self.sessions.on_expire(self.group, self.member_id, self.pending)
