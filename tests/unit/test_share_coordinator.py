"""The share coordinator on a manual clock: a ReplicaManager holding ``__share_group_state``
(the harness's broker 0 leads it), writes appended with acks=-1 and applied once stored,
fencing by leader and state epoch, and the state replayed from the log when leadership of
its partition moves away and back. No sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.api.share_state_requests import (
    read_response,
    read_share_group_state,
    state_of,
    write_request,
    write_share_group_state,
)
from purgatory.broker.controller.internal_topics import SHARE_GROUP_STATE_TOPIC
from purgatory.broker.coordinator.group_records import java_hash
from purgatory.broker.coordinator.share.share_coordinator import ShareCoordinator
from purgatory.broker.coordinator.share.share_group_offset import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    kafka_uuid_string,
)
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode as E
from tests.harness import Harness

TOPIC_ID = "0123456789abcdef0123456789abcdef"
KEY = SharePartitionKey("g", TOPIC_ID, 0)
BATCHES = [
    PersisterStateBatch(10, 12, ACKNOWLEDGED, 1),
    PersisterStateBatch(13, 13, AVAILABLE, 2),
    PersisterStateBatch(14, 15, ARCHIVED, 5),
]


class Coordinator:
    def __init__(self, **config: Any) -> None:
        self.h = Harness(**{"share.coordinator.state.topic.num.partitions": 1} | config)
        self.coordinator = ShareCoordinator(
            self.h.config, self.h.replica_manager, self.h.metadata, self.h.clock, lambda: None
        )
        # Made after the coordinator: the replica manager tells it it leads the partition.
        self.h.create(SHARE_GROUP_STATE_TOPIC, 1)
        self.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, isr=[0])

    @property
    def leader_epoch(self) -> int:
        return self.h.partition(SHARE_GROUP_STATE_TOPIC).leader_epoch

    async def write(
        self,
        key: SharePartitionKey = KEY,
        *,
        state_epoch: int = 0,
        leader_epoch: int = 1,
        start_offset: int = 10,
        batches: list[PersisterStateBatch] = BATCHES,
    ) -> int:
        future = self.coordinator.write_state(key, state_epoch, leader_epoch, start_offset, batches)
        await self.h.settle()
        assert future.done()
        return future.result()

    async def move_leadership_away_and_back(self) -> None:
        self.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, leader_id=1, isr=[1])
        assert self.coordinator.ownership_error(KEY) == E.NOT_COORDINATOR
        self.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, leader_id=0, isr=[0])


@pytest.fixture
async def c() -> AsyncIterator[Coordinator]:
    coordinator = Coordinator()
    await coordinator.h.settle()  # the state partition loads
    yield coordinator
    coordinator.coordinator.shutdown()
    await coordinator.h.shutdown()


async def test_nothing_written_reads_as_none_and_a_write_reads_back(c: Coordinator) -> None:
    assert c.coordinator.read_state(KEY, 1) == (E.NONE, None)
    assert await c.write() == E.NONE
    assert c.coordinator.read_state(KEY, 1) == (E.NONE, ShareGroupOffset(0, 1, 10, BATCHES))
    # The next write replaces the state as a whole.
    assert await c.write(start_offset=16, batches=[]) == E.NONE
    assert c.coordinator.read_state(KEY, 1) == (E.NONE, ShareGroupOffset(0, 1, 16, []))
    assert c.coordinator.read_state(KEY._replace(partition=1), 1) == (E.NONE, None)


async def test_a_write_is_applied_only_once_the_in_sync_replicas_have_it() -> None:
    c = Coordinator()
    c.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, isr=[0, 1])
    await c.h.settle()
    future = c.coordinator.write_state(KEY, 0, 1, 10, BATCHES)
    await c.h.settle()
    assert not future.done()
    assert c.coordinator.read_state(KEY, 1) == (E.NONE, None)
    end = c.h.partition(SHARE_GROUP_STATE_TOPIC).log.log_end_offset
    c.h.follower_fetch(1, SHARE_GROUP_STATE_TOPIC, end)  # the follower has it: the HW moves
    await c.h.settle()
    assert future.result() == E.NONE
    assert c.coordinator.read_state(KEY, 1)[1] == ShareGroupOffset(0, 1, 10, BATCHES)
    c.coordinator.shutdown()
    await c.h.shutdown()


async def test_an_older_leader_epoch_is_fenced_by_a_write_or_a_read_of_a_newer(
    c: Coordinator,
) -> None:
    assert await c.write(leader_epoch=3) == E.NONE
    assert await c.write(leader_epoch=2, start_offset=99) == E.FENCED_LEADER_EPOCH
    assert c.coordinator.read_state(KEY, 2) == (E.FENCED_LEADER_EPOCH, None)
    # A new leader of the data partition reads first: its predecessor can write no more.
    assert c.coordinator.read_state(KEY, 5)[0] == E.NONE
    assert await c.write(leader_epoch=4, start_offset=99) == E.FENCED_LEADER_EPOCH
    assert await c.write(leader_epoch=5, start_offset=20, batches=[]) == E.NONE
    assert c.coordinator.read_state(KEY, 5)[1] == ShareGroupOffset(0, 5, 20, [])
    # -1 keeps the stored leader epoch (no fencing).
    assert await c.write(leader_epoch=-1, start_offset=21, batches=[]) == E.NONE
    assert c.coordinator.read_state(KEY, -1)[1] == ShareGroupOffset(0, 5, 21, [])


async def test_an_older_state_epoch_is_fenced(c: Coordinator) -> None:
    assert await c.write(state_epoch=2) == E.NONE
    assert await c.write(state_epoch=1, start_offset=99) == E.FENCED_STATE_EPOCH
    assert await c.write(state_epoch=-1, start_offset=11) == E.NONE
    assert c.coordinator.read_state(KEY, 1)[1] == ShareGroupOffset(2, 1, 11, BATCHES)


async def test_bad_keys_are_invalid_requests(c: Coordinator) -> None:
    assert await c.write(KEY._replace(partition=-1)) == E.INVALID_REQUEST
    assert await c.write(KEY._replace(group_id="")) == E.INVALID_REQUEST
    assert c.coordinator.read_state(KEY._replace(topic_id=""), 1)[0] == E.INVALID_REQUEST


async def test_the_state_is_replayed_from_the_log_when_leadership_comes_back() -> None:
    # A small load buffer: the replay takes several steps, loading meanwhile.
    c = Coordinator(**{"share.coordinator.load.buffer.size": 1})
    await c.h.settle()
    others = [SharePartitionKey(f"g{i}", TOPIC_ID, i) for i in range(5)]
    for i, key in enumerate(others):
        assert await c.write(key, start_offset=i) == E.NONE
    assert await c.write(leader_epoch=7) == E.NONE
    assert await c.write(leader_epoch=7, start_offset=30, batches=BATCHES[:1]) == E.NONE
    assert await c.coordinator.delete_state("g0", [others[0]]) == E.NONE
    await c.move_leadership_away_and_back()
    assert c.coordinator.read_state(KEY, 7) == (E.COORDINATOR_LOAD_IN_PROGRESS, None)
    assert await c.write(leader_epoch=7) == E.COORDINATOR_LOAD_IN_PROGRESS
    await c.h.settle()
    for _ in range(20):
        if c.coordinator.ownership_error(KEY) == E.NONE:
            break
        await c.h.settle()
    assert c.coordinator.read_state(KEY, 7) == (E.NONE, ShareGroupOffset(0, 7, 30, BATCHES[:1]))
    assert c.coordinator.read_state(others[0], 1) == (E.NONE, None)  # deleted
    for i, key in enumerate(others[1:], 1):
        assert c.coordinator.read_state(key, 1)[1] == ShareGroupOffset(0, 1, i, BATCHES)
    # The leader epochs written are the fence again after the load.
    assert await c.write(leader_epoch=6) == E.FENCED_LEADER_EPOCH
    c.coordinator.shutdown()
    await c.h.shutdown()


async def test_a_write_in_flight_when_leadership_moves_is_not_applied() -> None:
    c = Coordinator()
    c.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, isr=[0, 1])
    await c.h.settle()
    future = c.coordinator.write_state(KEY, 0, 1, 10, BATCHES)
    await c.h.settle()
    c.h.set_partition(SHARE_GROUP_STATE_TOPIC, 0, leader_id=1, isr=[1])
    await c.h.settle()
    assert future.result() == E.NOT_COORDINATOR
    assert c.coordinator.states == {}
    c.coordinator.shutdown()
    await c.h.shutdown()


async def test_the_handlers_carry_the_state_as_plain_values(c: Coordinator) -> None:
    request = write_request(KEY, 0, 1, 10, BATCHES)
    deferred = write_share_group_state(c.coordinator, request)
    await c.h.settle()
    assert deferred.to_response(deferred.future.result()) == ib.WriteShareGroupStateResponse(E.NONE)
    read = ib.ReadShareGroupStateRequest("g", TOPIC_ID, 0, 1)
    response = read_share_group_state(c.coordinator, read)
    assert response.state_batches == [(10, 12, 2, 1), (13, 13, 0, 2), (14, 15, 4, 5)]
    assert state_of(response) == (E.NONE, ShareGroupOffset(0, 1, 10, BATCHES))
    nothing = read_share_group_state(
        c.coordinator, ib.ReadShareGroupStateRequest("h", TOPIC_ID, 0, 1)
    )
    assert nothing.start_offset == -1 and state_of(nothing) == (E.NONE, None)
    assert state_of(read_response(E.NOT_COORDINATOR, None)) == (E.NOT_COORDINATOR, None)


async def test_a_share_partition_is_placed_as_kafka_places_it() -> None:
    # Kafka's Uuid.ONE_UUID (0, 1) prints as AAAAAAAAAAAAAAAAAAAAAQ.
    assert kafka_uuid_string("00" * 15 + "01") == "AAAAAAAAAAAAAAAAAAAAAQ"
    h = Harness(**{"share.coordinator.state.topic.num.partitions": 50})
    coordinator = ShareCoordinator(h.config, h.replica_manager, h.metadata, h.clock, lambda: None)
    key = SharePartitionKey("group", "00" * 15 + "01", 3)
    expected = abs(java_hash("group:AAAAAAAAAAAAAAAAAAAAAQ:3")) % 50
    assert coordinator.partition_for(key) == expected
    await h.shutdown()
