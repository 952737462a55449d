"""The read-only record APIs' logic (broker/api/kafka/log_info.py) on the in-memory harness:
a manual clock, no sockets. Requests are kio's, built from plain values."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from purgatory.broker.api.kafka.log_info import LogInfoApis
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.differential.harness import body
from tests.harness import Harness


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.shutdown()


def apis(h: Harness) -> LogInfoApis:
    broker = SimpleNamespace(
        replica_manager=h.replica_manager,
        metadata=h.metadata,
        config=h.config,
        broker_id=0,
        auth=AuthHelper(SimpleNamespace, lambda: None),  # no authorizer: all allowed
    )
    return LogInfoApis(broker)  # type: ignore[arg-type]


def ask(h: Harness, api_key: ApiKey, version: int, **values: Any) -> Any:
    return apis(h).handlers()[api_key](body(api_key, version, **values), version)


def epoch_end(h: Harness, epoch: int, current: int = -1) -> tuple[str, int, int]:
    answer = ask(
        h,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        4,
        replica_id=-1,
        topics=[
            {
                "topic": "t",
                "partitions": [
                    {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                ],
            }
        ],
    )
    p = answer.topics[0].partitions[0]
    return ErrorCode(p.error_code.value).name, p.leader_epoch, p.end_offset


async def test_each_epoch_ends_where_the_next_leadership_started_writing(h: Harness) -> None:
    h.create("t")
    await h.produce("t", [b"a", b"b"], acks=1)  # epoch 0: offsets 0-1
    h.set_partition("t", 0, leader_epoch=2)
    await h.produce("t", [b"c"], acks=1)  # epoch 2: offset 2
    h.set_partition("t", 0, leader_epoch=5)  # epoch 5 starts at 3, before any append
    assert [epoch_end(h, e)[1:] for e in range(7)] == [
        (0, 2),
        (0, 2),
        (2, 3),
        (2, 3),
        (2, 3),
        (5, 3),
        (-1, -1),
    ]
    await h.produce("t", [b"d"], acks=1)
    assert epoch_end(h, 5, 5) == ("NONE", 5, 4)
    assert epoch_end(h, -1, 5) == ("NONE", -1, -1)
    assert epoch_end(h, 2, 4)[0] == "FENCED_LEADER_EPOCH"
    assert epoch_end(h, 2, 6)[0] == "UNKNOWN_LEADER_EPOCH"
    assert epoch_end(h, 2, -5)[0] == "FENCED_LEADER_EPOCH"  # only -1 means none given
    # Led elsewhere now: the epoch is still checked first, then leadership.
    h.set_partition("t", 0, leader_id=1, leader_epoch=6)
    assert epoch_end(h, 5, 6)[0] == "NOT_LEADER_OR_FOLLOWER"
    assert epoch_end(h, 5, 5)[0] == "FENCED_LEADER_EPOCH"
    assert epoch_end(h, 5, 7)[0] == "UNKNOWN_LEADER_EPOCH"


def page(
    h: Harness, names: list[str], limit: int, cursor: tuple[str, int] | None = None
) -> tuple[list[tuple[str, str, list[int]]], tuple[str, int] | None]:
    answer = ask(
        h,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[{"name": n} for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    )
    topics = [
        (t.name, ErrorCode(t.error_code.value).name, [p.partition_index for p in t.partitions])
        for t in answer.topics
    ]
    c = answer.next_cursor
    return topics, None if c is None else (c.topic_name, c.partition_index)


async def test_every_topic_is_paged_in_name_order_and_the_cursor_picks_up_where_it_stopped(
    h: Harness,
) -> None:
    for name, count in (("c", 1), ("a", 3), ("b", 2)):
        h.create(name, count)
    assert page(h, [], 4) == ([("a", "NONE", [0, 1, 2]), ("b", "NONE", [0])], ("b", 1))
    assert page(h, [], 4, ("b", 1)) == ([("b", "NONE", [1]), ("c", "NONE", [0])], None)
    assert page(h, [], 3) == ([("a", "NONE", [0, 1, 2])], ("b", 0))
    # Named topics: those before the cursor's are left out, unknown ones answered.
    assert page(h, ["zz", "a", "c"], 10, ("c", 0)) == (
        [("c", "NONE", [0]), ("zz", "UNKNOWN_TOPIC_OR_PARTITION", [])],
        None,
    )
    assert page(h, ["a"], 10, ("a", 9)) == ([("a", "NONE", [])], None)  # past its end
    assert page(h, ["a"], 0) == ([("a", "NONE", [0])], ("a", 1))  # at least one partition
    assert page(h, [".."], 10) == ([("..", "INVALID_TOPIC_EXCEPTION", [])], None)


async def test_describe_log_dirs_sizes_every_replica_held_and_the_budget_left(h: Harness) -> None:
    h.create("t", 1)
    h.create("u", 2)
    await h.produce("t", [b"x" * 100], acks=1)
    answer = ask(h, ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
    (result,) = answer.results
    held = {
        (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
        for t in result.topics
        for p in t.partitions
    }
    size = h.partition("t").log.size_bytes
    assert size > 100
    assert held == {("t", 0): (size, 0, False), ("u", 0): (0, 0, False), ("u", 1): (0, 0, False)}
    assert result.log_dir == "memory:/broker-0"
    assert result.usable_bytes == result.total_bytes - size


async def test_describe_producers_answers_what_the_log_still_holds_after_a_truncation(
    h: Harness,
) -> None:
    h.create("t")
    first = kafka_records.encode(
        [(5_000, None, b"a", [])], producer_id=11, producer_epoch=2, base_sequence=0
    )
    second = kafka_records.encode(
        [(6_000, None, b"b", [])], producer_id=12, producer_epoch=0, base_sequence=0
    )
    third = kafka_records.encode(
        [(7_000, None, b"c", [])], producer_id=11, producer_epoch=2, base_sequence=1
    )
    for batch in (first, second, third):
        await h.produce_batch("t", batch, acks=1)

    def producers() -> dict[int, tuple[int, int, int]]:
        answer = ask(
            h, ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": "t", "partition_indexes": [0]}]
        )
        (p,) = answer.topics[0].partitions
        assert p.error_code.value == 0
        return {
            s.producer_id: (s.producer_epoch, s.last_sequence, s.last_timestamp)
            for s in p.active_producers
        }

    assert producers() == {11: (2, 1, 7_000), 12: (0, 0, 6_000)}
    h.partition("t").log.truncate_to(1)  # producer 12's batch is gone, and 11's second
    assert producers() == {11: (2, 0, 5_000)}


async def test_describe_producers_shows_an_open_transaction_and_the_last_coordinator_epoch(
    h: Harness,
) -> None:
    h.create("t")
    ts = h.clock.wall_ms()

    def txn(pid: int, seq: int) -> bytes:
        return kafka_records.encode(
            [(ts, None, b"v", [])],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        )

    await h.produce_batch("t", txn(21, 0), acks=1)  # 0
    await h.produce_batch("t", txn(22, 0), acks=1)  # 1
    await h.produce_batch("t", txn(21, 1), acks=1)  # 2
    h.replica_manager.append_txn_markers(1_000, [(("t", 0), 22, 0, True, 4)])  # 3

    answer = ask(h, ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": "t", "partition_indexes": [0]}])
    (p,) = answer.topics[0].partitions
    assert {
        s.producer_id: (s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers
    } == {21: (-1, 0), 22: (4, -1)}
