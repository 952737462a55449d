"""A consumer group's records in ``__consumer_offsets`` (Kafka's KIP-848 records): what
the ConsumerGroupCoordinator writes as the group changes, and the group rebuilt from
them when a coordinator loads the partition.

Per group: its epoch and subscription metadata; the target assignment's epoch. Per
member: its subscription (member metadata), its target assignment, and its current
assignment (epochs, state, partitions owned and pending revocation). A member that
goes leaves tombstones for its three; the last record per key wins on replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from purgatory.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from purgatory.broker.coordinator.group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    Record,
    assignment_of,
    decode_consumer_group_value,
    encode,
    topic_partitions,
)


def _record(key: Any, value: Any) -> Record:
    data = encode(key)
    assert data is not None
    return data, encode(value)


def group_metadata(group: ConsumerGroup) -> Record:
    return _record(
        ConsumerGroupMetadataKey(group.group_id),
        ConsumerGroupMetadataValue(group.group_epoch, dict(group.subscription_metadata)),
    )


def target_metadata(group: ConsumerGroup) -> Record:
    return _record(
        ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
        ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch),
    )


def member_metadata(group_id: str, member: ConsumerGroupMember) -> Record:
    return _record(
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        ConsumerGroupMemberMetadataValue(
            member.instance_id,
            member.rack_id,
            member.client_id,
            member.client_host,
            list(member.subscribed_topic_names),
            member.subscribed_topic_regex,
            member.rebalance_timeout_ms,
            member.server_assignor,
            member.classic.session_timeout_ms if member.classic else -1,
            list(member.classic.protocols) if member.classic else None,
        ),
    )


def target_member(group_id: str, member_id: str, target: Mapping[str, frozenset[int]]) -> Record:
    return _record(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(topic_partitions(target)),
    )


def current_assignment(group_id: str, member: ConsumerGroupMember) -> Record:
    return _record(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member.member_epoch,
            member.previous_member_epoch,
            member.state.value,
            topic_partitions(member.assigned),
            topic_partitions(member.pending_revocation),
        ),
    )


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's ``removeMember``: its current assignment, target and subscription go."""
    return [
        _record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        _record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        _record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """The group deleted: its members' records (it has none when deleted by an admin:
    only an empty group can be), then its target's and its own."""
    out: list[Record] = []
    for member_id in group.members:
        out.extend(member_tombstones(group.group_id, member_id))
    out.append(_record(ConsumerGroupTargetAssignmentMetadataKey(group.group_id), None))
    out.append(_record(ConsumerGroupMetadataKey(group.group_id), None))
    return out


def all_records(group: ConsumerGroup) -> list[Record]:
    """Every record of the group as it stands (Kafka's ``createConsumerGroupRecords``: a
    group made from a classic one is written whole)."""
    gid = group.group_id
    out = [member_metadata(gid, m) for m in group.members.values()]
    out.append(group_metadata(group))
    out.extend(
        target_member(gid, member_id, target)
        for member_id, target in group.target_assignment.items()
    )
    out.append(target_metadata(group))
    out.extend(current_assignment(gid, m) for m in group.members.values())
    return out


def classic_group_tombstone(group_id: str) -> Record:
    """A classic group becomes a consumer group: its record goes."""
    return _record(GroupMetadataKey(group_id), None)


class ConsumerGroupReplay:
    """What replaying a partition found of its consumer groups so far: the last value
    per key (None: a tombstone)."""

    __slots__ = ("current", "groups", "members", "target_epochs", "targets")

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupMetadataValue | None] = {}
        self.target_epochs: dict[str, int | None] = {}
        self.members: dict[tuple[str, str], ConsumerGroupMemberMetadataValue | None] = {}
        self.targets: dict[tuple[str, str], ConsumerGroupTargetAssignmentMemberValue | None] = {}
        self.current: dict[tuple[str, str], ConsumerGroupCurrentMemberAssignmentValue | None] = {}

    def record(self, key: ConsumerGroupKey, data: bytes | None) -> None:
        value = None if data is None else decode_consumer_group_value(key, data)
        if isinstance(key, ConsumerGroupMetadataKey):
            self.groups[key.group] = value
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            self.target_epochs[key.group] = None if value is None else value.assignment_epoch
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            self.members[(key.group, key.member_id)] = value
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            self.targets[(key.group, key.member_id)] = value
        else:
            self.current[(key.group, key.member_id)] = value

    def deleted(self, group_id: str) -> bool:
        """Whether the group's last word was its deletion (a classic group's may follow)."""
        return group_id in self.groups and self.groups[group_id] is None

    def groups_built(self, now_ms: int) -> dict[str, ConsumerGroup]:
        """The consumer groups as their last records left them."""
        built: dict[str, ConsumerGroup] = {}
        for group_id, value in self.groups.items():
            if value is None:
                continue
            group = ConsumerGroup(group_id, now_ms)
            group.group_epoch = value.epoch
            group.subscription_metadata = {
                n: (t, p) for n, (t, p) in value.subscription_metadata.items()
            }
            group.assignment_epoch = self.target_epochs.get(group_id) or 0
            built[group_id] = group
        for (group_id, member_id), meta in self.members.items():
            found = built.get(group_id)
            if found is None or meta is None:
                continue
            group = found
            current = self.current.get((group_id, member_id))
            target = self.targets.get((group_id, member_id))
            if target is not None:
                group.target_assignment[member_id] = assignment_of(target.topic_partitions)
            member = ConsumerGroupMember(
                member_id,
                meta.instance_id,
                meta.rack_id,
                meta.client_id,
                meta.client_host,
                meta.rebalance_timeout_ms,
                tuple(meta.subscribed_topic_names),
                meta.subscribed_topic_regex,
                meta.server_assignor,
                None
                if meta.classic_protocols is None
                else ClassicMemberMetadata(
                    meta.classic_session_timeout_ms,
                    tuple((name, data) for name, data in meta.classic_protocols),
                ),
            )
            if current is not None:
                member = replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    state=MemberState(current.state),
                    assigned=assignment_of(current.assigned_partitions),
                    pending_revocation=assignment_of(current.partitions_pending_revocation),
                )
            group.update_member(member)
        for group in built.values():
            group.update_state(now_ms)
        return built
