"""Classic members of KIP-848 consumer groups (Kafka's online migration): the classic
protocol's JoinGroup, SyncGroup, Heartbeat and LeaveGroup for a member inside a consumer
group (Kafka's ``classicGroup*ToConsumerGroup``), and when a group changes kind with
members in it (``group.consumer.migration.policy``). The coordinator assigns for these
members as for the others; REBALANCE_IN_PROGRESS tells one to rejoin when it must revoke
or may take more, and SyncGroup hands it its part in the consumer protocol's shape."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from purgatory.broker.coordinator import consumer_group_records as records
from purgatory.broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
)
from purgatory.broker.coordinator.consumer_group_checks import (
    HeartbeatRequest,
    Refused,
    join_key,
    new_member_id,
    sync_key,
)
from purgatory.broker.coordinator.consumer_group_migration import (
    MigrationRefused,
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from purgatory.broker.coordinator.group_metadata import GroupMetadata, JoinResult, SyncResult
from purgatory.broker.coordinator.group_records import Record
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.coordinator.consumer_group_coordinator import (
        ConsumerGroupCoordinator,
    )


class ClassicMembers:
    def __init__(self, coordinator: ConsumerGroupCoordinator) -> None:
        self.coordinator = coordinator

    def join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """Kafka's ``classicGroupJoinToConsumerGroup``: a classic member joins (or
        rejoins) a consumer group. Its subscription and owned partitions come from its
        consumer protocol metadata; it gets its assignment in SyncGroup, as a follower (no
        member leads: the coordinator assigns)."""
        group_id = group.group_id
        unknown = not member_id
        new_id = member_id or new_member_id()
        try:
            if (
                new_id not in group.members
                and len(group.members) >= self.coordinator.config["group.consumer.max.size"]
            ):
                raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
            if not group.supports_classic_protocols(protocol_type, protocols):
                raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
            if unknown and instance_id is None and require_known_member_id:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            # Imported when first needed: kio's schemas take a broker's start ~0.15 s.
            from purgatory.protocol.consumer_protocol import (
                ConsumerProtocolError,
                decode_subscription,
            )

            try:
                subscription = decode_subscription(protocols[0][1])
            except ConsumerProtocolError:
                raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "") from None
            out: list[Record] = []
            if instance_id is None:
                member = group.members.get(new_id) or ConsumerGroupMember(new_id)
            else:
                request = HeartbeatRequest(group_id, new_id, -1, instance_id)
                member = self.coordinator.static_member(
                    group, new_id, request, unknown, out, classic=True
                )
        except Refused as refused:
            return JoinResult(refused.error, member_id)
        topics = self.coordinator.metadata.topics
        owned = [
            (topics[name].topic_id, ps)
            for name, ps in subscription.owned_partitions.items()
            if name in topics
        ]
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscription.topics),
            client_id=client_id,
            client_host=client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        )
        updated = self.coordinator.update_member(group, member, updated, owned, out)
        assert updated.classic is not None
        self.coordinator.timer.cancel(join_key(group_id, new_id))
        self.coordinator.schedule_session(group_id, new_id, updated.classic)
        self.coordinator.timer.schedule(
            sync_key(group_id, new_id),
            rebalance_timeout_ms,
            lambda: self.coordinator.fence_by_timer(group_id, new_id, "it did not sync in time"),
        )
        result = JoinResult(
            ErrorCode.NONE,
            new_id,
            updated.member_epoch,
            group.protocol_type,
            protocols[0][0],
            "",
            [],
        )
        return self.coordinator.stored(group_id, out, result, lambda code: JoinResult(code, new_id))

    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's assignment, as the
        consumer protocol writes one."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if member is None or member.classic is None:
            return SyncResult(error)
        name = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._schedule_join_timeout(group, member)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.coordinator.timer.cancel(sync_key(group.group_id, member.member_id))
        self.coordinator.schedule_session(group.group_id, member.member_id, member.classic)
        from purgatory.protocol.consumer_protocol import Assignment, encode_assignment

        names = self.coordinator.metadata.topic_names
        partitions = {names[t]: sorted(ps) for t, ps in member.assigned.items() if t in names}
        assignment = encode_assignment(Assignment(partitions))
        return SyncResult(ErrorCode.NONE, assignment, group.protocol_type, name)

    def heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when the
        member must rejoin (a newer group epoch, partitions to revoke, or partitions it
        waited for that are free now)."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if member is None or member.classic is None:
            return error
        self.coordinator.schedule_session(group.group_id, member.member_id, member.classic)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member)
            )
        ):
            self._schedule_join_timeout(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[int]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: one error per leaving member,
        answered at once (the records follow; a member whose leave is lost with its
        coordinator is fenced by its session instead)."""
        out: list[Record] = []
        errors: list[int] = []
        for member_id, instance in members:
            if instance is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance)
                if member is not None and member_id and member.member_id != member_id:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
            if member is None or member.classic is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self.coordinator.log.info(
                "consumer_group_member_left", group=group.group_id, member=member_id
            )
            if self.downgrade_allowed(group, member.member_id):
                self.downgrade(group, member.member_id, out)
                errors.append(ErrorCode.NONE)
                continue
            self.coordinator.remove(group, member, out)
            errors.append(ErrorCode.NONE)
        if out and isinstance(self.coordinator.manager.groups.get(group.group_id), ConsumerGroup):
            self.coordinator.refresh_subscriptions(group)
            self.coordinator.bump(group, out)
            group.update_state(self.coordinator.now())
        if out:
            self.coordinator.manager.append_in_background(group.group_id, out)
        return errors

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> tuple[ConsumerGroupMember | None, int]:
        """Kafka's ``validateConsumerGroupMember`` for a classic request: the member, or
        None with why (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION)."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return None, ErrorCode.ILLEGAL_GENERATION
        return member, ErrorCode.NONE

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout."""
        key = join_key(group.group_id, member.member_id)
        if not self.coordinator.timer.is_scheduled(key):
            group_id, member_id = group.group_id, member.member_id
            self.coordinator.timer.schedule(
                key,
                member.rebalance_timeout_ms,
                lambda: self.coordinator.fence_by_timer(
                    group_id, member_id, "it did not rejoin in time"
                ),
            )

    def upgrade_allowed(self, classic: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        if self.coordinator.config["group.consumer.migration.policy"] not in (
            "upgrade",
            "bidirectional",
        ):
            why = "the online upgrade is disabled"
        elif classic.protocol_type != ConsumerGroup.protocol_type:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.coordinator.config["group.consumer.max.size"]:
            why = "the group size exceeds the consumer group maximum size"
        else:
            return True
        self.coordinator.log.info("classic_group_not_upgraded", group=classic.group_id, why=why)
        return False

    def upgrade(self, classic: GroupMetadata, out: list[Record]) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup``: the classic group with members becomes a
        consumer group; its members rejoin the ongoing rebalance, if any, and go on with
        the classic protocol."""
        try:
            group = consumer_group_from_classic(
                classic, self.coordinator.metadata.topics, self.coordinator.now()
            )
        except MigrationRefused as exc:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, str(exc)) from None
        self.coordinator.retire_classic(classic)
        self.coordinator.refresh_subscriptions(group)
        out.append(records.classic_group_tombstone(classic.group_id))
        out.extend(records.all_records(group))
        self.coordinator.manager.groups[group.group_id] = group
        for member in group.members.values():
            self.coordinator.schedule_session(group.group_id, member.member_id, member.classic)
        group.update_state(self.coordinator.now())
        self.coordinator.log.info(
            "classic_group_upgraded", group=group.group_id, members=len(group.members)
        )
        return group

    def downgrade_allowed(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``."""
        return (
            group.all_classic_except(leaving_member_id)
            and len(group.members) > 1
            and self.coordinator.config["group.consumer.migration.policy"]
            in ("downgrade", "bidirectional")
            and len(group.members) - 1 <= self.coordinator.config["group.max.size"]
        )

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str, out: list[Record]) -> None:
        """Kafka's ``convertToClassicGroup``: the leaving member goes, the others, all
        classic, form a classic group that rebalances."""
        classic = classic_group_from_consumer(
            group, leaving_member_id, self.coordinator.metadata.topic_names, self.coordinator.now()
        )
        out.extend(records.group_tombstones(group))
        group.state = ConsumerGroupState.DEAD
        self.coordinator.group_unloaded(group)
        self.coordinator.manager.groups[group.group_id] = classic
        self.coordinator.log.info("consumer_group_downgraded", group=group.group_id)
        self.coordinator.adopt_classic(
            classic, f"Downgrade group {group.group_id} from consumer to classic."
        )
