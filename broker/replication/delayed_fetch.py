"""DelayedFetch: a fetch waiting in the "Fetch" purgatory for ``min_bytes`` (long poll)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from purgatory.broker.purgatory import DelayedOperation
from purgatory.broker.replication.fetch_params import FetchParams, FetchResult
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.replication.replica_manager import ReplicaManager


class DelayedFetch(DelayedOperation):
    """A fetch that found fewer than ``min_bytes`` and may wait ``max_wait_ms``.

    It completes (then reads again and answers) when:

    A. this broker no longer leads one of the partitions, or leads it in another leader
       epoch than the fetcher knows (it is answered FENCED_LEADER_EPOCH);
    B. this broker no longer knows one of the partitions;
    C. a fetch offset is now outside the local log: beyond its end (truncation) or below
       its start (retention deleted it, or it moved to the remote tier);
    D. the bytes available across the partitions reach ``min_bytes``;
    E. ``max_wait_ms`` passes (expiration).

    Consumers count bytes up to the high watermark (read_committed ones up to the last
    stable offset), followers up to the log end.
    """

    __slots__ = (
        "completed_at",
        "created_at",
        "expired",
        "params",
        "replica_manager",
        "response",
    )

    def __init__(
        self, params: FetchParams, replica_manager: ReplicaManager, created_at: float
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.replica_manager = replica_manager
        self.created_at = created_at  # the scheduler's precise clock, seconds
        self.completed_at = 0.0
        self.expired = False
        self.response: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()

    @property
    def from_follower(self) -> bool:
        return self.params.replica_id >= 0

    def try_complete(self) -> bool:
        rm = self.replica_manager
        follower = self.from_follower
        committed = not follower and self.params.isolation_level == 1
        accumulated = 0
        for (topic, index), info in self.params.partitions:
            partition = rm.leader_partition(topic, index, info.current_leader_epoch)
            if isinstance(partition, ErrorCode):  # cases A and B
                return self.force_complete()
            log = partition.log
            if follower:
                end = log.log_end_offset
            else:
                end = partition.last_stable_offset if committed else partition.high_watermark
            offset = info.fetch_offset
            if offset > log.log_end_offset or offset < log.local_log_start_offset:
                return self.force_complete()  # case C
            if offset < end:
                accumulated += min(log.available_bytes(offset, end), info.max_bytes)
        if accumulated >= self.params.min_bytes:
            return self.force_complete()  # case D
        return False

    def on_complete(self) -> None:
        rm = self.replica_manager
        rm.parked.pop(self.response, None)
        if self.response.done():  # the client went away meanwhile
            return
        # Floor of the real wait: never more than the fetch waited (a client subtracting it
        # from its own round trip must not go negative), at most 1 ms less.
        wait_ms = rm.waited_ms(self.created_at)
        self.response.set_result(rm.fetch_response(self.params, wait_ms))
        # The network layer's callback (which queues the response) was added first, so this
        # one runs right after it: it measures completion -> response queued.
        self.completed_at = rm.scheduler.precise_s()
        self.response.add_done_callback(self._responded)

    def _responded(self, _: asyncio.Future[FetchResult]) -> None:
        if not self.expired:  # woken by an event (an append, a HW move), not by its timeout
            rm = self.replica_manager
            rm.replication_metrics.fetch_wake[self.from_follower].observe(
                rm.scheduler.precise_s() - self.completed_at
            )

    def on_expiration(self) -> None:
        self.expired = True
        self.replica_manager.fetch_expired(self.from_follower)
