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

from protocol.messages import PartitionState

NO_LEADER = -1


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
) -> ElectionResult | None:
    """The partition after applying the rules; None if nothing changes.

    ``eligible``: brokers that may lead or stay in the ISR now (live, not fenced, not
    shutting down). ``lost_data``: brokers that restarted without their log; they leave
    every ISR at once. ``preferred``: move leadership to the first replica if it is an
    eligible ISR member (Kafka's preferred replica election).
    """
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
