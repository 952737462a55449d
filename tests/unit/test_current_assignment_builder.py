"""Kafka's CurrentAssignmentBuilderTest on ``current_assignment_builder.reconcile``: one
reconciliation step of a member, from each state to each state."""

from __future__ import annotations

from collections.abc import Callable

from purgatory.broker.coordinator.consumer_group import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from purgatory.broker.coordinator.current_assignment_builder import reconcile

T1 = "1" * 32
T2 = "2" * 32


def parts(t1: tuple[int, ...], t2: tuple[int, ...]) -> Assignment:
    return {t: frozenset(ps) for t, ps in ((T1, t1), (T2, t2)) if ps}


def member(
    state: MemberState,
    epoch: int,
    previous: int,
    assigned: Assignment,
    revoking: Assignment | None = None,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "member",
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=revoking or {},
    )


def owned_by(epoch: int) -> Callable[[str, int], int]:
    return lambda _topic_id, _partition: epoch


FREE = owned_by(-1)
STABLE, UNREVOKED, UNRELEASED = (
    MemberState.STABLE,
    MemberState.UNREVOKED_PARTITIONS,
    MemberState.UNRELEASED_PARTITIONS,
)


def test_stable_to_stable_moves_to_the_target_epoch() -> None:
    m = member(STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, parts((1, 2, 3), (4, 5, 6)), owned_by(10), None)
    assert got == member(STABLE, 11, 10, parts((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_free_partitions() -> None:
    m = member(STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, parts((1, 2, 3, 4), (4, 5, 6, 7)), FREE, None)
    assert got == member(STABLE, 11, 10, parts((1, 2, 3, 4), (4, 5, 6, 7)))


def test_a_member_already_in_the_target_epoch_is_itself() -> None:
    m = member(STABLE, 11, 10, parts((1,), ()))
    assert reconcile(m, 11, parts((1, 2), ()), FREE, None) is m


def test_stable_to_unrevoked_keeps_the_epoch_and_lists_what_to_revoke() -> None:
    m = member(STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, parts((2, 3, 4), (5, 6, 7)), FREE, None)
    assert got == member(UNREVOKED, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))


def test_stable_to_unreleased_when_the_new_partitions_are_still_owned() -> None:
    m = member(STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, parts((1, 2, 3, 4), (4, 5, 6, 7)), owned_by(10), None)
    assert got == member(UNRELEASED, 11, 10, parts((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_when_the_heartbeat_owns_none_of_the_revoked() -> None:
    m = member(STABLE, 10, 10, parts((1, 2, 3), (4, 5, 6)))
    epochs = lambda topic_id, _p: 10 if topic_id == T2 else -1  # noqa: E731
    got = reconcile(m, 11, parts((1, 2, 3), (4, 5, 7)), epochs, [])
    assert got == member(UNRELEASED, 11, 10, parts((1, 2, 3), (4, 5)))


def test_unrevoked_to_stable_once_the_revoked_are_no_longer_owned() -> None:
    m = member(UNREVOKED, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    owned = [(T1, [2, 3]), (T2, [5, 6])]
    got = reconcile(m, 11, parts((2, 3), (5, 6)), FREE, owned)
    assert got == member(STABLE, 11, 10, parts((2, 3), (5, 6)))


def test_remains_unrevoked_while_any_revoked_partition_is_owned_or_it_does_not_say() -> None:
    m = member(UNREVOKED, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    target = parts((3,), (6,))
    assert reconcile(m, 12, target, FREE, None) == m
    assert reconcile(m, 12, target, FREE, [(T1, [1, 2, 3]), (T2, [5, 6])]) == m
    assert reconcile(m, 12, target, FREE, [(T1, [2, 3]), (T2, [4, 5, 6])]) == m


def test_unrevoked_to_unrevoked_in_the_next_epoch_when_the_target_shrank_again() -> None:
    m = member(UNREVOKED, 10, 10, parts((2, 3), (5, 6)), parts((1,), (4,)))
    owned = [(T1, [2, 3]), (T2, [5, 6])]
    got = reconcile(m, 12, parts((3,), (6,)), FREE, owned)
    assert got == member(UNREVOKED, 11, 10, parts((3,), (6,)), parts((2,), (5,)))


def test_unrevoked_to_unreleased() -> None:
    m = member(UNREVOKED, 11, 10, parts((2, 3), (5, 6)))
    owned = [(T1, [2, 3]), (T2, [5, 6])]
    got = reconcile(m, 11, parts((2, 3, 4), (5, 6, 7)), owned_by(10), owned)
    assert got == member(UNRELEASED, 11, 11, parts((2, 3), (5, 6)))


def test_unreleased_to_stable_in_a_new_epoch() -> None:
    m = member(UNRELEASED, 11, 11, parts((2, 3), (5, 6)))
    got = reconcile(m, 12, parts((2, 3), (5, 6)), owned_by(10), None)
    assert got == member(STABLE, 12, 11, parts((2, 3), (5, 6)))


def test_unreleased_to_stable_once_the_partitions_are_released() -> None:
    m = member(UNRELEASED, 11, 11, parts((2, 3), (5, 6)))
    got = reconcile(m, 11, parts((2, 3, 4), (5, 6, 7)), FREE, None)
    assert got == member(STABLE, 11, 11, parts((2, 3, 4), (5, 6, 7)))


def test_unreleased_stays_while_the_partitions_are_owned_elsewhere() -> None:
    m = member(UNRELEASED, 11, 11, parts((2, 3), (5, 6)))
    assert reconcile(m, 11, parts((2, 3, 4), (5, 6, 7)), owned_by(10), None) == m


def test_unreleased_to_unrevoked_when_the_target_takes_partitions_away() -> None:
    m = member(UNRELEASED, 11, 11, parts((2, 3), (5, 6)))
    got = reconcile(m, 12, parts((3,), (6,)), owned_by(10), None)
    assert got == member(UNREVOKED, 11, 11, parts((3,), (6,)), parts((2,), (5,)))


def test_a_partition_is_never_given_while_another_member_owns_it() -> None:
    """The invariant behind every case: whatever the owners' epochs, what a step assigns
    beyond what the member had is only free partitions."""
    m = member(STABLE, 3, 2, parts((0, 1), ()))
    owners = {(T1, 2): 3, (T2, 0): 2}
    epochs = lambda topic_id, p: owners.get((topic_id, p), -1)  # noqa: E731
    got = reconcile(m, 4, parts((0, 1, 2, 3), (0, 1)), epochs, None)
    assert got.state is UNRELEASED and got.member_epoch == 4
    assert got.assigned == parts((0, 1, 3), (1,))
