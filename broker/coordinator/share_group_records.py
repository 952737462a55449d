"""A share group's records in ``__consumer_offsets`` (Kafka's KIP-932 records): what the
ShareGroupCoordinator writes as the group changes, and the group rebuilt from them when
a coordinator loads the partition. The epoch and target records have the consumer
group's shapes; a member's subscription and current assignment their own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from purgatory.broker.coordinator.group_records import (
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    Record,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    assignment_of,
    decode_consumer_group_value,
    encode,
    topic_partitions,
)
from purgatory.broker.coordinator.share_group import ShareGroup, ShareGroupMember

SHARE_GROUP_KEYS = (
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
)


def group_metadata(group: ShareGroup) -> Record:
    return record(
        ShareGroupMetadataKey(group.group_id),
        ConsumerGroupMetadataValue(group.group_epoch, dict(group.subscription_metadata)),
    )


def target_member(group_id: str, member_id: str, target: Any) -> Record:
    return record(
        ShareGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(topic_partitions(target)),
    )


def target_metadata(group: ShareGroup) -> Record:
    return record(
        ShareGroupTargetAssignmentMetadataKey(group.group_id),
        ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch),
    )


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        record(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
        record(ShareGroupMemberMetadataKey(group_id, member_id), None),
    ]


def member_metadata(group_id: str, member: ShareGroupMember) -> Record:
    return record(
        ShareGroupMemberMetadataKey(group_id, member.member_id),
        ShareGroupMemberMetadataValue(
            member.rack_id,
            member.client_id,
            member.client_host,
            list(member.subscribed_topic_names),
        ),
    )


def current_assignment(group_id: str, member: ShareGroupMember) -> Record:
    return record(
        ShareGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ShareGroupCurrentMemberAssignmentValue(
            member.member_epoch, member.previous_member_epoch, topic_partitions(member.assigned)
        ),
    )


def record(key: Any, value: Any) -> Record:
    data = encode(key)
    assert data is not None
    return data, encode(value)


class ShareGroupReplay:
    """What replaying a partition found of its share groups: the last value per key."""

    __slots__ = ("current", "groups", "members", "target_epochs", "targets")

    def __init__(self) -> None:
        self.groups: dict[str, Any] = {}
        self.target_epochs: dict[str, int | None] = {}
        self.members: dict[tuple[str, str], Any] = {}
        self.targets: dict[tuple[str, str], Any] = {}
        self.current: dict[tuple[str, str], Any] = {}

    def record(self, key: ShareGroupKey, data: bytes | None) -> None:
        value = None if data is None else decode_consumer_group_value(key, data)
        if isinstance(key, ShareGroupMetadataKey):
            self.groups[key.group] = value
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            self.target_epochs[key.group] = None if value is None else value.assignment_epoch
        elif isinstance(key, ShareGroupMemberMetadataKey):
            self.members[(key.group, key.member_id)] = value
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            self.targets[(key.group, key.member_id)] = value
        else:
            self.current[(key.group, key.member_id)] = value

    def groups_built(self, now_ms: int) -> dict[str, ShareGroup]:
        built: dict[str, ShareGroup] = {}
        for group_id, value in self.groups.items():
            if value is None:
                continue
            group = ShareGroup(group_id, now_ms)
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
            member = ShareGroupMember(
                member_id,
                meta.rack_id,
                meta.client_id,
                meta.client_host,
                tuple(meta.subscribed_topic_names),
            )
            current = self.current.get((group_id, member_id))
            if current is not None:
                member = replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    assigned=assignment_of(current.assigned_partitions),
                )
            target = self.targets.get((group_id, member_id))
            if target is not None:
                found.target_assignment[member_id] = assignment_of(target.topic_partitions)
            found.members[member_id] = member
        for group in built.values():
            group.update_state(now_ms)
        return built


def group_tombstones(group: ShareGroup) -> list[Record]:
    out: list[Record] = []
    for member_id in group.members:
        out.extend(member_tombstones(group.group_id, member_id))
    out.append(record(ShareGroupTargetAssignmentMetadataKey(group.group_id), None))
    out.append(record(ShareGroupMetadataKey(group.group_id), None))
    return out
