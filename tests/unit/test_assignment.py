from __future__ import annotations

from broker.controller.topics import assign_replicas, topic_name_problem
from clients.partitioner import murmur2, partition_for_key


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
