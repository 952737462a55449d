"""The group coordinator's metrics (Kafka's GroupMetadataManager gauges and
group-coordinator-metrics), read from the coordinator when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

from purgatory.broker.coordinator.consumer_group import ConsumerGroupState
from purgatory.broker.coordinator.group_metadata import GroupState
from purgatory.broker.coordinator.share_group import ShareGroupState
from purgatory.broker.ops.metrics import counter, gauge, purgatory_families

if TYPE_CHECKING:
    from purgatory.broker.coordinator.group_coordinator import GroupCoordinator


def group_families(coordinator: GroupCoordinator) -> Callable[[], Iterator[Metric]]:
    def collect() -> Iterator[Metric]:
        groups = list(coordinator.manager.owned_groups())
        by_state = GaugeMetricFamily(
            "purgatory_groups",
            "Classic groups this broker coordinates, by state (Kafka's NumGroups*).",
            labels=["state"],
        )
        for state in GroupState:
            by_state.add_metric([state.value], sum(g.state is state for g in groups))
        yield by_state
        consumer_groups = GaugeMetricFamily(
            "purgatory_consumer_groups",
            "KIP-848 consumer groups this broker coordinates, by state (Kafka's "
            "consumer-group-count).",
            labels=["state"],
        )
        for consumer_state in ConsumerGroupState:
            consumer_groups.add_metric(
                [consumer_state.value], sum(g.state is consumer_state for g in groups)
            )
        yield consumer_groups
        yield counter(
            "purgatory_consumer_group_rebalances",
            "Group epoch bumps of KIP-848 consumer groups (Kafka's "
            "consumer-group-rebalance-count).",
            coordinator.consumer_groups.rebalances,
        )
        share_groups = GaugeMetricFamily(
            "purgatory_share_groups",
            "KIP-932 share groups this broker coordinates, by state (Kafka's share-group-count).",
            labels=["state"],
        )
        for share_state in ShareGroupState:
            share_groups.add_metric(
                [share_state.value], sum(g.state is share_state for g in groups)
            )
        yield share_groups
        yield counter(
            "purgatory_share_group_rebalances",
            "Group epoch bumps of KIP-932 share groups (Kafka's share-group-rebalance-count).",
            coordinator.share_groups.rebalances,
        )
        yield gauge(
            "purgatory_consumer_group_timeouts",
            "Session and revocation timeouts of KIP-848 consumer group members waiting on "
            "the timing wheel.",
            len(coordinator.consumer_groups.timer),
        )
        yield gauge(
            "purgatory_group_members",
            "Members of the groups this broker coordinates.",
            sum(len(g.members) for g in groups),
        )
        yield gauge(
            "purgatory_group_offsets",
            "Committed offsets held by this coordinator (Kafka's NumOffsets).",
            sum(len(g.offsets) for g in groups),
        )
        yield counter(
            "purgatory_group_rebalances",
            "Rebalances this coordinator started (a group entering PreparingRebalance).",
            coordinator.rebalancer.rebalances,
        )
        yield counter(
            "purgatory_group_expired_offsets",
            "Committed offsets deleted by offset retention.",
            coordinator.offsets.expired_offsets,
        )
        yield gauge(
            "purgatory_offsets_partitions_loading",
            "Partitions of __consumer_offsets this broker is loading groups from.",
            len(coordinator.manager.loading),
        )
        yield from purgatory_families(
            (coordinator.rebalancer.purgatory, coordinator.sessions.purgatory)
        )

    return collect
