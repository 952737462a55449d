"""ConsumerCoordinator: our consumer's membership of a group (Kafka's
ConsumerCoordinator and AbstractCoordinator, on an asyncio task).

The task joins the group (JoinGroup, once more with the member id the coordinator
hands out), and when this member is the leader, runs the chosen assignor over every
member's subscription; SyncGroup then brings this member's partitions. Between
rebalances it heartbeats every ``heartbeat_interval_ms``; a heartbeat answered
REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION makes it rejoin. Before
each rejoin the consumer gives up its partitions (``on_revoked``: it commits what it
consumed), after it takes the new ones (``on_assigned``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import structlog

from purgatory.clients.assignors import ASSIGNORS, PartitionAssignor
from purgatory.clients.cluster import ClientCluster, TopicPartition
from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.coordinator_client import CoordinatorClient
from purgatory.protocol import group_messages as g
from purgatory.protocol.api import ApiKey
from purgatory.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from purgatory.protocol.errors import ErrorCode, KafkaError

OnPartitions = Callable[[list[TopicPartition]], Awaitable[None]]
_FATAL = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
    }
)


class ConsumerCoordinator:
    def __init__(
        self,
        cluster: ClientCluster,
        coordinator: CoordinatorClient,
        topics: list[str],
        *,
        assignors: Sequence[str],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        group_instance_id: str | None,
        retry_backoff_ms: int,
        on_revoked: OnPartitions,
        on_assigned: OnPartitions,
    ) -> None:
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(
                f"partition.assignment.strategy must name some of {sorted(ASSIGNORS)}, "
                f"got {list(assignors)}"
            )
        self.cluster = cluster
        self.coordinator = coordinator
        self.group_id = coordinator.group_id
        self.topics = list(dict.fromkeys(topics))
        self.assignors: list[PartitionAssignor] = [ASSIGNORS[a]() for a in assignors]
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.group_instance_id = group_instance_id
        self.retry_backoff_ms = retry_backoff_ms
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader = False
        self.assignment: list[TopicPartition] = []
        self.rejoin_needed = asyncio.Event()
        self.rejoin_needed.set()
        self.joined = asyncio.Event()  # set while a generation's assignment is in effect
        self.fatal: KafkaError | None = None
        self.rebalances = 0
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("consumer_coordinator").bind(group=self.group_id)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    @property
    def in_generation(self) -> bool:
        return self.joined.is_set()

    # -- the coordination task ---------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            if self.rejoin_needed.is_set():
                try:
                    await self._rebalance()
                except (ConnectionClosed, KafkaError) as exc:
                    if isinstance(exc, KafkaError) and exc.code in _FATAL:
                        self.fatal = exc
                        self.joined.set()  # wake a waiting poll: it raises
                        return
                    self.log.info("rebalance_failed", error=str(exc))
                    await asyncio.sleep(self.retry_backoff_ms / 1000)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.heartbeat_interval_ms / 1000):
                    await self.rejoin_needed.wait()
            if not self.rejoin_needed.is_set():
                await self._heartbeat()

    async def _rebalance(self) -> None:
        if self.joined.is_set():
            await self.on_revoked(self.assignment)  # commits in the generation it leaves
            self.joined.clear()
            self.assignment = []
        join = await self._join()
        self.generation_id = join.generation_id
        self.protocol = join.protocol_name
        self.leader = join.leader == self.member_id
        assignments: list[g.SyncGroupAssignment] = []
        if self.leader and not join.skip_assignment:
            assignments = await self._assign(join.members, join.protocol_name or "")
        sync: g.SyncGroupResponse = await self.coordinator.send(
            ApiKey.SYNC_GROUP,
            g.SyncGroupRequest(
                self.group_id,
                self.generation_id,
                self.member_id,
                self.group_instance_id,
                assignments,
                PROTOCOL_TYPE,
                self.protocol,
            ),
            lambda r: r.error_code,
        )
        if sync.error_code:
            self._member_error(sync.error_code)
            raise KafkaError(sync.error_code, f"SyncGroup of group {self.group_id!r}")
        parts = decode_assignment(sync.assignment).partitions
        self.assignment = [(t, p) for t, ps in sorted(parts.items()) for p in sorted(ps)]
        self.rejoin_needed.clear()
        self.rebalances += 1
        self.log.info(
            "partitions_assigned",
            generation=self.generation_id,
            leader=self.leader,
            partitions=[f"{t}-{p}" for t, p in self.assignment],
        )
        await self.on_assigned(self.assignment)
        self.joined.set()

    async def _join(self) -> g.JoinGroupResponse:
        subscription = encode_subscription(Subscription(self.topics))
        while True:
            join: g.JoinGroupResponse = await self.coordinator.send(
                ApiKey.JOIN_GROUP,
                g.JoinGroupRequest(
                    self.group_id,
                    self.session_timeout_ms,
                    self.rebalance_timeout_ms,
                    self.member_id,
                    self.group_instance_id,
                    PROTOCOL_TYPE,
                    [g.JoinGroupProtocol(a.name, subscription) for a in self.assignors],
                ),
                lambda r: r.error_code,
            )
            if join.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if join.error_code:
                self._member_error(join.error_code)
                raise KafkaError(join.error_code, f"JoinGroup of group {self.group_id!r}")
            self.member_id = join.member_id
            return join

    def _member_error(self, code: int) -> None:
        """What an error about this member means for the next join."""
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.generation_id = -1
        self.rejoin_needed.set()

    async def _assign(
        self, members: list[g.JoinGroupMember], protocol: str
    ) -> list[g.SyncGroupAssignment]:
        """The leader's work: the chosen assignor over every member's subscription."""
        assignor = next(a for a in self.assignors if a.name == protocol)
        subscriptions = {x.member_id: decode_subscription(x.metadata) for x in members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        await self.cluster.refresh(topics)
        counts = {t: len(self.cluster.partitions_for(t) or []) for t in topics}
        result = assignor.assign({t: n for t, n in counts.items() if n}, subscriptions)
        return [g.SyncGroupAssignment(mid, encode_assignment(a)) for mid, a in result.items()]

    async def _heartbeat(self) -> None:
        try:
            response: g.HeartbeatResponse = await self.coordinator.send(
                ApiKey.HEARTBEAT,
                g.HeartbeatRequest(
                    self.group_id, self.generation_id, self.member_id, self.group_instance_id
                ),
                lambda r: r.error_code,
                retry=False,
            )
        except (ConnectionClosed, KafkaError) as exc:
            self.log.info("heartbeat_failed", error=str(exc))
            return
        code = response.error_code
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self.fatal = KafkaError(code, f"another consumer took {self.group_instance_id!r}")
            self.rejoin_needed.clear()
            self.joined.set()
            if self._task is not None:
                self._task.cancel()
        elif code in (
            ErrorCode.REBALANCE_IN_PROGRESS,
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
        ):
            self.log.info("rejoining", reason=ErrorCode(code).name)
            self._member_error(code)

    # -- leaving -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop the task; a dynamic member leaves the group at once (LeaveGroup), so the
        others rebalance without waiting for its session to expire. A static member does
        not leave: it keeps its place for its session timeout, to come back to it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        if self.member_id and self.group_instance_id is None:
            with contextlib.suppress(ConnectionClosed, KafkaError):
                await self.coordinator.send(
                    ApiKey.LEAVE_GROUP,
                    g.LeaveGroupRequest(self.group_id, [g.LeaveGroupMember(self.member_id)]),
                    lambda r: r.error_code,
                    retry=False,
                )
        self.member_id = ""
        self.joined.clear()
