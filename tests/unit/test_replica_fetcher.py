"""A follower's fetcher on the in-memory harness (manual clock): how it backs off after an
error, as Kafka's fetcher thread does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from purgatory.broker.log.leader_epoch_cache import EpochEndOffset
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    TopicPartition,
    error_data,
)
from purgatory.broker.replication.replica_fetcher import EpochAsk
from purgatory.protocol.errors import ErrorCode
from tests.harness import Harness

BACKOFF_MS = 1000
OK = FetchPartitionData(0, 0, 0, b"")


class ScriptedLeader:
    """A leader whose answers the test gives: each fetch waits in ``calls`` with the
    partitions it asked for until the test answers it."""

    def __init__(self) -> None:
        self.calls: asyncio.Queue[tuple[list[TopicPartition], asyncio.Future[FetchResult]]]
        self.calls = asyncio.Queue()

    async def fetch(self, params: FetchParams) -> FetchResult:
        answer: asyncio.Future[FetchResult] = asyncio.get_running_loop().create_future()
        await self.calls.put(([key for key, _ in params.partitions], answer))
        return await answer

    async def offsets_for_leader_epoch(
        self, asks: list[EpochAsk]
    ) -> dict[TopicPartition, tuple[int, EpochEndOffset]]:
        raise AssertionError("empty logs have nothing to truncate")

    async def close(self) -> None:
        pass

    async def next_call(self) -> tuple[list[TopicPartition], asyncio.Future[FetchResult]]:
        """The next fetch the follower sends (it must send one without the clock moving)."""
        return await asyncio.wait_for(self.calls.get(), timeout=5)


@pytest.fixture
async def following() -> AsyncIterator[tuple[Harness, ScriptedLeader]]:
    """This broker follows t-0 and t-1, both led by broker 1."""
    h = Harness(**{"replica.fetch.backoff.ms": BACKOFF_MS})
    leader = ScriptedLeader()
    h.leaders[1] = leader
    h.create("t", 2)
    for index in (0, 1):
        h.set_partition("t", index, leader_id=1, leader_epoch=1)
    yield h, leader
    await h.shutdown()


async def test_a_partition_answered_with_an_error_backs_off_alone_while_the_others_fetch(
    following: tuple[Harness, ScriptedLeader],
) -> None:
    h, leader = following
    asked, answer = await leader.next_call()
    assert sorted(asked) == [("t", 0), ("t", 1)]
    answer.set_result(
        FetchResult(
            [(("t", 0), error_data(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), (("t", 1), OK)], 0
        )
    )
    # t-1 is asked for again at once; t-0 waits out replica.fetch.backoff.ms.
    asked, answer = await leader.next_call()
    assert asked == [("t", 1)]
    answer.set_result(FetchResult([(("t", 1), OK)], 0))
    asked, answer = await leader.next_call()
    assert asked == [("t", 1)]
    await h.advance(BACKOFF_MS)
    answer.set_result(FetchResult([(("t", 1), OK)], 0))
    asked, _ = await leader.next_call()
    assert sorted(asked) == [("t", 0), ("t", 1)]


async def test_with_every_partition_backing_off_the_fetcher_waits_for_the_first_to_return(
    following: tuple[Harness, ScriptedLeader],
) -> None:
    h, leader = following
    _, answer = await leader.next_call()
    unknown = error_data(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    answer.set_result(FetchResult([(("t", 0), unknown), (("t", 1), unknown)], 0))
    await h.settle()  # the fetcher reads the answer now, then the clock moves
    await h.advance(BACKOFF_MS - 1)
    assert leader.calls.empty()  # nothing to ask for yet
    await h.advance(1)
    asked, _ = await leader.next_call()
    assert sorted(asked) == [("t", 0), ("t", 1)]
