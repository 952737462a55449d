"""The ``uniform`` server-side assignor (Kafka's UniformAssignor, KIP-848): balanced and
sticky, with one builder for groups whose members all subscribe to the same topics
(UniformHomogeneousAssignmentBuilder) and one for the rest
(UniformHeterogeneousAssignmentBuilder).

Where Kafka's order comes from a Java hash set, ours is sorted (members by id, topics by
id, partitions by number), so every broker computes the same assignment whatever order it
built its maps in.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from purgatory.broker.coordinator.assignor.partition_assignor import MemberSubscription

# Member id -> topic id -> partitions: what ``PartitionAssignor.assign`` returns.
GroupAssignment = dict[str, dict[str, frozenset[int]]]

# The final balancing phase of the heterogeneous builder stops after this many passes over
# the topics (Kafka's MAX_ITERATION_COUNT): overlapping, non-identical subscriptions can
# take many passes to converge, each roughly halving the imbalance.
MAX_ITERATION_COUNT = 16


class UniformAssignor:
    """Spreads the partitions of the subscribed topics over the members so that counts
    differ by at most one where subscriptions allow it, moving as few partitions away from
    their current owners as that balance needs.

    a. Every partition of a subscribed topic that exists is assigned, to exactly one member
       subscribed to its topic.
    b. Homogeneous group: every member's count is within one of every other's, and a member
       keeps min(current valid partitions, its quota).
    c. Heterogeneous group: a member keeps its subscribed partitions, the unassigned ones go
       to the least loaded subscribers, then partitions move from the most to the least
       loaded subscribers of each topic until no move improves balance (or
       MAX_ITERATION_COUNT passes).
    """

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSubscription], partitions: Mapping[str, int]
    ) -> GroupAssignment:
        if not members:
            return {}
        member_ids = sorted(members)
        subscriptions = [
            frozenset(t for t in members[m].subscribed_topic_ids if t in partitions)
            for m in member_ids
        ]
        if all(s == subscriptions[0] for s in subscriptions):
            return _assign_homogeneous(member_ids, subscriptions[0], members, partitions)
        return _UniformHeterogeneousAssignmentBuilder(
            member_ids, subscriptions, members, partitions
        ).build()


def _current_partitions(
    subscription: MemberSubscription,
    subscribed: frozenset[str],
    partitions: Mapping[str, int],
    owned: set[tuple[str, int]],
) -> list[tuple[str, int]]:
    """The member's current partitions it may keep, in (topic, partition) order: of a
    topic it still subscribes to, that still has that partition, and that no member
    before it claimed (``owned``, updated here)."""
    kept = []
    for topic_id in sorted(subscription.assigned):
        if topic_id not in subscribed:
            continue
        count = partitions[topic_id]
        for partition in sorted(subscription.assigned[topic_id]):
            key = (topic_id, partition)
            if 0 <= partition < count and key not in owned:
                owned.add(key)
                kept.append(key)
    return kept


def _to_assignment(topic_partitions: list[tuple[str, int]]) -> dict[str, frozenset[int]]:
    grouped: dict[str, list[int]] = {}
    for topic_id, partition in topic_partitions:
        grouped.setdefault(topic_id, []).append(partition)
    return {topic_id: frozenset(ps) for topic_id, ps in grouped.items()}


def _assign_homogeneous(
    member_ids: list[str],
    subscribed: frozenset[str],
    members: Mapping[str, MemberSubscription],
    partitions: Mapping[str, int],
) -> GroupAssignment:
    """Kafka's UniformHomogeneousAssignmentBuilder: every member gets a quota of
    total // members partitions, total % members of them one more; a member keeps its
    current partitions up to its quota, and the rest fill the members below quota.

    Unlike Kafka, which hands the extra partitions to the first members in its map's order,
    they go to the members currently holding the most (ties by member id): no member then
    gives up a partition only because another one got its extra slot."""
    if not subscribed:
        return {m: {} for m in member_ids}

    owned: set[tuple[str, int]] = set()
    current = {
        m: _current_partitions(members[m], subscribed, partitions, owned) for m in member_ids
    }

    total = sum(partitions[t] for t in subscribed)
    minimum_quota, extra = divmod(total, len(member_ids))
    quotas = dict.fromkeys(member_ids, minimum_quota)
    for m in sorted(member_ids, key=lambda m: -len(current[m]))[:extra]:  # stable: id order
        quotas[m] += 1

    # Never-assigned partitions first (topic, partition order), then the revoked ones in
    # member order, as Kafka lists them.
    unassigned = [
        (topic_id, partition)
        for topic_id in sorted(subscribed)
        for partition in range(partitions[topic_id])
        if (topic_id, partition) not in owned
    ]
    kept: dict[str, list[tuple[str, int]]] = {}
    for m in member_ids:
        kept[m] = current[m][: quotas[m]]
        unassigned.extend(current[m][quotas[m] :])

    next_unassigned = 0
    for m in member_ids:
        room = quotas[m] - len(kept[m])
        if room > 0:
            kept[m].extend(unassigned[next_unassigned : next_unassigned + room])
            next_unassigned += room
    # Quotas add up to the number of partitions, so nothing is left over.
    assert next_unassigned >= len(unassigned), "uniform assignor left partitions unassigned"
    return {m: _to_assignment(kept[m]) for m in member_ids}


class _MemberAssignmentBalancer:
    """Picks, for one topic, the least loaded subscriber to give a partition to and the most
    loaded one to take a partition from, in constant time per pick (Kafka's
    MemberAssignmentBalancer).

    ``sorted_members`` holds the topic's subscribers by (partition count, index) as of
    ``initialize``. Two ranges of it are tracked:
    a. [0, least_loaded_end): members that had ``least_loaded_count`` partitions before
       this pass gave them one more; the range grows rightwards as the level rises.
    b. [most_loaded_start, most_loaded_end): members that had ``most_loaded_count``
       before this pass took one away; it grows leftwards, and members with nothing of the
       topic to give up are swapped out past its end (``exclude_most_loaded_member``).
    The topic is balanced once the two levels differ by one or less.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes  # shared with the builder: partitions per member index
        self.sorted_members: list[int] = []
        self.least_loaded_end = 0  # exclusive
        self.least_loaded_count = -1
        self.next_least_loaded = 0
        self.most_loaded_start = 0  # inclusive
        self.most_loaded_end = 0  # exclusive
        self.most_loaded_count = 1
        self.next_most_loaded = -1

    def initialize(self, members: list[int]) -> int:
        """Starts over with these members; returns the spread between the most and least
        loaded of them."""
        sizes = self.sizes
        self.sorted_members = sorted(members, key=lambda m: (sizes[m], m))
        lowest = sizes[self.sorted_members[0]]
        highest = sizes[self.sorted_members[-1]]
        self.least_loaded_end = 0
        self.least_loaded_count = lowest - 1
        self.next_least_loaded = 0
        self.most_loaded_start = len(self.sorted_members)
        self.most_loaded_end = len(self.sorted_members)
        self.most_loaded_count = highest + 1
        self.next_most_loaded = len(self.sorted_members) - 1
        return highest - lowest

    def next_least_loaded_member(self) -> int:
        """The member to give the next partition to (assumed given)."""
        members, sizes = self.sorted_members, self.sizes
        if self.next_least_loaded >= self.least_loaded_end:
            # Every member of the range got one: raise its level and take in the members
            # already at that level.
            self.least_loaded_count += 1
            while (
                self.least_loaded_end < len(members)
                and sizes[members[self.least_loaded_end]] == self.least_loaded_count
            ):
                self.least_loaded_end += 1
            self.next_least_loaded = 0
        member = members[self.next_least_loaded]
        self.next_least_loaded += 1
        return member

    def next_most_loaded_member(self) -> int:
        """The member to take the next partition from (assumed taken), or -1 if none is
        left that could give one up."""
        members, sizes = self.sorted_members, self.sizes
        if self.next_most_loaded < self.most_loaded_start:
            if self.most_loaded_end <= self.most_loaded_start and self.most_loaded_start > 0:
                # Exclusions emptied the range: restart at the next member's level so the
                # range does expand below.
                self.most_loaded_count = sizes[members[self.most_loaded_start - 1]]
            else:
                self.most_loaded_count -= 1
            while (
                self.most_loaded_start > 0
                and sizes[members[self.most_loaded_start - 1]] == self.most_loaded_count
            ):
                self.most_loaded_start -= 1
            self.next_most_loaded = self.most_loaded_end - 1
        if self.next_most_loaded < 0:
            return -1
        member = members[self.next_most_loaded]
        self.next_most_loaded -= 1
        return member

    def exclude_most_loaded_member(self) -> None:
        """Drops the member last returned by ``next_most_loaded_member`` from the most loaded
        range (it has nothing of the topic left to give up)."""
        members = self.sorted_members
        i, last = self.next_most_loaded + 1, self.most_loaded_end - 1
        members[i], members[last] = members[last], members[i]
        self.most_loaded_end -= 1

    def is_balanced(self) -> bool:
        return self.most_loaded_count - self.least_loaded_count <= 1


class _UniformHeterogeneousAssignmentBuilder:
    """Kafka's UniformHeterogeneousAssignmentBuilder. Members are numbered by id order;
    ``owners[topic][partition]`` is the member index holding it (-1: nobody), the one
    source of truth until ``build`` turns it into the returned assignment;
    ``sizes[member]`` is the member's partition count, kept in step with ``owners``."""

    def __init__(
        self,
        member_ids: list[str],
        subscriptions: list[frozenset[str]],
        members: Mapping[str, MemberSubscription],
        partitions: Mapping[str, int],
    ) -> None:
        self.member_ids = member_ids
        self.subscriptions = subscriptions
        self.members = members
        self.partitions = partitions
        self.topic_subscribers: dict[str, list[int]] = {}  # ascending member indices
        for index, subscribed in enumerate(subscriptions):
            for topic_id in subscribed:
                self.topic_subscribers.setdefault(topic_id, []).append(index)
        self.owners = {t: [-1] * partitions[t] for t in self.topic_subscribers}
        self.sizes = [0] * len(member_ids)

    def build(self) -> GroupAssignment:
        self._keep_subscribed_partitions()
        self._assign_remaining_partitions()
        self._balance()
        assignment: list[list[tuple[str, int]]] = [[] for _ in self.member_ids]
        for topic_id in sorted(self.owners):
            for partition, owner in enumerate(self.owners[topic_id]):
                assignment[owner].append((topic_id, partition))
        return {m: _to_assignment(assignment[i]) for i, m in enumerate(self.member_ids)}

    def _sorted_topics(self, topic_ids: list[str]) -> list[str]:
        """Most partitions per subscriber first, then fewest subscribers, then topic id:
        the order that most often ends balanced."""

        def key(topic_id: str) -> tuple[Fraction, int, str]:
            subscribers = len(self.topic_subscribers[topic_id])
            return (-Fraction(self.partitions[topic_id], subscribers), subscribers, topic_id)

        return sorted(topic_ids, key=key)

    def _keep_subscribed_partitions(self) -> None:
        """Each member keeps its current partitions of the topics it still subscribes to."""
        owned: set[tuple[str, int]] = set()
        for index, m in enumerate(self.member_ids):
            for topic_id, partition in _current_partitions(
                self.members[m], self.subscriptions[index], self.partitions, owned
            ):
                self.owners[topic_id][partition] = index
                self.sizes[index] += 1

    def _assign_remaining_partitions(self) -> None:
        """Topic by topic, each unowned partition goes to the least loaded subscriber."""
        balancer = _MemberAssignmentBalancer(self.sizes)
        for topic_id in self._sorted_topics(list(self.owners)):
            owners = self.owners[topic_id]
            unowned = [p for p, owner in enumerate(owners) if owner == -1]
            if not unowned:
                continue
            balancer.initialize(self.topic_subscribers[topic_id])
            for partition in unowned:
                member = balancer.next_least_loaded_member()
                owners[partition] = member
                self.sizes[member] += 1

    def _balance(self) -> None:
        """Moves partitions topic by topic until a whole pass over the topics moves none,
        or MAX_ITERATION_COUNT passes. Only topics with two or more subscribers can move."""
        topic_ids = self._sorted_topics(
            [t for t, subscribers in self.topic_subscribers.items() if len(subscribers) >= 2]
        )
        if not topic_ids:
            return
        balancer = _MemberAssignmentBalancer(self.sizes)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(topic_ids):
                if index == last_rebalanced:
                    return  # a full pass since the last move
                if self._balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic_id: str, balancer: _MemberAssignmentBalancer) -> int:
        """Moves this topic's partitions from its most to its least loaded subscribers
        until their counts differ by one or less; returns how many moved."""
        if balancer.initialize(self.topic_subscribers[topic_id]) <= 1:
            return 0
        owners, sizes = self.owners[topic_id], self.sizes
        # Partitions grouped by owner; [start[m], end[m]) is member m's run, and a move
        # takes the last partition of the run.
        by_owner = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, partition in enumerate(by_owner):
            start.setdefault(owners[partition], i)
            end[owners[partition]] = i + 1

        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded_member()
            while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded_member()
                giver = balancer.next_most_loaded_member()
            if giver == -1:
                break  # nobody left with a partition of this topic to give up
            end[giver] -= 1
            partition = by_owner[end[giver]]
            taker = balancer.next_least_loaded_member()
            if balancer.is_balanced():
                break
            owners[partition] = taker
            sizes[giver] -= 1
            sizes[taker] += 1
            moved += 1
        return moved
