"""The KIP-848 server-side assignors, ``uniform`` and ``range``, held to the cases Kafka's
OptimizedUniformAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest and
RangeAssignorTest check.

Where Kafka's expected assignment follows a Java hash set's topic order, ours follows
sorted topic ids; those cases say so and assert the assignment our order gives."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping
from collections.abc import Set as AbstractSet

import pytest

from purgatory.broker.coordinator.assignor import (
    ASSIGNORS,
    PartitionAssignor,
    RangeAssignor,
    UniformAssignor,
    assignors,
)
from purgatory.broker.coordinator.assignor.partition_assignor import MemberSubscription

T1, T2, T3, T4 = "topic1", "topic2", "topic3", "topic4"
A, B, C = "A", "B", "C"

Result = dict[str, dict[str, frozenset[int]]]


def member(
    topics: set[str], assigned: Mapping[str, AbstractSet[int]] | None = None
) -> MemberSubscription:
    return MemberSubscription(
        frozenset(topics), {t: frozenset(ps) for t, ps in (assigned or {}).items()}
    )


def expect(**members: dict[str, set[int]]) -> Result:
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in members.items()}


def check_valid_and_complete(
    members: Mapping[str, MemberSubscription], partitions: Mapping[str, int], result: Result
) -> None:
    """Every member has an entry; a partition goes only to a subscriber of its topic, to
    one member only; every partition of a subscribed topic is assigned."""
    assert set(result) == set(members)
    seen: set[tuple[str, int]] = set()
    for m, assignment in result.items():
        for topic_id, ps in assignment.items():
            assert ps, f"{m} has an empty entry for {topic_id}"
            assert topic_id in members[m].subscribed_topic_ids
            for p in ps:
                assert 0 <= p < partitions[topic_id]
                assert (topic_id, p) not in seen, f"{topic_id}-{p} assigned twice"
                seen.add((topic_id, p))
    subscribed = {t for s in members.values() for t in s.subscribed_topic_ids if t in partitions}
    assert seen == {(t, p) for t in subscribed for p in range(partitions[t])}


def counts(result: Result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_balanced(result: Result) -> None:
    sizes = counts(result).values()
    assert max(sizes) - min(sizes) <= 1


def kept(before: Mapping[str, MemberSubscription], after: Result) -> int:
    return sum(
        len(ps & after[m].get(t, frozenset()))
        for m, s in before.items()
        if m in after
        for t, ps in s.assigned.items()
    )


uniform = UniformAssignor()
range_assignor = RangeAssignor()


# The registry.


def test_assignors_builds_the_configured_ones_in_order_first_is_default() -> None:
    built = assignors(["uniform", "range"])
    assert list(built) == ["uniform", "range"]
    assert isinstance(built["uniform"], UniformAssignor)
    assert isinstance(built["range"], RangeAssignor)
    assert list(assignors(["range"])) == ["range"]
    assert set(ASSIGNORS) == {"uniform", "range"}


def test_assignors_rejects_an_unknown_name_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown assignor 'sticky'.*range, uniform"):
        assignors(["uniform", "sticky"])


def test_assignors_rejects_an_empty_list() -> None:
    with pytest.raises(ValueError, match="empty"):
        assignors([])


# Both assignors: the edge cases.


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=lambda a: a.name)
def test_empty_group_gets_an_empty_assignment(assignor: PartitionAssignor) -> None:
    assert assignor.assign({}, {T1: 3}) == {}


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=lambda a: a.name)
def test_member_without_subscription_gets_nothing(assignor: PartitionAssignor) -> None:
    assert assignor.assign({A: member(set())}, {T1: 3}) == {A: {}}


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=lambda a: a.name)
def test_subscription_to_a_missing_topic_is_not_assigned(assignor: PartitionAssignor) -> None:
    # Kafka throws PartitionAssignorException; our interface skips the missing topic.
    result = assignor.assign({A: member({T1, T2}), B: member({T2})}, {T1: 2})
    assert result == expect(A={T1: {0, 1}}, B={})


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=lambda a: a.name)
def test_one_member_gets_every_partition(assignor: PartitionAssignor) -> None:
    assert assignor.assign({A: member({T1, T2})}, {T1: 3, T2: 2}) == expect(
        A={T1: {0, 1, 2}, T2: {0, 1}}
    )


@pytest.mark.parametrize("assignor", [uniform, range_assignor], ids=lambda a: a.name)
def test_result_does_not_depend_on_the_members_map_order(assignor: PartitionAssignor) -> None:
    rng = random.Random(7)
    topics = [f"t{i}" for i in range(6)]
    partitions = {t: rng.randint(1, 9) for t in topics}
    members = {f"m{i}": member(set(rng.sample(topics, rng.randint(1, 4))), {}) for i in range(7)}
    first = assignor.assign(members, partitions)
    shuffled = list(members.items())
    rng.shuffle(shuffled)
    assert assignor.assign(dict(shuffled), partitions) == first
    check_valid_and_complete(members, partitions, first)


# Uniform, homogeneous (OptimizedUniformAssignmentBuilderTest).


def test_uniform_first_assignment_two_members_two_topics() -> None:
    # Kafka's expectation lists topic3 first (its hash order); ours lists topic1 first.
    members = {A: member({T1, T3}), B: member({T1, T3})}
    result = uniform.assign(members, {T1: 3, T3: 2})
    assert result == expect(A={T1: {0, 1, 2}}, B={T3: {0, 1}})


def test_uniform_more_members_than_partitions_leaves_the_last_member_empty() -> None:
    members = {A: member({T3}), B: member({T3}), C: member({T3})}
    assert uniform.assign(members, {T3: 2}) == expect(A={T3: {0}}, B={T3: {1}}, C={})


def test_uniform_large_homogeneous_group_is_valid_and_balanced() -> None:
    partitions = {f"topic-{i}": 3 for i in range(1, 100)}
    members = {f"member{i}": member(set(partitions)) for i in range(1, 50)}
    result = uniform.assign(members, partitions)
    check_valid_and_complete(members, partitions, result)
    check_balanced(result)


def test_uniform_unbalanced_previous_assignment_moves_one_partition() -> None:
    members = {
        A: member({T1, T2}, {T1: {0, 1}, T2: {0, 1}}),
        B: member({T1, T2}, {T1: {2}, T2: {2}}),
    }
    assert uniform.assign(members, {T1: 3, T2: 3}) == expect(
        A={T1: {0, 1}, T2: {0}}, B={T1: {2}, T2: {1, 2}}
    )


def test_uniform_partitions_added_go_to_both_members_who_keep_theirs() -> None:
    # Topics grew from 3 partitions each to 6 and 5. Kafka's hash order hands topic2's new
    # partitions out first; in ours topic1's come first.
    members = {
        A: member({T1, T2}, {T1: {0, 2}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1, 2}}),
    }
    assert uniform.assign(members, {T1: 6, T2: 5}) == expect(
        A={T1: {0, 2, 3, 4, 5}, T2: {0}}, B={T1: {1}, T2: {1, 2, 3, 4}}
    )


def test_uniform_member_joining_takes_only_the_surplus() -> None:
    members = {
        A: member({T1, T2}, {T1: {0, 2}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1, 2}}),
        C: member({T1, T2}),
    }
    result = uniform.assign(members, {T1: 3, T2: 3})
    assert result == expect(A={T1: {0, 2}}, B={T1: {1}, T2: {1}}, C={T2: {0, 2}})


def test_uniform_member_leaving_its_partitions_go_to_the_others() -> None:
    # Kafka's hash order gives topic2-2 to A; ours gives topic1-2 to A.
    members = {
        A: member({T1, T2}, {T1: {0}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1}}),
    }
    assert uniform.assign(members, {T1: 3, T2: 3}) == expect(
        A={T1: {0, 2}, T2: {0}}, B={T1: {1}, T2: {1, 2}}
    )


def test_uniform_unsubscribed_topic_is_revoked() -> None:
    members = {
        A: member({T2}, {T1: {0}, T2: {0}}),
        B: member({T2}, {T1: {1}, T2: {1}}),
    }
    assert uniform.assign(members, {T1: 2, T2: 2}) == expect(A={T2: {0}}, B={T2: {1}})


def test_uniform_extra_partition_goes_to_the_member_that_holds_it() -> None:
    # 7 partitions over 3 members: one member gets 3. C already holds 3, so nobody moves
    # (Kafka would give the extra slot to the first member in its map and move one).
    members = {
        A: member({T1}, {T1: {0, 1}}),
        B: member({T1}, {T1: {2, 3}}),
        C: member({T1}, {T1: {4, 5, 6}}),
    }
    assert uniform.assign(members, {T1: 7}) == expect(
        A={T1: {0, 1}}, B={T1: {2, 3}}, C={T1: {4, 5, 6}}
    )


def test_uniform_homogeneous_is_as_sticky_as_balance_allows() -> None:
    rng = random.Random(1)
    partitions = {f"t{i}": rng.randint(1, 20) for i in range(8)}
    names = [f"m{i:02}" for i in range(12)]
    previous = uniform.assign({m: member(set(partitions)) for m in names}, partitions)
    # One member leaves, two join, one topic grows.
    partitions["t0"] += 5
    members = {m: member(set(partitions), previous[m]) for m in names[1:]}
    members |= {"new1": member(set(partitions)), "new2": member(set(partitions))}
    result = uniform.assign(members, partitions)
    check_valid_and_complete(members, partitions, result)
    check_balanced(result)
    # Each member keeps min(what it held, its quota); a member at the upper quota held it.
    total, n = sum(partitions.values()), len(members)
    quota_low = total // n
    expected_kept = 0
    extra = total % n
    held_counts = (sum(len(ps) for ps in s.assigned.values()) for s in members.values())
    for held in sorted(held_counts, reverse=True):
        quota = quota_low + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        expected_kept += min(held, quota)
    assert kept(members, result) == expected_kept


def test_uniform_partitions_beyond_the_topic_and_double_claims_are_dropped() -> None:
    members = {
        A: member({T1}, {T1: {0, 1, 9}}),  # 9 no longer exists
        B: member({T1}, {T1: {1, 2}}),  # 1 is also claimed by A (the first by id)
    }
    result = uniform.assign(members, {T1: 4})
    check_valid_and_complete(members, {T1: 4}, result)
    assert result == expect(A={T1: {0, 1}}, B={T1: {2, 3}})


# Uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest).


def test_uniform_heterogeneous_first_assignment_two_members_two_topics() -> None:
    members = {A: member({T1, T3}), B: member({T3})}
    result = uniform.assign(members, {T1: 3, T3: 2})
    check_valid_and_complete(members, {T1: 3, T3: 2}, result)
    assert result == expect(A={T1: {0, 1, 2}}, B={T3: {0, 1}})


def test_uniform_heterogeneous_unbalanced_previous_assignment() -> None:
    members = {
        A: member({T1}, {T1: {0, 1, 2}}),
        B: member({T1, T2}, {T1: {3}, T2: {0}}),
        C: member({T1, T2, T3}, {T1: {4, 5}, T2: {1, 2, 3}, T3: {0, 1, 2, 3}}),
    }
    assert uniform.assign(members, {T1: 6, T2: 4, T3: 4}) == expect(
        A={T1: {0, 1, 2, 5}}, B={T1: {3}, T2: {0, 1, 2, 3}}, C={T1: {4}, T3: {0, 1, 2, 3}}
    )


def test_uniform_heterogeneous_partitions_added() -> None:
    members = {
        A: member({T1, T3}, {T1: {0, 1, 2, 3}, T3: {0, 1}}),
        B: member({T1, T2, T3, T4}, {T2: {0, 1, 2}, T4: {0, 1, 2}}),
    }
    assert uniform.assign(members, {T1: 6, T2: 5, T3: 3, T4: 3}) == expect(
        A={T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}}, B={T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}}
    )


def test_uniform_heterogeneous_member_and_partitions_added() -> None:
    members = {
        A: member({T1}, {T1: {0, 2}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1, 2}}),
        C: member({T1, T2}),
    }
    assert uniform.assign(members, {T1: 6, T2: 7}) == expect(
        A={T1: {0, 2, 3, 4, 5}}, B={T1: {1}, T2: {1, 2, 6}}, C={T2: {0, 3, 4, 5}}
    )


def test_uniform_heterogeneous_member_removed() -> None:
    members = {
        A: member({T1, T3}, {T1: {0, 1, 2}, T3: {0, 1}}),
        B: member({T2}, {T2: {3, 4, 5, 6}}),
    }
    assert uniform.assign(members, {T1: 3, T2: 8, T3: 3}) == expect(
        A={T1: {0, 1, 2}, T3: {0, 1, 2}}, B={T2: set(range(8))}
    )


def test_uniform_heterogeneous_subscription_removed() -> None:
    members = {
        A: member({T1}, {T1: {0, 2}, T2: {1, 3}}),
        B: member({T1, T2}, {T1: {1}, T2: {0, 2, 4}}),
    }
    assert uniform.assign(members, {T1: 3, T2: 5}) == expect(
        A={T1: {0, 1, 2}}, B={T2: {0, 1, 2, 3, 4}}
    )


def test_uniform_heterogeneous_topic_partitions_run_out_before_balance() -> None:
    members = {
        A: member({T1, T2, T3}, {T1: {0, 1}, T2: {0, 1}, T3: {0, 1}}),
        B: member({T1, T2, T3}),
        C: member(set()),  # makes the group heterogeneous, as in Kafka's test
    }
    assert uniform.assign(members, {T1: 2, T2: 2, T3: 2}) == expect(
        A={T2: {0}, T3: {0, 1}}, B={T1: {0, 1}, T2: {1}}, C={}
    )


def test_uniform_heterogeneous_member_without_subscription_gets_nothing() -> None:
    members = {A: member({T1}), B: member(set())}
    assert uniform.assign(members, {T1: 3}) == expect(A={T1: {0, 1, 2}}, B={})


def test_uniform_heterogeneous_balances_subscribers_of_shared_topics() -> None:
    # Half the members read topic1 only, half read topic1 and topic2: topic2 goes to the
    # second half, and topic1 evens out the totals.
    members = {f"m{i}": member({T1}) for i in range(4)}
    members |= {f"n{i}": member({T1, T2}) for i in range(4)}
    result = uniform.assign(members, {T1: 20, T2: 12})
    check_valid_and_complete(members, {T1: 20, T2: 12}, result)
    check_balanced(result)


def test_uniform_heterogeneous_member_joining_moves_few_partitions() -> None:
    rng = random.Random(3)
    partitions = {f"t{i}": rng.randint(5, 30) for i in range(10)}
    subs = {f"m{i:02}": set(rng.sample(sorted(partitions), 4)) for i in range(20)}
    previous = uniform.assign({m: member(s) for m, s in subs.items()}, partitions)
    members = {m: member(s, previous[m]) for m, s in subs.items()}
    members["new"] = member(set(partitions))
    result = uniform.assign(members, partitions)
    check_valid_and_complete(members, partitions, result)
    moved = sum(counts(previous).values()) - kept(members, result)
    # The newcomer needs about total / 21 partitions; little else should move.
    assert moved <= 2 * (sum(partitions.values()) // 21 + 1)
    assert counts(result)["new"] >= sum(partitions.values()) // 21 - 1


# Range (RangeAssignorTest).


def test_range_two_members_two_topics_same_subscriptions_are_co_partitioned() -> None:
    members = {A: member({T1, T3}), B: member({T1, T3})}
    assert range_assignor.assign(members, {T1: 3, T3: 2}) == expect(
        A={T1: {0, 1}, T3: {0}}, B={T1: {2}, T3: {1}}
    )


def test_range_three_members_three_topics_different_subscriptions() -> None:
    members = {A: member({T1, T2}), B: member({T3}), C: member({T2, T3})}
    assert range_assignor.assign(members, {T1: 3, T2: 3, T3: 2}) == expect(
        A={T1: {0, 1, 2}, T2: {0, 1}}, B={T3: {0}}, C={T2: {2}, T3: {1}}
    )


def test_range_more_members_than_partitions() -> None:
    members = {A: member({T1, T3}), B: member({T1, T3}), C: member({T1, T3})}
    assert range_assignor.assign(members, {T1: 3, T3: 2}) == expect(
        A={T1: {0}, T3: {0}}, B={T1: {1}, T3: {1}}, C={T1: {2}}
    )


def test_range_member_added_when_more_members_than_partitions() -> None:
    members = {
        A: member({T1, T2}, {T1: {0}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1}}),
        C: member({T1, T2}),
    }
    assert range_assignor.assign(members, {T1: 2, T2: 2}) == expect(
        A={T1: {0}, T2: {0}}, B={T1: {1}, T2: {1}}, C={}
    )


def test_range_partition_added_recomputes_the_ranges() -> None:
    members = {
        A: member({T1, T2}, {T1: {0, 1}, T2: {0, 1}}),
        B: member({T1, T2}, {T1: {2}, T2: {2}}),
    }
    assert range_assignor.assign(members, {T1: 4, T2: 4}) == expect(
        A={T1: {0, 1}, T2: {0, 1}}, B={T1: {2, 3}, T2: {2, 3}}
    )


def test_range_member_added_takes_the_last_range() -> None:
    members = {
        A: member({T1, T2}, {T1: {0, 1}, T2: {0, 1}}),
        B: member({T1, T2}, {T1: {2}, T2: {2}}),
        C: member({T1, T2}),
    }
    assert range_assignor.assign(members, {T1: 3, T2: 3}) == expect(
        A={T1: {0}, T2: {0}}, B={T1: {1}, T2: {1}}, C={T1: {2}, T2: {2}}
    )


def test_range_member_removed() -> None:
    members = {B: member({T1, T2}, {T1: {1}, T2: {1}})}
    assert range_assignor.assign(members, {T1: 3, T2: 3}) == expect(
        B={T1: {0, 1, 2}, T2: {0, 1, 2}}
    )


def test_range_subscriptions_removed() -> None:
    members = {
        A: member({T1}, {T1: {0}, T2: {0}}),
        B: member({T1, T2}, {T1: {1}, T2: {1}}),
        C: member({T2}, {T1: {2}, T2: {2}}),
    }
    assert range_assignor.assign(members, {T1: 3, T2: 3}) == expect(
        A={T1: {0, 1}}, B={T1: {2}, T2: {0, 1}}, C={T2: {2}}
    )


# A manual timing check (prints, does not assert):
# ASSIGNOR_TIMING=1 pytest tests/unit/test_consumer_group_assignors.py -k timing


@pytest.mark.skipif(not os.environ.get("ASSIGNOR_TIMING"), reason="manual timing check")
def test_timing_1000_members_10000_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(0)
    partitions = {f"topic-{i:03}": 100 for i in range(100)}
    names = [f"member-{i:04}" for i in range(1000)]
    topics = sorted(partitions)
    cases = {
        "homogeneous": {m: member(set(topics)) for m in names},
        "heterogeneous": {m: member(set(rng.sample(topics, 10))) for m in names},
    }
    lines = []
    for label, members in cases.items():
        for assignor in (uniform, range_assignor):
            began = time.perf_counter()
            first = assignor.assign(members, partitions)
            elapsed = time.perf_counter() - began
            # Then a member leaves and one joins, from the first assignment.
            again = {m: s._replace(assigned=first[m]) for m, s in members.items()}
            del again[names[0]]
            again["member-new"] = members[names[1]]._replace(assigned={})
            began = time.perf_counter()
            assignor.assign(again, partitions)
            rebalance = time.perf_counter() - began
            lines.append(
                f"{assignor.name:8} {label:13} first {elapsed * 1000:7.1f} ms, "
                f"after a leave and a join {rebalance * 1000:7.1f} ms"
            )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
