"""Rebalancer: a group's way from one generation to the next.

A join, a leave or an expired session puts a group in PreparingRebalance: a
``DelayedJoin`` waits in the "Rebalance" purgatory for every member to rejoin (or for
the rebalance timeout). Then the next generation starts (CompletingRebalance), every
joined member gets its answer, and the group waits for the leader's assignment, which
makes it Stable once it is stored in ``__consumer_offsets``."""

from __future__ import annotations

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.coordinator.delayed_join import DelayedJoin, InitialDelayedJoin
from purgatory.broker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    SyncResult,
)
from purgatory.broker.coordinator.group_metadata_manager import GroupMetadataManager
from purgatory.broker.coordinator.member_sessions import MemberSessions
from purgatory.broker.purgatory import DelayedOperationPurgatory, Scheduler, SystemTimer
from purgatory.protocol.errors import ErrorCode


class Rebalancer:
    def __init__(
        self,
        config: BrokerConfig,
        scheduler: Scheduler,
        manager: GroupMetadataManager,
        sessions: MemberSessions,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.manager = manager
        self.sessions = sessions
        self.log = structlog.get_logger("group_coordinator").bind(broker_id=config.broker_id)
        self.purgatory: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
            "Rebalance", SystemTimer(scheduler)
        )
        self.rebalances = 0

    def maybe_prepare(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare(group, reason)

    def _prepare(self, group: GroupMetadata, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        operation: DelayedJoin
        if group.state is GroupState.EMPTY:
            delay = self.config["group.initial.rebalance.delay.ms"]
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            operation = InitialDelayedJoin(self, group, delay, remaining)
        else:
            operation = DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.wall_ms())
        self.rebalances += 1
        self.log.info(
            "rebalance_started",
            group=group.group_id,
            generation=group.generation_id,
            members=len(group.members),
            reason=reason,
        )
        self.watch(operation)

    def watch(self, operation: DelayedJoin) -> None:
        self.purgatory.try_complete_else_watch(operation, (operation.group.group_id,))

    def check(self, group: GroupMetadata) -> None:
        """Something the waiting rebalance of ``group`` depends on changed."""
        self.purgatory.check_and_complete(group.group_id)

    def cancel_all(self) -> None:
        self.purgatory.cancel_all()

    def on_complete_join(self, group: GroupMetadata) -> None:
        """The rebalance is over (everyone rejoined, or its time ran out): drop the members
        that did not rejoin and start the next generation."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            return  # the group died meanwhile (unloaded or deleted)
        for member in group.not_yet_rejoined():
            self.log.info(
                "member_removed", group=group.group_id, member=member.member_id, reason="no rejoin"
            )
            self.sessions.stop(group, member)
            group.remove(member.member_id)
        group.maybe_elect_new_joined_leader()
        group.init_next_generation(self.scheduler.wall_ms())
        if not group.members:  # now Empty
            self.manager.store_group(group, {})
            self.log.info("group_empty", group=group.group_id, generation=group.generation_id)
            return
        self.log.info(
            "generation_started",
            group=group.group_id,
            generation=group.generation_id,
            protocol=group.protocol_name,
            members=len(group.members),
        )
        for member in list(group.members.values()):
            group.complete_join(member, group.join_result(member))
            self.sessions.heard_from(group, member)
            member.is_new = False

    def store_assignment(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup: store the generation with its assignment, then answer
        every member waiting in SyncGroup."""
        unknown = sorted(set(assignments) - set(group.members))
        if unknown:  # Kafka ignores them too: only members get an assignment
            self.log.warning(
                "assignment_for_unknown_members", group=group.group_id, members=unknown
            )
        full = {m: assignments.get(m, b"") for m in group.members}
        generation = group.generation_id
        stored = self.manager.store_group(group, full)
        stored.add_done_callback(lambda f: self._stored(group, generation, full, f.result()))

    def _stored(
        self, group: GroupMetadata, generation: int, assignment: dict[str, bytes], error: int
    ) -> None:
        if group.state is not GroupState.COMPLETING_REBALANCE or group.generation_id != generation:
            return  # the group moved on while the assignment was being stored
        if error:
            self.log.warning("assignment_not_stored", group=group.group_id, error=error)
            self.reset_and_propagate_assignment_error(group, error)
            self.maybe_prepare(group, "the assignment could not be stored")
            return
        group.transition_to(GroupState.STABLE, self.scheduler.wall_ms())
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            self._propagate(
                group,
                member,
                SyncResult(
                    ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                ),
            )
        self.log.info("group_stable", group=group.group_id, generation=generation)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            self._propagate(group, member, SyncResult(error))

    def _propagate(self, group: GroupMetadata, member: MemberMetadata, result: SyncResult) -> None:
        """Answer a member's waiting SyncGroup; its session starts again from now (while it
        waited, its session could not expire)."""
        if member.awaiting_sync is not None:
            group.complete_sync(member, result)
            self.sessions.heard_from(group, member)
