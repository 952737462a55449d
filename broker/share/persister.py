"""DefaultStatePersister (Kafka's, in small): how a partition leader reads and writes its
share partitions' state, kept by the share coordinator in ``__share_group_state``.

Each (group, topic id, partition) has one coordinator: the leader of its partition of the
state topic (ShareCoordinator.find_coordinator, the topic made on the first ask). This broker's own ShareCoordinator is called directly when it leads that
partition, another broker's over the inter-broker channel (ReadShareGroupState,
WriteShareGroupState). NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS and a coordinator that cannot be reached are retried after a
short backoff until a deadline (then the last error is the answer); any other error ends
it, FENCED_LEADER_EPOCH among them (this broker no longer leads the data partition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from purgatory.broker.coordinator.share.share_group_offset import (
    NO_START_OFFSET,
    PersisterStateBatch,
    SharePartitionKey,
)
from purgatory.broker.share.share_partition import PersistedState, StateBatch
from purgatory.clients.connection import ConnectionClosed
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from purgatory.broker.coordinator.share.share_coordinator import ShareCoordinator
    from purgatory.broker.purgatory import Scheduler

# The coordinator is moving, loading or not there yet: ask again.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

# (node, api key, request, timeout ms) -> the response: the inter-broker channel's send.
Send = Callable[[int, ApiKey, Any, int], Awaitable[Any]]


class DefaultStatePersister:
    """The share coordinator's client on a partition leader (SharePartitionManager's
    StatePersister). ``timeout_ms`` bounds a read or write with its retries;
    ``request_timeout_ms`` one request to another broker."""

    def __init__(
        self,
        broker_id: int,
        coordinator: ShareCoordinator,
        send: Send,
        scheduler: Scheduler,
        timeout_ms: int = 15_000,
        backoff_ms: int = 50,
        request_timeout_ms: int = 5_000,
    ) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.send = send
        self.scheduler = scheduler
        self.timeout_ms = timeout_ms
        self.backoff_ms = backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.log = structlog.get_logger("share_persister").bind(broker_id=broker_id)

    def read_now(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None] | None:
        """``read``'s answer when this broker's own share coordinator has it loaded (no
        waiting: a new SharePartition is then ACTIVE at once), else None."""
        key = SharePartitionKey(group_id, topic_id, partition)
        code, node = self.coordinator.find_coordinator(key)
        if code != ErrorCode.NONE or node != self.broker_id:
            return None
        answer = self._read_local(key, leader_epoch)
        return None if answer[0] in RETRIABLE else answer

    async def read(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None]:
        """(error, the state; None when nothing was ever written) of a share partition."""
        key = SharePartitionKey(group_id, topic_id, partition)
        deadline = self.scheduler.now_ms() + self.timeout_ms
        while True:
            code, node = self.coordinator.find_coordinator(key)
            state: PersistedState | None = None
            if code == ErrorCode.NONE and node == self.broker_id:
                code, state = self._read_local(key, leader_epoch)
            elif code == ErrorCode.NONE:
                request = ib.ReadShareGroupStateRequest(group_id, topic_id, partition, leader_epoch)
                response = await self._remote(node, ApiKey.READ_SHARE_GROUP_STATE, request)
                if response is None:
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                else:
                    code = response.error_code
                    if code == ErrorCode.NONE and response.start_offset != NO_START_OFFSET:
                        state = PersistedState(
                            response.state_epoch,
                            response.start_offset,
                            list(response.state_batches),
                        )
            if code == ErrorCode.NONE:
                return code, state
            if not await self._backoff(code, deadline):
                return code, None

    async def write(
        self,
        group_id: str,
        topic_id: str,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> int:
        """The error code once the state is stored (NONE), or why it could not be."""
        key = SharePartitionKey(group_id, topic_id, partition)
        deadline = self.scheduler.now_ms() + self.timeout_ms
        while True:
            code, node = self.coordinator.find_coordinator(key)
            if code == ErrorCode.NONE and node == self.broker_id:
                code = await self.coordinator.write_state(
                    key,
                    state_epoch,
                    leader_epoch,
                    start_offset,
                    [PersisterStateBatch(*b) for b in batches],
                )
            elif code == ErrorCode.NONE:
                request = ib.WriteShareGroupStateRequest(
                    group_id,
                    topic_id,
                    partition,
                    state_epoch,
                    leader_epoch,
                    start_offset,
                    list(batches),
                )
                response = await self._remote(node, ApiKey.WRITE_SHARE_GROUP_STATE, request)
                code = (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE if response is None else response.error_code
                )
            if code == ErrorCode.NONE:
                return code
            if not await self._backoff(code, deadline):
                return code

    # -- internals ---------------------------------------------------------------------------

    def _read_local(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[int, PersistedState | None]:
        code, offset = self.coordinator.read_state(key, leader_epoch)
        if offset is None:
            return code, None
        return code, PersistedState(
            offset.state_epoch, offset.start_offset, [b for b in offset.state_batches]
        )

    async def _remote(self, node: int, api_key: ApiKey, request: Any) -> Any:
        """Another broker's answer, None when it could not be reached or did not answer."""
        try:
            return await self.send(node, api_key, request, self.request_timeout_ms)
        except (ConnectionError, ConnectionClosed, OSError, KafkaError) as exc:
            self.log.debug("share_coordinator_unreachable", node=node, error=str(exc))
            return None

    async def _backoff(self, code: int, deadline_ms: int) -> bool:
        """Wait a backoff before retrying ``code``; False when it is not retriable or the
        deadline passed."""
        now = self.scheduler.now_ms()
        if code not in RETRIABLE or now + self.backoff_ms > deadline_ms:
            return False
        waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.scheduler.call_at(now + self.backoff_ms, lambda: _resolve(waited))
        await waited
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
