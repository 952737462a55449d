"""An in-memory broker core: a ReplicaManager on a manual clock with a fake controller
channel, no sockets. Broker 0 leads every partition; followers are simulated by their
fetches (``follower_fetch``), so Kafka-layer rules run the way the engine's do: time moves
only when a test says so."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from purgatory.broker.controller.metadata_cache import (
    LeaderAndIsr,
    MetadataCache,
    partition_changes,
)
from purgatory.broker.log.leader_epoch_cache import EpochEndOffset
from purgatory.broker.metadata.metadata_image import BrokerRegistration, MetadataImage
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.broker.purgatory import ManualScheduler
from purgatory.broker.replication.delayed_produce import PartitionResponse
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchResult,
    PartitionFetchInfo,
    TopicPartition,
)
from purgatory.broker.replication.partition import Partition
from purgatory.broker.replication.replica_fetcher import EpochAsk, LeaderEndPoint
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.records import encode_batch
from tests.support import broker_config

LEADER = 0
MEMBERS = "0@127.0.0.1:1,1@127.0.0.1:2,2@127.0.0.1:3"


class SilentLeader:
    """The leader a partition moved to (tests move leadership away): it never answers."""

    async def fetch(self, params: FetchParams) -> FetchResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def offsets_for_leader_epoch(
        self, asks: list[EpochAsk]
    ) -> dict[TopicPartition, tuple[int, EpochEndOffset]]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self) -> None:
        pass


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualScheduler(start_ms=1_000)
        self.config = broker_config(LEADER, members=MEMBERS, **config)
        self.metadata = MetadataCache(self.config.members(), "PLAINTEXT")
        self.metadata.controller_id = LEADER
        self.alter_requests: list[LeaderAndIsr] = []
        self.replica_manager = ReplicaManager(
            self.config,
            self.metadata,
            BrokerMetrics(LEADER),
            self.clock,
            self._alter_isr,
            self._leader_endpoint,
        )
        self.topics: dict[str, ib.TopicState] = {}
        self.leaders: dict[int, LeaderEndPoint] = {}  # what followers fetch from (else silence)
        self.epoch = 0
        self.replica_manager.start()  # its periodic tasks run on the manual clock

    # -- the controller's side ---------------------------------------------------------

    async def _alter_isr(self, topic: str, index: int, proposed: LeaderAndIsr) -> LeaderAndIsr:
        """The controller accepts every ISR change and pushes the new picture."""
        self.alter_requests.append(proposed)
        state = self.topics[topic].partitions[index]
        self.set_partition(topic, index, isr=proposed.isr)
        new = self.topics[topic].partitions[index]
        assert new.partition_epoch == state.partition_epoch + 1
        return LeaderAndIsr(new.leader_id, new.leader_epoch, new.isr, new.partition_epoch)

    def _leader_endpoint(self, broker_id: int) -> LeaderEndPoint:
        return self.leaders.get(broker_id) or SilentLeader()

    def create(self, topic: str, partitions: int = 1, **configs: str) -> None:
        self.topics[topic] = ib.TopicState(
            topic,
            uuid.uuid4().hex,
            dict(configs),
            [ib.PartitionState(p, LEADER, 0, [0, 1, 2], [0, 1, 2]) for p in range(partitions)],
        )
        self.publish()

    def delete(self, topic: str) -> None:
        del self.topics[topic]
        self.publish()

    def set_partition(self, topic: str, index: int, **changes: Any) -> None:
        """Change a partition's state as the controller would (a new partition epoch)."""
        old = self.topics[topic]
        state = old.partitions[index]
        fields = {f: getattr(state, f) for f in state.__struct_fields__} | changes
        fields["partition_epoch"] = state.partition_epoch + 1
        partitions = list(old.partitions)  # a new picture: the cache keeps the old one
        partitions[index] = ib.PartitionState(**fields)
        self.topics[topic] = ib.TopicState(old.name, old.topic_id, old.configs, partitions)
        self.publish()

    def publish(self) -> None:
        """The topics as the next committed metadata image, with every broker registered
        and unfenced."""
        self.epoch += 1
        image = MetadataImage(
            self.epoch,
            {b: BrokerRegistration(b, "harness", b, "127.0.0.1", b + 1, False) for b in (0, 1, 2)},
            dict(self.topics),
            {t.topic_id: name for name, t in self.topics.items()},
        )
        changes = partition_changes(self.metadata.image, image)
        self.metadata.image = image
        self.replica_manager.apply(changes)

    # -- clients -------------------------------------------------------------------------

    def partition(self, topic: str, index: int = 0) -> Partition:
        return self.replica_manager.partitions[(topic, index)]

    def produce(
        self, topic: str, values: list[bytes], *, acks: int = -1, timeout_ms: int = 30_000
    ) -> asyncio.Future[PartitionResponse]:
        """Append one batch to partition 0; its outcome (a done future unless it waits)."""
        batch = encode_batch([(None, v) for v in values], timestamp_ms=self.clock.wall_ms())
        return self.produce_batch(topic, batch, acks=acks, timeout_ms=timeout_ms)

    def produce_batch(
        self, topic: str, batch: bytes, *, acks: int = -1, timeout_ms: int = 30_000
    ) -> asyncio.Future[PartitionResponse]:
        """Append an encoded batch (ours or Kafka's v2) to partition 0."""
        responses, done = self.replica_manager.append_records(
            timeout_ms, acks, [((topic, 0), batch)]
        )
        response = responses[0][1]
        outcome: asyncio.Future[PartitionResponse] = asyncio.get_running_loop().create_future()
        if done is None:
            outcome.set_result(response)
        else:
            done.add_done_callback(lambda _: outcome.set_result(response))
        return outcome

    def fetch(
        self,
        topic: str,
        offset: int,
        *,
        replica_id: int = -1,
        min_bytes: int = 1,
        max_wait_ms: int = 500,
        leader_epoch: int = -1,
        isolation_level: int = 0,
    ) -> asyncio.Future[FetchResult]:
        """A fetch of partition 0; its result (a done future unless it waits)."""
        params = FetchParams(
            replica_id,
            max_wait_ms,
            min_bytes,
            1 << 20,
            (((topic, 0), PartitionFetchInfo(offset, 1 << 20, leader_epoch)),),
            isolation_level=isolation_level,
        )
        result = self.replica_manager.fetch_messages(params)
        if isinstance(result, FetchResult):
            done: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()
            done.set_result(result)
            return done
        return result

    def follower_fetch(self, follower: int, topic: str, offset: int) -> Any:
        """Follower ``follower`` says it has everything below ``offset`` (its log end)."""
        return self.fetch(topic, offset, replica_id=follower, max_wait_ms=0)

    async def advance(self, ms: int) -> None:
        """Move the clock, then let the loop run what that completed (futures' callbacks,
        AlterPartition round trips)."""
        self.clock.advance(ms)
        for _ in range(5):
            await asyncio.sleep(0)

    async def settle(self) -> None:
        await self.advance(0)

    async def shutdown(self) -> None:
        await self.replica_manager.shutdown()


def error_of(outcome: PartitionResponse | FetchResult) -> int:
    """The error of a produce outcome, or of a fetch's first partition."""
    if isinstance(outcome, FetchResult):
        return outcome.partitions[0][1].error
    return outcome.error


def records_of(result: FetchResult) -> bytes:
    return result.partitions[0][1].records
