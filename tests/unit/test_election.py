"""The controller's election and ISR rules (broker/controller/election.py), one case each."""

from __future__ import annotations

from purgatory.broker.controller.election import (
    Election,
    ElectionResult,
    alter_isr,
    change_partition,
    elect_on_request,
    move_leadership,
    preferred_imbalance,
)
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import PartitionState


def state(leader: int, isr: list[int], replicas: list[int] | None = None) -> PartitionState:
    return PartitionState(0, leader, 5, replicas or [0, 1, 2], isr, 7)


def live(*brokers: int) -> frozenset[int]:
    return frozenset(brokers)


def test_a_fenced_leader_is_replaced_by_the_first_live_isr_member_in_replica_order() -> None:
    change = change_partition(state(0, [0, 1, 2], [0, 2, 1]), live(1, 2))
    assert change is not None and change.election is Election.CLEAN
    assert (change.state.leader_id, change.state.isr) == (2, [2, 1])
    assert (change.state.leader_epoch, change.state.partition_epoch) == (6, 8)


def test_a_fenced_follower_leaves_the_isr_and_the_leader_epoch_stays() -> None:
    change = change_partition(state(0, [0, 1, 2]), live(0, 1))
    assert change is not None and change.election is None and not change.offline
    assert (change.state.leader_id, change.state.isr) == (0, [0, 1])
    assert (change.state.leader_epoch, change.state.partition_epoch) == (5, 8)


def test_the_last_isr_member_fenced_stays_in_the_isr_and_the_partition_goes_offline() -> None:
    change = change_partition(state(0, [0]), live(1, 2))
    assert change is not None and change.offline
    assert (change.state.leader_id, change.state.isr, change.state.leader_epoch) == (-1, [0], 6)


def test_an_offline_partition_is_led_again_when_its_isr_member_returns_with_its_log() -> None:
    offline = state(-1, [0])
    change = change_partition(offline, live(0, 1, 2))
    assert change is not None and change.election is Election.CLEAN
    assert (change.state.leader_id, change.state.isr) == (0, [0])


def test_other_replicas_do_not_lead_an_offline_partition_without_unclean_election() -> None:
    assert change_partition(state(-1, [0]), live(1, 2)) is None


def test_a_broker_that_restarted_without_its_log_leaves_every_isr_and_leadership() -> None:
    change = change_partition(state(0, [0, 1, 2]), live(0, 1, 2), lost_data=live(0))
    assert change is not None and change.election is Election.CLEAN
    assert (change.state.leader_id, change.state.isr) == (1, [1, 2])


def test_a_sole_isr_member_that_restarted_empty_never_leads_it_again() -> None:
    change = change_partition(state(0, [0]), live(0, 1, 2), lost_data=live(0))
    assert change is not None and change.offline
    assert (change.state.leader_id, change.state.isr) == (-1, [])
    # Returning (live) changes nothing: it lacks the data.
    assert change_partition(change.state, live(0, 1, 2)) is None


def test_unclean_election_picks_the_first_live_replica_and_makes_it_the_isr() -> None:
    change = change_partition(state(-1, []), live(2, 1), unclean=True)
    assert change is not None and change.election is Election.UNCLEAN
    assert (change.state.leader_id, change.state.isr) == (1, [1])


def test_unclean_election_prefers_a_clean_one_when_an_isr_member_is_live() -> None:
    change = change_partition(state(0, [0, 2]), live(1, 2), unclean=True)
    assert change is not None and change.election is Election.CLEAN
    assert change.state.leader_id == 2


def test_unclean_election_with_no_live_replica_leaves_the_partition_offline() -> None:
    assert change_partition(state(-1, []), live(), unclean=True) is None


def test_preferred_election_moves_leadership_to_the_first_replica_if_it_is_in_sync() -> None:
    moved = change_partition(state(1, [0, 1, 2]), live(0, 1, 2), preferred=True)
    assert moved is not None and moved.election is Election.PREFERRED
    assert (moved.state.leader_id, moved.state.leader_epoch) == (0, 6)
    assert preferred_imbalance(state(1, [0, 1, 2])) and not preferred_imbalance(moved.state)


def test_preferred_election_does_not_move_to_a_replica_outside_the_isr() -> None:
    assert change_partition(state(1, [1, 2]), live(0, 1, 2), preferred=True) is None


def test_nothing_changes_when_every_isr_member_is_live() -> None:
    assert change_partition(state(0, [0, 1, 2]), live(0, 1, 2)) is None


# -- ElectLeaders ------------------------------------------------------------------------


def test_a_requested_preferred_election_moves_leadership_to_the_first_replica() -> None:
    result = elect_on_request(state(1, [0, 1, 2]), live(0, 1, 2), Election.PREFERRED)
    assert isinstance(result, ElectionResult) and result.election is Election.PREFERRED
    assert (result.state.leader_id, result.state.leader_epoch) == (0, 6)


def test_a_preferred_election_is_not_needed_when_the_preferred_replica_leads() -> None:
    result = elect_on_request(state(0, [0, 1, 2]), live(0, 1, 2), Election.PREFERRED)
    assert isinstance(result, tuple) and result[0] == ErrorCode.ELECTION_NOT_NEEDED


def test_a_preferred_replica_out_of_the_isr_or_not_live_cannot_be_elected() -> None:
    for partition, brokers in ((state(1, [1, 2]), live(0, 1, 2)), (state(1, [0, 1]), live(1, 2))):
        result = elect_on_request(partition, brokers, Election.PREFERRED)
        assert isinstance(result, tuple) and result[0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_a_requested_unclean_election_leads_an_offline_partition_with_any_live_replica() -> None:
    result = elect_on_request(state(-1, [0]), live(1, 2), Election.UNCLEAN)
    assert isinstance(result, ElectionResult) and result.election is Election.UNCLEAN
    assert (result.state.leader_id, result.state.isr) == (1, [1])


def test_an_unclean_election_is_not_needed_while_a_live_leader_leads() -> None:
    result = elect_on_request(state(1, [1]), live(1, 2), Election.UNCLEAN)
    assert isinstance(result, tuple) and result[0] == ErrorCode.ELECTION_NOT_NEEDED


def test_an_unclean_election_without_a_live_replica_is_refused() -> None:
    result = elect_on_request(state(-1, [0], [0, 1]), live(2), Election.UNCLEAN)
    assert isinstance(result, tuple) and result[0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


# -- AlterPartition ----------------------------------------------------------------------


def test_alter_isr_applies_a_current_leaders_change_with_a_new_partition_epoch() -> None:
    updated = alter_isr(state(0, [0, 1]), 0, 5, 7, [2, 0, 1], live(0, 1, 2))
    assert isinstance(updated, PartitionState)
    assert (updated.isr, updated.partition_epoch) == ([0, 1, 2], 8)


def test_alter_isr_refuses_stale_senders_bad_sets_and_ineligible_replicas() -> None:
    current = state(0, [0, 1])
    assert alter_isr(current, 1, 5, 7, [0, 1], live(0, 1, 2)) == ErrorCode.FENCED_LEADER_EPOCH
    assert alter_isr(current, 0, 4, 7, [0, 1], live(0, 1, 2)) == ErrorCode.FENCED_LEADER_EPOCH
    assert alter_isr(current, 0, 5, 6, [0], live(0, 1, 2)) == ErrorCode.INVALID_UPDATE_VERSION
    assert alter_isr(current, 0, 5, 7, [1], live(0, 1, 2)) == ErrorCode.INVALID_REQUEST
    assert alter_isr(current, 0, 5, 7, [0, 0], live(0, 1, 2)) == ErrorCode.INVALID_REQUEST
    # Broker 2 is not eligible (fenced, or in controlled shutdown): it may not join.
    assert alter_isr(current, 0, 5, 7, [0, 1, 2], live(0, 1)) == ErrorCode.INELIGIBLE_REPLICA


def test_a_broker_in_controlled_shutdown_is_never_replaced_by_an_unclean_election() -> None:
    change = change_partition(state(0, [0]), live(1, 2), unclean=True, shutting_down=live(0))
    assert change is not None and change.offline and change.state.isr == [0]


def test_moving_leadership_makes_the_broker_the_preferred_replica_and_the_leader() -> None:
    result = move_leadership(state(0, [0, 1, 2]), 2, live(0, 1, 2))
    assert isinstance(result, ElectionResult) and result.election is Election.PREFERRED
    after = result.state
    assert (after.leader_id, after.replicas, after.isr) == (2, [2, 0, 1], [2, 0, 1])
    assert (after.leader_epoch, after.partition_epoch) == (6, 8)
    # Preferred now: a later preferred election (auto.leader.rebalance) leaves it there.
    assert not preferred_imbalance(after)
    assert change_partition(after, live(0, 1, 2), preferred=True) is None


def test_leadership_moves_only_to_a_live_in_sync_replica() -> None:
    cases = [
        (state(0, [0, 1], [0, 1]), 2, live(0, 1, 2), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (state(0, [0, 1]), 2, live(0, 1, 2), ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
        (state(0, [0, 1, 2]), 2, live(0, 1), ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
        (state(2, [0, 1, 2]), 2, live(0, 1, 2), ErrorCode.ELECTION_NOT_NEEDED),
    ]
    for partition, broker, brokers, code in cases:
        result = move_leadership(partition, broker, brokers)
        assert isinstance(result, tuple) and result[0] == code, (partition, broker)
