"""Partition leader election and ISR rules of the controller (Kafka's
``PartitionChangeBuilder`` and ``Election``), as pure functions of a partition's state.

One rule covers every event: a broker fenced for missed heartbeats, a broker back, a
broker that restarted without its log (in memory: a new incarnation), a broker in
controlled shutdown, a preferred-leader election. Given which brokers may lead now and
which lost their data, the ISR keeps its members that may lead; if none may, it keeps the
ones it had (they may return with their data, as in KRaft) minus those that lost it. The
leader stays if it still may lead, else the first ISR member in replica order that may
(a clean election). With no such member, an unclean election (when allowed) picks the
first replica that may lead, and the ISR becomes that replica alone: records only the
lost ISR held are gone, as in Kafka. Otherwise the partition is offline (leader -1).
A new leader means a new leader epoch; any change a new partition epoch.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import msgspec

from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import PartitionState

NO_LEADER = -1

# Kafka's messages for the errors of an ElectLeaders partition (its Errors' defaults).
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."
PREFERRED_NOT_AVAILABLE_MESSAGE = "The preferred leader was not available."
ELIGIBLE_NOT_AVAILABLE_MESSAGE = "Eligible topic partition leaders are not available."


class Election(Enum):
    CLEAN = "clean"
    UNCLEAN = "unclean"
    PREFERRED = "preferred"


class ElectionResult(NamedTuple):
    state: PartitionState
    election: Election | None  # why the leader changed; None if it did not
    offline: bool  # no leader after the change


def change_partition(
    state: PartitionState,
    eligible: frozenset[int],
    lost_data: frozenset[int] = frozenset(),
    unclean: bool = False,
    preferred: bool = False,
    shutting_down: frozenset[int] = frozenset(),
) -> ElectionResult | None:
    """The partition after applying the rules; None if nothing changes.

    ``eligible``: brokers that may lead or stay in the ISR now (live, not fenced, not
    shutting down). ``lost_data``: brokers that restarted without their log; they leave
    every ISR at once. ``preferred``: move leadership to the first replica if it is an
    eligible ISR member (Kafka's preferred replica election). ``shutting_down``: brokers
    in controlled shutdown; they still hold their logs, so a partition whose ISR holds one
    is never elected uncleanly (it waits for that broker or another ISR member).
    """
    unclean = unclean and not shutting_down.intersection(state.isr)
    isr = [r for r in state.isr if r not in lost_data]
    live_isr = [r for r in isr if r in eligible]
    new_isr = live_isr if live_isr else isr
    leader = state.leader_id
    election: Election | None = None
    preferred_replica = state.replicas[0] if state.replicas else NO_LEADER
    if preferred and preferred_replica in live_isr and leader != preferred_replica:
        leader, election = preferred_replica, Election.PREFERRED
    elif leader not in live_isr:
        candidate = next((r for r in state.replicas if r in live_isr), NO_LEADER)
        if candidate != NO_LEADER:
            leader, election = candidate, Election.CLEAN
        elif unclean and (any_live := [r for r in state.replicas if r in eligible]):
            leader, election = any_live[0], Election.UNCLEAN
            new_isr = [leader]
        else:
            leader = NO_LEADER
    new_isr = sorted(new_isr, key=state.replicas.index)
    if leader == state.leader_id and new_isr == state.isr:
        return None
    changed = msgspec.structs.replace(
        state,
        leader_id=leader,
        leader_epoch=state.leader_epoch + (leader != state.leader_id),
        isr=new_isr,
        partition_epoch=state.partition_epoch + 1,
    )
    return ElectionResult(changed, election if leader != NO_LEADER else None, leader < 0)


def preferred_imbalance(state: PartitionState) -> bool:
    """The partition is led by another than its preferred (first) replica."""
    return bool(state.replicas) and state.leader_id != state.replicas[0]


def alter_isr(
    state: PartitionState,
    sender: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: list[int],
    eligible: frozenset[int],
) -> PartitionState | ErrorCode:
    """A leader's AlterPartition, fenced by leader and partition epochs (Kafka's
    ``ReplicationControlManager.alterPartition``): the new state, or why it is refused.

    FENCED_LEADER_EPOCH when the sender is not the current leader (or names another leader
    epoch), INVALID_UPDATE_VERSION when its ISR is not the current one, INVALID_REQUEST
    when the ISR is not a set of replicas holding the leader, INELIGIBLE_REPLICA when it
    adds a broker that may not join (not live, or shutting down).
    """
    if sender != state.leader_id or leader_epoch != state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if partition_epoch != state.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if (
        len(set(new_isr)) != len(new_isr)
        or state.leader_id not in new_isr
        or not set(new_isr) <= set(state.replicas)
    ):
        return ErrorCode.INVALID_REQUEST
    if not set(new_isr) - set(state.isr) <= eligible:
        return ErrorCode.INELIGIBLE_REPLICA
    return msgspec.structs.replace(
        state,
        isr=sorted(new_isr, key=state.replicas.index),
        partition_epoch=state.partition_epoch + 1,
    )


def elect_on_request(
    state: PartitionState, eligible: frozenset[int], election: Election
) -> ElectionResult | tuple[ErrorCode, str]:
    """An ElectLeaders request for one partition (Kafka's
    ``ReplicationControlManager.electLeader``): the change, or the error Kafka answers,
    with Kafka's message.

    PREFERRED moves leadership to the first replica if it is an eligible in-sync replica
    (PREFERRED_LEADER_NOT_AVAILABLE if not, ELECTION_NOT_NEEDED if it leads already).
    UNCLEAN elects a leader for a partition that has none, any live replica if no
    in-sync one is (ELECTION_NOT_NEEDED if it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
    if no replica is live).
    """
    if election is Election.PREFERRED:
        preferred = state.replicas[0] if state.replicas else NO_LEADER
        if state.leader_id == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE
        if preferred not in eligible or preferred not in state.isr:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, PREFERRED_NOT_AVAILABLE_MESSAGE
        change = change_partition(state, eligible, preferred=True)
    else:
        if state.leader_id != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE
        change = change_partition(state, eligible, unclean=True)
    if change is None or change.offline:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, ELIGIBLE_NOT_AVAILABLE_MESSAGE
    return change


def move_leadership(
    state: PartitionState, broker: int, eligible: frozenset[int]
) -> ElectionResult | tuple[ErrorCode, str]:
    """Make ``broker`` the partition's preferred replica and its leader, as Kafka does it:
    a reassignment that only reorders the replicas (``broker`` first), then a preferred
    election. Being preferred, it stays leader under ``auto.leader.rebalance.enable``.

    INVALID_REPLICA_ASSIGNMENT when ``broker`` is not a replica (moving data is not a
    leader change), PREFERRED_LEADER_NOT_AVAILABLE when it is not a live in-sync replica
    (it could lack acknowledged records), ELECTION_NOT_NEEDED when it leads already.
    """
    if broker not in state.replicas:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"broker {broker} is not a replica (replicas {state.replicas})",
        )
    if broker not in eligible or broker not in state.isr:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"broker {broker} is not a live in-sync replica (isr {state.isr})",
        )
    if state.leader_id == broker:
        return ErrorCode.ELECTION_NOT_NEEDED, f"broker {broker} leads already"
    replicas = [broker] + [r for r in state.replicas if r != broker]
    reordered = msgspec.structs.replace(state, replicas=replicas)
    change = change_partition(reordered, eligible, preferred=True)
    assert change is not None and change.state.leader_id == broker
    return change
