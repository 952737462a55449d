"""Partition assignors a group's leader runs (Kafka's RangeAssignor and
RoundRobinAssignor, by the same names, so members of any client can agree on one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from purgatory.protocol.consumer_protocol import Assignment, Subscription


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Each member's partitions, given every member's subscription and the partition
        count of each subscribed topic (topics missing from it are not assigned)."""
        ...


class RangeAssignor:
    """Per topic: the members subscribed to it, sorted by member id, each take a range of
    consecutive partitions; the first ``partitions % members`` take one more."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
        for topic, count in sorted(partitions_per_topic.items()):
            members = sorted(m for m, s in subscriptions.items() if topic in s.topics)
            if not members:
                continue
            each, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                size = each + (1 if i < extra else 0)
                if size:
                    out[member][topic] = list(range(start, start + size))
                start += size
        return {m: Assignment(parts) for m, parts in out.items()}


class RoundRobinAssignor:
    """Every subscribed partition, sorted by topic and index, dealt to the members sorted
    by id in turn; a member not subscribed to a partition's topic is skipped for it."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
        if not members:
            return {}
        turn = 0
        for topic, count in sorted(partitions_per_topic.items()):
            if not any(topic in subscriptions[m].topics for m in members):
                continue
            for partition in range(count):
                while topic not in subscriptions[members[turn % len(members)]].topics:
                    turn += 1
                out[members[turn % len(members)]].setdefault(topic, []).append(partition)
                turn += 1
        return {m: Assignment(parts) for m, parts in out.items()}


ASSIGNORS: dict[str, type[RangeAssignor] | type[RoundRobinAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
}
