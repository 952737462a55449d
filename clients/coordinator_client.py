"""CoordinatorClient: a client's way to its group's coordinator (FindCoordinator, then
the group's requests to that broker), and the committed offsets it keeps.

A coordinator that moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection)
is looked up again; one still loading its groups (COORDINATOR_LOAD_IN_PROGRESS) is asked
again after a backoff; both until the request timeout, as Kafka's clients do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from purgatory.clients.cluster import ClientCluster, TopicPartition, by_topic
from purgatory.clients.connection import ConnectionClosed
from purgatory.protocol import group_messages as g
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
COORDINATOR_BUSY = COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class CoordinatorClient:
    def __init__(
        self,
        cluster: ClientCluster,
        group_id: str,
        *,
        retry_backoff_ms: int = 100,
        timeout_ms: int = 30000,
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.retry_backoff_ms = retry_backoff_ms
        self.timeout_ms = timeout_ms
        self.node: int | None = None

    def coordinator_dead(self) -> None:
        self.node = None

    async def _find(self) -> int:
        response: g.FindCoordinatorResponse = await (await self.cluster.any_connection()).send(
            ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest(self.group_id)
        )
        if response.error_code:
            raise KafkaError(response.error_code, f"no coordinator for group {self.group_id!r} yet")
        return response.node_id

    async def send(
        self, key: ApiKey, body: Any, error_of: Callable[[Any], int], *, retry: bool = True
    ) -> Any:
        """Send a request about the group to its coordinator and return the response.
        ``error_of`` reads the response's coordinator-level error. With ``retry``, a
        coordinator that moved or is busy is retried until the timeout (then KafkaError);
        without, the response (or the lost connection) is the caller's to handle."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while True:
            try:
                if self.node is None:
                    self.node = await self._find()
                response = await (await self.cluster.connection(self.node)).send(key, body)
                code = error_of(response)
            except ConnectionClosed:
                self.coordinator_dead()
                if not retry or loop.time() >= deadline:
                    raise
            except KafkaError as exc:
                if exc.code in COORDINATOR_MOVED:
                    self.coordinator_dead()
                if not retry or exc.code not in COORDINATOR_BUSY or loop.time() >= deadline:
                    raise
            else:
                if code in COORDINATOR_MOVED:
                    self.coordinator_dead()
                if not retry or code not in COORDINATOR_BUSY:
                    return response
                if loop.time() >= deadline:
                    raise KafkaError(code, f"group {self.group_id!r}: {key.api_name}")
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def coordinator(self) -> int:
        """The coordinator's broker id, as the coordinator itself answers FindCoordinator
        (retried, like any request of the group, while none is available)."""
        response: g.FindCoordinatorResponse = await self.send(
            ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest(self.group_id), lambda r: r.error_code
        )
        if response.error_code:
            raise KafkaError(response.error_code, f"no coordinator for group {self.group_id!r}")
        return response.node_id

    # -- offsets ---------------------------------------------------------------------------

    async def commit(
        self,
        offsets: dict[TopicPartition, tuple[int, str | None]],
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit: the error of each partition (NONE when committed)."""
        request = g.OffsetCommitRequestV1(
            self.group_id,
            [
                m.OffsetCommitTopic(
                    t, [m.OffsetCommitPartition(p, *offsets[(t, p)]) for p in sorted(ps)]
                )
                for t, ps in by_topic(offsets).items()
            ],
            generation_id,
            member_id,
            group_instance_id,
        )
        response: m.OffsetCommitResponse = await self.send(
            ApiKey.OFFSET_COMMIT, request, _first_partition_error
        )
        return {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
        }

    async def committed(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """OffsetFetch: (offset, metadata) of each partition the group committed (``tps``
        None: every one)."""
        asked = None if tps is None else list(tps)
        request = g.OffsetFetchRequestV1(
            self.group_id,
            [m.OffsetFetchTopic(t, ps) for t, ps in by_topic(asked or []).items()],
            asked is None,
        )
        response: g.OffsetFetchResponseV1 = await self.send(
            ApiKey.OFFSET_FETCH, request, lambda r: r.error_code
        )
        if response.error_code:
            raise KafkaError(response.error_code, f"offsets of group {self.group_id!r}")
        return {
            (t.name, p.partition_index): (p.committed_offset, p.metadata)
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }


def _first_partition_error(response: m.OffsetCommitResponse) -> int:
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code:
                return part.error_code
    return ErrorCode.NONE
