"""DelayedJoin and InitialDelayedJoin: a rebalance waiting in the "Rebalance" purgatory
for the group's members to (re)join, watched on the group id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.broker.coordinator.group_metadata import GroupState
from purgatory.broker.purgatory import DelayedOperation

if TYPE_CHECKING:
    from purgatory.broker.coordinator.group_metadata import GroupMetadata
    from purgatory.broker.coordinator.rebalancer import Rebalancer


class DelayedJoin(DelayedOperation):
    """A rebalance of ``group`` (PreparingRebalance). It completes when:

    A. every known member has rejoined and no member is still to send its second join
       (MEMBER_ID_REQUIRED): the new generation starts at once;
    B. the rebalance timeout (the largest of the members') passes first: the members
       that did not rejoin are removed, then the new generation starts;
    C. the group died (deleted, or its coordinator moved away): nothing more to do.
    """

    __slots__ = ("group", "rebalancer")

    def __init__(self, rebalancer: Rebalancer, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.rebalancer = rebalancer
        self.group = group

    def try_complete(self) -> bool:
        group = self.group
        done = group.state is GroupState.DEAD or group.has_all_members_joined()
        return done and self.force_complete()

    def on_complete(self) -> None:
        self.rebalancer.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``
    for more members, however many have joined. It completes only by time:

    A. the delay passed and no member joined meanwhile (or the rebalance timeout is
       used up): the rebalance completes as a DelayedJoin would;
    B. the delay passed and a member joined meanwhile: another wait of the same delay
       (at most what is left of the rebalance timeout) takes its place.
    """

    __slots__ = ("delay", "remaining")

    def __init__(
        self, rebalancer: Rebalancer, group: GroupMetadata, delay_ms: int, remaining_ms: int
    ) -> None:
        super().__init__(rebalancer, group, delay_ms)
        self.delay = delay_ms
        self.remaining = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining > 0:  # case B
            group.new_member_added = False
            delay = min(self.delay, self.remaining)
            self.rebalancer.watch(
                InitialDelayedJoin(self.rebalancer, group, delay, max(self.remaining - delay, 0))
            )
        else:  # case A
            self.rebalancer.on_complete_join(group)
