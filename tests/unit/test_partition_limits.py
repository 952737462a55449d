"""max.broker.partitions: the default follows the memory budget (one replica per 8 KiB
of log.memory.max.bytes, at least 1,000, none without a budget); a set value wins; and
an entry that would take any broker past it is refused whole, counting nothing."""

from __future__ import annotations

from purgatory.broker.controller.partition_limits import (
    FLOOR,
    ReplicaCounts,
    broker_partition_limit,
)
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState
from tests.support import broker_config


def partitions(*replicas: list[int]) -> list[PartitionState]:
    return [PartitionState(i, r[0], 0, r, r) for i, r in enumerate(replicas)]


def test_the_default_cap_follows_the_memory_budget() -> None:
    assert broker_partition_limit(broker_config()) == (1 << 30) // 8192 == 131072
    assert broker_partition_limit(broker_config(log_memory_max_bytes=1_000)) == FLOOR
    assert broker_partition_limit(broker_config(log_memory_max_bytes=-1)) is None
    assert broker_partition_limit(broker_config(max_broker_partitions=7)) == 7


def test_an_entry_past_the_cap_on_any_broker_is_refused_and_counts_nothing() -> None:
    counts = ReplicaCounts([TopicState("t", "id", {}, partitions([0, 1], [1, 0]))], limit=3)
    assert counts.admit(partitions([1, 2])) is None  # broker 1 now holds 3
    refusal = counts.admit(partitions([2, 1]))
    assert refusal is not None and refusal.startswith("broker 1 holds 3 partition replicas")
    assert counts.counts == {0: 2, 1: 3, 2: 1}
    assert counts.admit(partitions([0], [2])) is None
