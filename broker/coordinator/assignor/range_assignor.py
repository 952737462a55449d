"""The ``range`` server-side assignor (Kafka's RangeAssignor in the group coordinator,
KIP-848): each topic's partitions cut into consecutive ranges, one per subscriber in member
order, so topics with equal partition counts and subscribers are co-partitioned."""

from __future__ import annotations

from collections.abc import Mapping

from purgatory.broker.coordinator.assignor.partition_assignor import MemberSubscription


class RangeAssignor:
    """For each topic, with P partitions and S subscribers taken in member order, the i-th
    subscriber gets the next P // S partitions, one more if i < P % S.

    a. Members are ordered by member id. (Kafka puts static members first, by instance id;
       ``MemberSubscription`` carries no instance id, so every member counts as dynamic.)
    b. Two topics with the same partition count and the same subscribers are split at the
       same points: member i gets the same partition numbers of both.
    c. A member beyond the first P of a topic's subscribers gets none of it.
    d. Not sticky: the ranges are recomputed from the members and partition counts alone,
       as in the Kafka version this follows (current assignments are ignored).
    """

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, frozenset[int]]]:
        member_ids = sorted(members)
        subscriptions = {
            m: sorted(t for t in members[m].subscribed_topic_ids if t in partitions)
            for m in member_ids
        }
        subscriber_counts: dict[str, int] = {}
        for topics in subscriptions.values():
            for topic_id in topics:
                subscriber_counts[topic_id] = subscriber_counts.get(topic_id, 0) + 1

        # Per topic: (next range start, quota, subscribers still owed an extra partition).
        progress = {
            t: (0, *divmod(partitions[t], subscribers))
            for t, subscribers in subscriber_counts.items()
        }
        assignment: dict[str, dict[str, frozenset[int]]] = {}
        for m in member_ids:
            ranges: dict[str, frozenset[int]] = {}
            for topic_id in subscriptions[m]:
                start, quota, extra = progress[topic_id]
                end = start + quota + (1 if extra > 0 else 0)
                progress[topic_id] = (end, quota, max(extra - 1, 0))
                if start < end:
                    ranges[topic_id] = frozenset(range(start, end))
            assignment[m] = ranges
        return assignment
