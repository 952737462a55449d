"""A group with members changing protocol (KIP-848's online migration, Kafka's
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``): a classic group
becomes a consumer group when a consumer-protocol member joins it, its classic members
staying as they are; a consumer group whose last consumer-protocol member leaves becomes a
classic group again. Pure conversions: the ConsumerGroupCoordinator decides when.
"""

from __future__ import annotations

from collections.abc import Mapping

from purgatory.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from purgatory.broker.coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata
from purgatory.protocol.inter_broker_messages import TopicState


class MigrationRefused(ValueError):
    """The group cannot change protocol (a member's embedded protocol does not read)."""


def consumer_group_from_classic(
    classic: GroupMetadata, topics: Mapping[str, TopicState], now_ms: int
) -> ConsumerGroup:
    """The classic group as a consumer group: its generation is the group and target
    epoch, each member keeps its assignment as its current and target one, in state
    stable, and keeps speaking the classic protocol."""
    # Imported when first needed: kio's schemas take a broker's start ~0.15 s.
    from purgatory.protocol.consumer_protocol import (
        ConsumerProtocolError,
        decode_assignment,
        decode_subscription,
    )

    group = ConsumerGroup(classic.group_id, now_ms)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    group.offsets = classic.offsets
    group.pending_txn_offsets = classic.pending_txn_offsets
    protocol = classic.protocol_name or ""
    for m in classic.members.values():
        try:
            subscription = decode_subscription(m.metadata_for(protocol))
            assigned = decode_assignment(m.assignment).partitions
        except (ConsumerProtocolError, KeyError) as exc:
            raise MigrationRefused(
                f"Cannot upgrade the classic group {classic.group_id} to consumer group "
                "because the embedded consumer protocol is malformed."
            ) from exc
        assignment = {
            topics[name].topic_id: frozenset(ps)
            for name, ps in assigned.items()
            if name in topics and ps
        }
        member = ConsumerGroupMember(
            m.member_id,
            m.group_instance_id,
            subscription.rack_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            tuple(subscription.topics),
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE,
            assigned=assignment,
        )
        group.update_member(member)
        group.target_assignment[m.member_id] = assignment
    return group


def classic_group_from_consumer(
    group: ConsumerGroup, leaving_member_id: str, topic_names: Mapping[str, str], now_ms: int
) -> GroupMetadata:
    """The consumer group, all of whose members but the leaving one speak the classic
    protocol, as a classic group in the group epoch's generation, Stable, each member with
    its assignment (the caller then starts a rebalance, as Kafka does)."""
    from purgatory.protocol.consumer_protocol import Assignment, encode_assignment

    members = [m for m in group.members.values() if m.member_id != leaving_member_id]
    classic = GroupMetadata(group.group_id, GroupState.STABLE, now_ms)
    classic.generation_id = group.group_epoch
    classic.protocol_type = group.protocol_type
    classic.offsets = group.offsets
    classic.pending_txn_offsets = group.pending_txn_offsets
    for m in members:
        assert m.classic is not None
        partitions = {
            topic_names[t]: sorted(ps) for t, ps in m.assigned.items() if t in topic_names
        }
        member = MemberMetadata(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic.session_timeout_ms,
            group.protocol_type,
            list(m.classic.protocols),
            assignment=encode_assignment(Assignment(partitions)),
        )
        classic.members[m.member_id] = member
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    first = members[0]
    assert first.classic is not None
    classic.protocol_name = _common_protocol(members) or first.classic.protocols[0][0]
    classic.leader_id = first.member_id
    return classic


def _common_protocol(members: list[ConsumerGroupMember]) -> str | None:
    """The first protocol of the first member that every member supports."""
    sets = [{name for name, _ in m.classic.protocols} for m in members if m.classic]
    first = members[0].classic
    assert first is not None
    common = set.intersection(*sets) if sets else set()
    return next((name for name, _ in first.protocols if name in common), None)
