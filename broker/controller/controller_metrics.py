"""The controller's metrics (Kafka's KafkaController gauges and ControllerStats meters).

Every broker reports them; only the active controller reports non-zero values, as in
Kafka, so ``sum`` over the brokers of a cluster gives the cluster's figure whichever broker
controls it. Election counters are the controller's since it took over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from purgatory.broker.controller.controller import Controller
from purgatory.broker.controller.election import Election, preferred_imbalance
from purgatory.broker.ops.metrics import gauge
from purgatory.protocol.inter_broker_messages import PartitionState


def controller_families(
    controller: Callable[[], Controller | None],
) -> Callable[[], Iterator[Metric]]:
    """A metrics source reading whichever controller this broker runs, if any, when scraped."""

    def collect() -> Iterator[Metric]:
        active = controller()
        yield gauge(
            "purgatory_active_controller",
            "1 on the broker that is the active controller, else 0.",
            active is not None,
        )
        yield gauge(
            "purgatory_offline_partitions",
            "Partitions without a leader (no in-sync replica is live), on the controller.",
            sum(p.leader_id < 0 for p in _partitions(active)),
        )
        yield gauge(
            "purgatory_preferred_replica_imbalance",
            "Partitions not led by their preferred (first) replica, on the controller.",
            sum(preferred_imbalance(p) for p in _partitions(active)),
        )
        yield gauge(
            "purgatory_fenced_brokers",
            "Members whose heartbeats stopped for broker.session.timeout.ms, or that shut "
            "down, on the controller.",
            len(set(active.members) - active.live) if active else 0,
        )
        yield gauge(
            "purgatory_active_brokers",
            "Members registered and heartbeating, on the controller.",
            len(active.live) if active else 0,
        )
        elections = CounterMetricFamily(
            "purgatory_leader_elections",
            "Partition leaders elected by this controller, by kind: clean (a live in-sync "
            "replica), unclean (any live replica, unclean.leader.election.enable), preferred.",
            labels=["kind"],
        )
        for kind in Election:
            elections.add_metric([kind.value], active.elections[kind] if active else 0)
        yield elections

    return collect


def _partitions(controller: Controller | None) -> Iterator[PartitionState]:
    if controller is not None:
        for topic in controller.topics.values():
            yield from topic.partitions
