"""GroupMetadata: one classic consumer group's members, generation, state and committed
offsets (Kafka's GroupMetadata and MemberMetadata). Pure state: the GroupCoordinator
decides when it changes and answers the members.

States, and the only transitions allowed (as Kafka's):

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲  │                                           │
      │                 │  └──no member left──▶ Empty                  │ leader's SyncGroup
      │                 └──join, leave, member expired ◀── Stable ◀────┘
    Dead ◀── any state (group deleted, or its coordinator moved away)
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from purgatory.common.broker_state import GroupInfo, MemberInfo
from purgatory.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class CommittedOffset(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    topic_id: str = ""  # of the topic's incarnation when committed


class JoinResult(NamedTuple):
    """What a JoinGroup is answered: the leader gets every member's metadata for the
    chosen protocol, the others an empty list."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = []  # (member id, instance id, metadata)
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    assignment: bytes = b""
    awaiting_join: asyncio.Future[JoinResult] | None = None
    awaiting_sync: asyncio.Future[SyncResult] | None = None
    is_new: bool = False  # joined, never yet part of a completed rebalance
    heartbeat_satisfied: bool = False
    is_leaving: bool = False

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Whether its current DelayedHeartbeat may complete (the member is alive)."""
        if self.is_new:
            return self.heartbeat_satisfied
        return (
            self.awaiting_join is not None
            or self.awaiting_sync is not None
            or self.heartbeat_satisfied
        )

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState
    state_timestamp_ms: int
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    # TxnOffsetCommit: producer id -> the offsets its open transaction commits (Kafka's
    # pendingTransactionalOffsetCommits), the group's once its commit marker is written.
    pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict
    )
    new_member_added: bool = False  # a member joined during the initial rebalance delay
    awaiting_join_count: int = 0

    # -- state ----------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(
                f"group {self.group_id} cannot go from {self.state.value} to {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def is_dead(self) -> bool:
        return self.state is GroupState.DEAD

    def is_in_empty_state(self) -> bool:
        return self.state is GroupState.EMPTY

    # -- members --------------------------------------------------------------------------

    def add(self, member: MemberMetadata, awaiting: asyncio.Future[JoinResult]) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        self.set_awaiting_join(member, awaiting)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.awaiting_join is not None:
            self.awaiting_join_count -= 1
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """A static member came back with a new member id: the old id is fenced, its
        waiting requests are told so (FENCED_INSTANCE_ID), the member keeps its place."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def set_awaiting_join(
        self, member: MemberMetadata, awaiting: asyncio.Future[JoinResult] | None
    ) -> None:
        if member.awaiting_join is None and awaiting is not None:
            self.awaiting_join_count += 1
        elif member.awaiting_join is not None and awaiting is None:
            self.awaiting_join_count -= 1
        member.awaiting_join = awaiting

    def complete_join(self, member: MemberMetadata, result: JoinResult) -> None:
        future = member.awaiting_join
        if future is not None:
            self.set_awaiting_join(member, None)
            if not future.done():
                future.set_result(result)

    def complete_sync(self, member: MemberMetadata, result: SyncResult) -> None:
        future = member.awaiting_sync
        member.awaiting_sync = None
        if future is not None and not future.done():
            future.set_result(result)

    def member_error(self, member_id: str, instance: str | None) -> int:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID for a member the group does not know as
        this; NONE if it does."""
        if instance is not None:
            registered = self.static_members.get(instance)
            if registered is not None and registered != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def join_result(self, member: MemberMetadata) -> JoinResult:
        """The JoinGroup answer of ``member`` in this generation; the leader gets every
        member's subscription."""
        leader = member.member_id == self.leader_id
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            self.member_metadata() if leader else [],
        )

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ------------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join: the group's protocol type, and
        at least one protocol every current member also supports."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidates())

    def candidates(self) -> set[str]:
        """The protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; the most votes win
        (ties: the first voted for)."""
        candidates = self.candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader is given: every member's metadata for the chosen protocol."""
        protocol = self.protocol_name or ""
        return [
            (m.member_id, m.group_instance_id, m.metadata_for(protocol))
            for m in self.members.values()
        ]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume (from their consumer protocol subscriptions and
        assignments); None when that cannot be known (not a consumer group, or metadata
        that does not read)."""
        # Imported when first needed: kio's schemas take a broker's start ~0.15 s.
        from purgatory.protocol.consumer_protocol import (
            PROTOCOL_TYPE,
            ConsumerProtocolError,
            assigned_topics,
            decode_subscription,
        )

        if self.protocol_type != PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata_for(self.protocol_name)).topics)
        except (ConsumerProtocolError, KeyError):
            return None
        return topics | assigned_topics({m.member_id: m.assignment for m in self.members.values()})

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's offset retention: a consumer group empty for ``retention_ms`` loses all
        its offsets; a group that only commits, each offset that long after its commit; a
        group with members, those of topics it no longer consumes."""
        if self.state is GroupState.DEAD:
            return []
        if self.state is GroupState.EMPTY and self.protocol_type is not None:
            return list(self.offsets) if now_ms - self.state_timestamp_ms >= retention_ms else []
        subscribed = set() if self.state is GroupState.EMPTY else self.subscribed_topics()
        if subscribed is None:
            return []
        return [
            tp
            for tp, o in self.offsets.items()
            if tp[0] not in subscribed and now_ms - o.commit_timestamp_ms >= retention_ms
        ]

    # -- observation ----------------------------------------------------------------------

    def summary(self) -> tuple[str, str, list[tuple[MemberMetadata, bytes, bytes]]]:
        """What DescribeGroups shows, as Kafka's ``describeGroups``: (protocol type,
        protocol, each member with its metadata and assignment); the protocol and metadata
        only while Stable, the assignment always (a rebalancing member's last one)."""
        stable = self.state is GroupState.STABLE
        protocol = (self.protocol_name or "") if stable else ""
        members = [
            (m, m.metadata_for(protocol) if stable else b"", m.assignment)
            for m in self.members.values()
        ]
        return self.protocol_type or "", protocol, members

    def describe(self) -> GroupInfo:
        """The group as ``/v1/state`` shows it."""
        return GroupInfo(
            group_id=self.group_id,
            state=self.state.value,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type or "",
            protocol=self.protocol_name or "",
            leader=self.leader_id or "",
            members=[
                MemberInfo(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                )
                for m in self.members.values()
            ],
            offsets=len(self.offsets),
        )
