"""OffsetCommits: what a group consumer commits (the commit half of Kafka's
ConsumerCoordinator).

A commit goes to the group's coordinator in the member's current generation when the group
assigned the partitions (-1 and no member id when they were assigned by hand), with this
consumer's name as metadata (the offset checker's owner). Auto-commit commits the
consumed positions every ``auto.commit.interval.ms``, each partition only when its position
moved since its last successful commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.consumer_coordinator import ConsumerCoordinator
from purgatory.clients.coordinator_client import CoordinatorClient
from purgatory.clients.subscription_state import TopicPartition
from purgatory.protocol.errors import ErrorCode, KafkaError

# Errors that mean the member's generation is over: it must rejoin before it commits.
_STALE_GENERATION = (
    ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.UNKNOWN_MEMBER_ID,
)


class OffsetCommits:
    def __init__(
        self,
        group: CoordinatorClient,
        owner: str,
        group_instance_id: str | None,
        log: Any,
    ) -> None:
        self.group = group
        self.owner = owner
        self.group_instance_id = group_instance_id
        self.log = log
        self.coordinator: ConsumerCoordinator | None = None  # set when the consumer subscribes
        self.committed: dict[TopicPartition, int] = {}  # the last offset committed, per partition
        self._auto: asyncio.Task[None] | None = None

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets``; raises KafkaError naming the first partition not committed
        (and, if the generation is over, asks the member to rejoin)."""
        if not offsets:
            return
        generation, member, instance = -1, "", None
        coordinator = self.coordinator
        if coordinator is not None:
            instance = self.group_instance_id
            if coordinator.in_generation:
                generation, member = coordinator.generation_id, coordinator.member_id
        errors = await self.group.commit(
            {tp: (o, self.owner) for tp, o in offsets.items()}, generation, member, instance
        )
        failed = {tp: code for tp, code in errors.items() if code}
        for tp, code in errors.items():
            if not code:
                self.committed[tp] = offsets[tp]
        if failed:
            (topic, index), code = next(iter(failed.items()))
            if coordinator is not None and code in _STALE_GENERATION:
                coordinator.rejoin_needed.set()
            raise KafkaError(
                code,
                f"{len(failed)} of {len(offsets)} partition(s) not committed for group "
                f"{self.group.group_id!r}; {topic}-{index} at {offsets[(topic, index)]}",
            )

    async def commit_moved(self, positions: dict[TopicPartition, int]) -> None:
        """Commit the positions that moved since their last commit; a failure is logged
        (the next auto-commit tries again)."""
        moved = {tp: o for tp, o in positions.items() if self.committed.get(tp) != o}
        if not moved:
            return
        try:
            await self.commit(moved)
        except (ConnectionClosed, KafkaError) as exc:
            self.log.warning("auto_commit_failed", error=str(exc))

    def start_auto_commit(
        self, interval_ms: int, positions: Callable[[], dict[TopicPartition, int]]
    ) -> None:
        """enable.auto.commit: ``commit_moved(positions())`` every ``interval_ms``."""
        if self._auto is None:
            self._auto = asyncio.ensure_future(self._auto_commit(interval_ms, positions))

    async def _auto_commit(
        self, interval_ms: int, positions: Callable[[], dict[TopicPartition, int]]
    ) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self.commit_moved(positions())

    async def stop_auto_commit(self) -> None:
        if self._auto is not None:
            self._auto.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._auto
            self._auto = None
