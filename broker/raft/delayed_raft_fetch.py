"""DelayedRaftFetch: a replica's fetch of the metadata log, waiting on the quorum leader in
the Fetch purgatory (Kafka's raft leader keeps such fetches in a purgatory of its own)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from purgatory.broker.purgatory import DelayedOperation
from purgatory.protocol.messages import FetchPartitionV2
from purgatory.protocol.raft_messages import METADATA_TOPIC

if TYPE_CHECKING:
    from purgatory.broker.raft.quorum_replication import QuorumReplication

METADATA_PARTITION = (METADATA_TOPIC, 0)  # the watch key: the log is one partition


class DelayedRaftFetch(DelayedOperation):
    """A fetch that found nothing new. It completes (then is answered) when:

    A. this member no longer leads the epoch it was parked in;
    B. the log grew past the fetch offset;
    C. the high watermark moved past the one the fetcher reported having applied;
    D. the fetch's ``max_wait_ms`` passes (answered empty).
    """

    __slots__ = ("client", "created_ms", "epoch", "partition", "response")

    def __init__(
        self, client: QuorumReplication, partition: FetchPartitionV2, epoch: int, max_wait_ms: int
    ) -> None:
        super().__init__(max_wait_ms)
        self.client = client
        self.partition = partition
        self.epoch = epoch
        self.created_ms = client.scheduler.now_ms()
        self.response: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        if self.client._fetch_satisfied(self.partition, self.epoch):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if not self.response.done():
            client = self.client
            waited = client.scheduler.now_ms() - self.created_ms
            self.response.set_result(client.fetch_answer(self.partition, wait_ms=waited))
