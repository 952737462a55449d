"""What a server-side assignor is given and returns (Kafka's ConsumerGroupPartitionAssignor,
GroupSpec and SubscribedTopicDescriber, in plain values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

Assignment = Mapping[str, frozenset[int]]  # topic id -> partitions


class MemberSubscription(NamedTuple):
    """One member as the assignor sees it: what it subscribes to, and its current target
    assignment (which a sticky assignor keeps as much of as it can)."""

    subscribed_topic_ids: frozenset[str]
    assigned: Assignment
    rack_id: str | None = None


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, frozenset[int]]]:
        """The target assignment of every member (member id -> topic id -> partitions),
        given the members and the partition count of each subscribed topic that exists
        (``partitions``: topic id -> count; a subscribed id missing there is not assigned).
        Deterministic: the same input gives the same output on every broker."""
        ...
