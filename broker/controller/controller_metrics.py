"""The controller's metrics (Kafka's KafkaController gauges and ControllerStats meters).

Every broker reports them; only the active controller reports non-zero values, as in
Kafka, so ``sum`` over the brokers of a cluster gives the cluster's figure whichever broker
controls it. Election counters are the controller's since it took over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from purgatory.broker.controller.election import Election, preferred_imbalance
from purgatory.broker.controller.quorum_controller import QuorumController
from purgatory.broker.ops.metrics import gauge
from purgatory.protocol.inter_broker_messages import PartitionState


def controller_families(
    controller: Callable[[], QuorumController | None],
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
        brokers = active.image.brokers.values() if active else ()
        yield gauge(
            "purgatory_fenced_brokers",
            "Registered brokers that are fenced (heartbeats stopped for "
            "broker.session.timeout.ms, or not caught up yet), on the controller (Kafka's "
            "FencedBrokerCount).",
            sum(b.fenced for b in brokers),
        )
        yield gauge(
            "purgatory_active_brokers",
            "Registered brokers that are not fenced, on the controller (Kafka's "
            "ActiveBrokerCount).",
            sum(not b.fenced for b in brokers),
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


def _partitions(controller: QuorumController | None) -> Iterator[PartitionState]:
    if controller is not None:
        for topic in controller.image.topics.values():
            yield from topic.partitions
