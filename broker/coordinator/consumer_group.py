"""ConsumerGroup: one consumer group of KIP-848's protocol (Kafka's ConsumerGroup and
ConsumerGroupMember): its epochs, its members with their subscriptions and assignments,
the target assignment, and which member epoch owns each partition. Pure state: the
ConsumerGroupCoordinator decides when it changes.

The group epoch grows when the group's subscriptions (members, their topics, the topics'
partitions) change; the target assignment is computed for a group epoch; each member
then moves from its assignment to its target one epoch at a time, revoking before it is
given partitions another member still owns. The group's state follows (as Kafka's
``maybeUpdateGroupState``):

    Empty        no member
    Assigning    the group epoch is ahead of the target assignment's
    Reconciling  some member has not reached the target assignment yet
    Stable       every member has
    Dead         deleted, or its coordinator moved away
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from purgatory.broker.coordinator.group_metadata import CommittedOffset, TopicPartition
from purgatory.common.broker_state import GroupInfo, MemberInfo
from purgatory.protocol.inter_broker_messages import TopicState

Assignment = Mapping[str, frozenset[int]]  # topic id -> partitions

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NO_OWNER = -1  # a partition's epoch while no member owns it


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's MemberState)."""

    STABLE = "stable"  # it has its target assignment, in the target epoch
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # it must first give some partitions up
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # it waits for others to give some up


class ClassicMemberMetadata(NamedTuple):
    """What a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat)
    inside a consumer group joined with (KIP-848's online migration)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription), its preference order


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member as its last heartbeat and its reconciliation left it. Immutable: a change
    is a new member (``dataclasses.replace``), so a heartbeat can tell what changed and
    write only that."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None  # a member using the classic protocol
    # Its assignment (Kafka's ConsumerGroupCurrentMemberAssignment):
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def subscription(self) -> tuple[object, ...]:
        """What its ConsumerGroupMemberMetadata record holds."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.server_assignor,
            self.classic,
        )

    def current_assignment(self) -> tuple[object, ...]:
        """What its ConsumerGroupCurrentMemberAssignment record holds."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned,
            self.pending_revocation,
        )

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's ``updateMemberEpoch``: the epoch it had becomes its previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    state_timestamp_ms: int
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    group_epoch: int = 1  # a new group starts at 1, as Kafka 4.x's ModernGroup
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    # (topic id, partition) -> the epoch of the member that owns it (assigned or pending
    # revocation); a partition missing is free.
    partition_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # What the target assignment was computed from: each subscribed topic that exists,
    # name -> (topic id, partitions). A change bumps the group epoch.
    subscription_metadata: dict[str, tuple[str, int]] = field(default_factory=dict)
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict
    )

    protocol_type = "consumer"

    # -- state ----------------------------------------------------------------------------

    def is_dead(self) -> bool:
        return self.state is ConsumerGroupState.DEAD

    def is_empty(self) -> bool:
        return not self.members

    def is_in_empty_state(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def update_state(self, now_ms: int) -> None:
        """Kafka's ``maybeUpdateGroupState``."""
        if self.state is ConsumerGroupState.DEAD:
            return
        if not self.members:
            state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ConsumerGroupState.ASSIGNING
        elif all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = ConsumerGroupState.STABLE
        else:
            state = ConsumerGroupState.RECONCILING
        if state is not self.state:
            self.state = state
            self.state_timestamp_ms = now_ms

    # -- members --------------------------------------------------------------------------

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put ``member`` in (new or changed), keeping the partitions' owners right."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        instance = member.instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self.target_assignment.pop(member_id, None)
        return member

    def current_partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), NO_OWNER)

    def _own(self, member: ConsumerGroupMember) -> None:
        epoch = member.member_epoch
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs[(topic_id, p)] = epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        epoch = member.member_epoch
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == epoch:
                        del self.partition_epochs[(topic_id, p)]

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether a partition of the member's target is still owned by another member
        (Kafka's ``waitingOnUnreleasedPartition``)."""
        target = self.target_assignment.get(member.member_id, {})
        for topic_id, partitions in target.items():
            assigned = member.assigned.get(topic_id, frozenset())
            for p in partitions - assigned:
                if self.current_partition_epoch(topic_id, p) != NO_OWNER:
                    return True
        return False

    def supports_classic_protocols(
        self, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> bool:
        """Whether a classic member may join (Kafka's ``supportsClassicProtocols``): the
        consumer protocol type, and a protocol every classic member supports too."""
        if protocol_type != self.protocol_type or not protocols:
            return False
        names = {name for name, _ in protocols}
        for member in self.members.values():
            if member.classic is not None:
                names &= {name for name, _ in member.classic.protocols}
        return bool(names)

    def all_classic_except(self, member_id: str) -> bool:
        return all(m.classic is not None for k, m in self.members.items() if k != member_id)

    def preferred_assignor(self, default: str) -> str:
        """The server-side assignor most members ask for (Kafka's
        ``preferredServerAssignor``); ``default`` when none asks."""
        asked = Counter(
            m.server_assignor for m in self.members.values() if m.server_assignor is not None
        )
        return asked.most_common(1)[0][0] if asked else default

    # -- subscriptions --------------------------------------------------------------------

    def subscribed_topic_names(self, regex_topics: Mapping[str, frozenset[str]]) -> Counter[str]:
        """How many members subscribe to each topic name, by name or by regex
        (``regex_topics``: each regex's matching topics)."""
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(member_topics(member, regex_topics))
        return counts

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members consume, for offset retention and OffsetDelete."""
        return set(self.subscription_metadata)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's retention for a consumer group: all its offsets once it has been
        empty for ``retention_ms``; with members, those of topics no member consumes,
        that long after their commit."""
        if self.state is ConsumerGroupState.DEAD:
            return []
        if not self.members:
            if now_ms - self.state_timestamp_ms >= retention_ms:
                return list(self.offsets)
            return []
        subscribed = set(self.subscription_metadata)
        return [
            tp
            for tp, o in self.offsets.items()
            if tp[0] not in subscribed and now_ms - o.commit_timestamp_ms >= retention_ms
        ]

    # -- observation ----------------------------------------------------------------------

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
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=0,
                )
                for m in self.members.values()
            ],
            offsets=len(self.offsets),
        )


def subscription_metadata(
    names: Iterable[str], topics: Mapping[str, TopicState]
) -> dict[str, tuple[str, int]]:
    """What a modern group's target assignment is made of (consumer and share groups):
    each subscribed topic that exists, name -> (topic id, partitions). A change of it is
    a new group epoch."""
    metadata: dict[str, tuple[str, int]] = {}
    for name in names:
        topic = topics.get(name)
        if topic is not None and topic.partitions:
            metadata[name] = (topic.topic_id, len(topic.partitions))
    return metadata


def member_topics(
    member: ConsumerGroupMember, regex_topics: Mapping[str, frozenset[str]]
) -> Iterable[str]:
    """The topic names a member subscribes to, by name and by its regex."""
    if member.subscribed_topic_regex is None:
        return member.subscribed_topic_names
    matched = regex_topics.get(member.subscribed_topic_regex, frozenset())
    return set(member.subscribed_topic_names) | matched
