"""The transaction coordinator's metrics (Kafka's transaction-coordinator-metrics and
TransactionMarkerChannelManager gauges), read from the coordinator when scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from purgatory.broker.coordinator.transaction.transaction_metadata import TransactionState
from purgatory.broker.ops.metrics import add_histogram, counter, gauge, purgatory_families

if TYPE_CHECKING:
    from purgatory.broker.coordinator.transaction.transaction_coordinator import (
        TransactionCoordinator,
    )


def transaction_families(coordinator: TransactionCoordinator) -> Callable[[], Iterator[Metric]]:
    def collect() -> Iterator[Metric]:
        txns = list(coordinator.state.owned_transactions())
        by_state = GaugeMetricFamily(
            "purgatory_transactional_ids",
            "Transactional ids this broker coordinates, by the state of their transaction.",
            labels=["state"],
        )
        for state in TransactionState:
            by_state.add_metric([state.kafka_name], sum(t.state is state for t in txns))
        yield by_state
        ended = CounterMetricFamily(
            "purgatory_transactions_ended",
            "Transactions this coordinator ended, by outcome (its own aborts, on a timeout "
            "or a new producer of the id, included).",
            labels=["outcome"],
        )
        for outcome in ("commit", "abort"):
            ended.add_metric([outcome], coordinator.ended[outcome])
        yield ended
        yield counter(
            "purgatory_transactions_timed_out",
            "Transactions aborted because they stayed open past transaction.timeout.ms.",
            coordinator.timed_out,
        )
        completion = HistogramMetricFamily(
            "purgatory_transaction_completion_seconds",
            "From PrepareCommit or PrepareAbort written (EndTxn answered) to CompleteCommit or "
            "CompleteAbort written: the markers in every partition, by outcome.",
            labels=["outcome"],
        )
        for outcome, histogram in coordinator.completion.items():
            add_histogram(completion, [outcome], histogram)
        yield completion
        yield gauge(
            "purgatory_txn_markers_in_flight",
            "Transactions whose markers are being written now (Kafka's "
            "TransactionMarkerChannelManager queues).",
            coordinator.markers.in_flight,
        )
        yield gauge(
            "purgatory_transaction_state_partitions_loading",
            "Partitions of __transaction_state this broker is loading transactional ids from.",
            len(coordinator.state.loading),
        )
        yield from purgatory_families((coordinator.timeouts,))

    return collect
