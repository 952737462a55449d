"""ShareGroup: one share group of KIP-932 (Kafka's ShareGroup and ShareGroupMember): its
epochs, members with their subscriptions, and the target assignment. Pure state: the
ShareGroupCoordinator decides when it changes.

Unlike a consumer group, a partition may be assigned to several members at once: their
share fetches split its records between them, each record locked by one member at a
time (``broker/share``). A member is given its target assignment as soon as it is
computed, with no revocation first. States: Empty (no member), Stable, Dead.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from purgatory.broker.coordinator.consumer_group import Assignment
from purgatory.broker.coordinator.group_metadata import CommittedOffset, TopicPartition
from purgatory.common.broker_state import GroupInfo, MemberInfo


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)

    def subscription(self) -> tuple[object, ...]:
        """What its ShareGroupMemberMetadata record holds."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)

    def with_assignment(self, epoch: int, assigned: Assignment) -> ShareGroupMember:
        """Kafka's ShareGroupAssignmentBuilder: straight to the target epoch and its
        partitions."""
        return replace(
            self, member_epoch=epoch, previous_member_epoch=self.member_epoch, assigned=assigned
        )


@dataclass(eq=False)
class ShareGroup:
    group_id: str
    state_timestamp_ms: int
    state: ShareGroupState = ShareGroupState.EMPTY
    group_epoch: int = 1  # a new group starts at 1, as Kafka 4.x's modern groups
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, tuple[str, int]] = field(default_factory=dict)
    # A share group commits no offsets (its partitions' start offsets are the share
    # partitions'); these stay empty, for the code that walks every group's offsets.
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict
    )

    protocol_type = "share"

    def is_dead(self) -> bool:
        return self.state is ShareGroupState.DEAD

    def is_empty(self) -> bool:
        return not self.members

    def is_in_empty_state(self) -> bool:
        return self.state is ShareGroupState.EMPTY

    def update_state(self, now_ms: int) -> None:
        if self.state is ShareGroupState.DEAD:
            return
        state = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
        if state is not self.state:
            self.state = state
            self.state_timestamp_ms = now_ms

    def subscribed_topic_names(self) -> Iterable[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def subscribed_topics(self) -> set[str] | None:
        return set(self.subscription_metadata)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        return []

    def describe(self) -> GroupInfo:
        """The group as ``/v1/state`` shows it."""
        return GroupInfo(
            group_id=self.group_id,
            state=self.state.value,
            generation_id=self.group_epoch,
            protocol_type=self.protocol_type,
            protocol="",
            leader="",
            members=[
                MemberInfo(
                    member_id=m.member_id,
                    group_instance_id=None,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=0,
                )
                for m in self.members.values()
            ],
            offsets=0,
        )


def simple_assignment(
    member_topics: Mapping[str, frozenset[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, frozenset[int]]]:
    """The share groups' ``simple`` assignor: every partition of a subscribed topic to at
    least one of its subscribers, spread evenly over them; with more subscribers than
    partitions, every partition goes to as many as Kafka's SimpleHomogeneousAssignmentBuilder
    shares it with (its desired sharing, subscribers / partitions rounded up), the first
    subscribers taking one more. Deterministic (members by id), where Kafka orders members
    by its hash map and keeps what a member had."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in member_topics}
    for topic_id in sorted(partitions):
        subscribers = sorted(m for m, topics in member_topics.items() if topic_id in topics)
        if not subscribers:
            continue
        count = partitions[topic_id]
        sharing = -(-len(subscribers) // count)
        slots = sharing * count  # slot i: subscriber i % n, partition i % count, never twice
        for i in range(slots):
            member = subscribers[i % len(subscribers)]
            out[member].setdefault(topic_id, set()).add(i % count)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}
