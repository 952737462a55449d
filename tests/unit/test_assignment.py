from __future__ import annotations

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.controller.topics import (
    assign_replicas,
    grow_topics,
    new_topic,
    topic_name_problem,
)
from purgatory.clients.partitioner import murmur2, partition_for_key
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode

BROKERS = [0, 1, 2]


def topic(partitions: int, replication_factor: int, start: int = 1) -> ib.TopicState:
    created = new_topic(
        m.CreatableTopic("t", partitions, replication_factor, {"retention.bytes": "100"}),
        load_config(environ={}),
        BROKERS,
        start,
        (),
    )
    assert isinstance(created, ib.TopicState)
    return created


def grow(
    count: int, assignments: list[list[int]] | None = None, *, validate_only: bool = False
) -> tuple[list[m.CreatePartitionsTopicResult], dict[str, ib.TopicState]]:
    request = m.CreatePartitionsRequest(
        [m.CreatePartitionsTopic("t", count, assignments)], validate_only=validate_only
    )
    return grow_topics(request, {"t": topic(2, 2)}, BROKERS)


def test_leaders_are_spread_round_robin_from_the_start_index() -> None:
    assert [r[0] for r in assign_replicas([0, 1, 2], 6, 1, 1)] == [1, 2, 0, 1, 2, 0]


def test_replicas_of_a_partition_are_distinct_brokers() -> None:
    for replicas in assign_replicas([0, 1, 2, 3], 12, 3, 2):
        assert len(set(replicas)) == 3


def test_topic_names_follow_kafkas_rules() -> None:
    assert topic_name_problem("orders.v1_x-y") is None
    assert topic_name_problem("..") is not None
    assert topic_name_problem("a" * 250) is not None
    assert topic_name_problem("with space") is not None
    assert topic_name_problem("") is not None


def test_the_default_partitioner_matches_kafka() -> None:
    # Reference values of Kafka's Utils.murmur2 / DefaultPartitioner.
    assert murmur2(b"21") == -973932308
    assert [
        partition_for_key(k, 1000) for k in (b"", b"a", b"ab", b"abc", b"123456789", b"\x00 ")
    ] == [681, 524, 434, 107, 566, 742]


def test_added_partitions_are_placed_as_if_the_topic_was_created_with_them() -> None:
    [result], grown = grow(5)
    assert result.error_code == ErrorCode.NONE
    after = grown["t"]
    assert [p.replicas for p in after.partitions] == [p.replicas for p in topic(5, 2).partitions]
    assert after.configs == {"retention.bytes": "100"}
    assert [p.partition_index for p in after.partitions] == [0, 1, 2, 3, 4]
    new = after.partitions[2]
    assert new.leader_id == new.replicas[0] and new.isr == new.replicas and new.leader_epoch == 0


def test_added_partitions_keep_the_existing_ones_untouched() -> None:
    before = {"t": topic(2, 2)}
    _, grown = grow_topics(
        m.CreatePartitionsRequest([m.CreatePartitionsTopic("t", 3)]), before, BROKERS
    )
    assert grown["t"].partitions[:2] == before["t"].partitions
    assert grown["t"].topic_id == before["t"].topic_id


def test_explicit_assignments_place_the_new_partitions() -> None:
    [result], grown = grow(4, [[2, 0], [0, 1]])
    assert result.error_code == ErrorCode.NONE
    assert [p.replicas for p in grown["t"].partitions[2:]] == [[2, 0], [0, 1]]
    assert grown["t"].partitions[2].leader_id == 2


def test_validate_only_checks_without_growing() -> None:
    [result], grown = grow(4, validate_only=True)
    assert result.error_code == ErrorCode.NONE and grown == {}


@pytest.mark.parametrize(
    ("count", "assignments", "code", "says"),
    [
        (1, None, ErrorCode.INVALID_PARTITIONS, "can only be added"),
        (2, None, ErrorCode.INVALID_PARTITIONS, "already has 2"),
        (10001, None, ErrorCode.INVALID_PARTITIONS, "at most 10000"),
        (4, [[0, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "2 partitions are added but 1"),
        (3, [[0]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "replication factor is 2"),
        (3, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "names a broker twice"),
        (3, [[0, 7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "unknown brokers [7]"),
    ],
)
def test_refused_partition_changes_say_why(
    count: int, assignments: list[list[int]] | None, code: ErrorCode, says: str
) -> None:
    [result], grown = grow(count, assignments)
    assert result.error_code == code and says in (result.error_message or "")
    assert grown == {}


def test_unknown_and_repeated_topics_are_refused_and_the_others_grow() -> None:
    request = m.CreatePartitionsRequest(
        [
            m.CreatePartitionsTopic("ghost", 3),
            m.CreatePartitionsTopic("t", 3),
            m.CreatePartitionsTopic("t", 4),
            m.CreatePartitionsTopic("u", 3),
        ]
    )
    results, grown = grow_topics(request, {"t": topic(2, 2), "u": topic(2, 2)}, BROKERS)
    assert [r.error_code for r in results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
    ]
    assert list(grown) == ["u"] and len(grown["u"].partitions) == 3


def manual(assignments: list[tuple[int, list[int]]], partitions: int = -1) -> object:
    return new_topic(
        m.CreatableTopic("t", partitions, -1, {}, assignments),
        load_config(environ={}),
        BROKERS,
        0,
        (),
    )


def test_manual_assignments_place_each_partition_with_its_first_replica_leading() -> None:
    created = manual([(1, [2, 0]), (0, [1, 2])])
    assert isinstance(created, ib.TopicState)
    assert [(p.leader_id, p.replicas, p.isr) for p in created.partitions] == [
        (1, [1, 2], [1, 2]),
        (2, [2, 0], [2, 0]),
    ]


@pytest.mark.parametrize(
    ("assignments", "partitions", "error"),
    [
        ([(0, [0])], 1, ErrorCode.INVALID_REQUEST),  # a count beside the assignments
        ([(0, [0]), (0, [1])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # index twice
        ([(1, [0])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # not from 0
        ([(0, [])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # no replica
        ([(0, [1, 1])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # a broker twice
        ([(0, [7])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # no such broker
        ([(0, [0]), (1, [0, 1])], -1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # counts differ
    ],
)
def test_manual_assignments_are_checked_as_kafkas_controller_does(
    assignments: list[tuple[int, list[int]]], partitions: int, error: ErrorCode
) -> None:
    refused = manual(assignments, partitions)
    assert isinstance(refused, m.CreatableTopicResult) and refused.error_code == error
