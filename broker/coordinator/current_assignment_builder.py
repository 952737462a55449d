"""CurrentAssignmentBuilder (Kafka's): one step of a consumer group member's
reconciliation from its assignment towards the group's target assignment.

A member first revokes the partitions it keeps no longer (it stays in its epoch, state
UNREVOKED_PARTITIONS, until its heartbeat no longer lists them as owned); then it moves
to the target epoch and is given the new partitions that no other member still owns;
those still owned elsewhere come later (UNRELEASED_PARTITIONS), once they are released.
No partition is ever owned by two members at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from purgatory.broker.coordinator.consumer_group import (
    NO_OWNER,
    Assignment,
    ConsumerGroupMember,
    MemberState,
)

OwnedPartitions = Iterable[tuple[str, Iterable[int]]] | None  # (topic id, partitions)


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[str, int], int],
    owned: OwnedPartitions,
) -> ConsumerGroupMember:
    """The member after one reconciliation step (itself when nothing changes).
    ``owned`` is what its heartbeat says it owns (None: it did not say)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    """Whether the member still owns any of ``partitions`` (it did not say: it might)."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned for p in ps)


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[str, int], int],
    owned: OwnedPartitions,
) -> ConsumerGroupMember:
    """Kafka's ``computeNextAssignment``."""
    unreleased = False
    assigned: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    adding: dict[str, frozenset[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        revoked = current - kept
        new = {p for p in wanted - kept if partition_epoch(topic_id, p) == NO_OWNER}
        unreleased = unreleased or len(new) < len(wanted - kept)
        if kept:
            assigned[topic_id] = kept
        if revoked:
            revoking[topic_id] = revoked
        if new:
            adding[topic_id] = frozenset(new)
    if revoking and _owns_any(owned, revoking):
        return replace(
            member.with_epoch(epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(
        member.with_epoch(target_epoch), state=state, assigned=assigned, pending_revocation={}
    )
