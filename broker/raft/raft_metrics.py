"""RaftMetrics: the quorum member's figures (Kafka's raft-metrics group: current-leader,
current-epoch, current-state, high-watermark, log-end-offset, commit-latency,
election-latency), kept as plain fields and exported when /metrics is scraped."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from purgatory.common.histogram import Histogram

if TYPE_CHECKING:
    from purgatory.broker.raft.kafka_raft_client import KafkaRaftClient

STATES = ("unattached", "prospective", "candidate", "leader", "follower", "resigned")


class RaftMetrics:
    __slots__ = (
        "_appended",
        "_election_started",
        "commit_latency",
        "election_latency",
        "elections",
        "epoch",
        "leader",
        "snapshots",
        "state",
    )

    def __init__(self) -> None:
        self.state = "unattached"
        self.leader = -1
        self.epoch = 0
        self.elections = 0  # elections this member stood in (candidacies)
        self.snapshots = 0
        self.commit_latency = Histogram()  # leader: append to commit, seconds
        self.election_latency = Histogram()  # candidacy to leadership, seconds
        self._appended: deque[tuple[int, float]] = deque()  # (offset, appended at), leader
        self._election_started: float | None = None

    def appended(self, last_offset: int, at: float) -> None:
        self._appended.append((last_offset, at))

    def committed(self, high_watermark: int, at: float) -> None:
        pending = self._appended
        while pending and pending[0][0] < high_watermark:
            self.commit_latency.observe(at - pending.popleft()[1])

    def election_started(self, at: float) -> None:
        self.elections += 1
        self._election_started = at
        self._appended.clear()

    def election_won(self, at: float) -> None:
        if self._election_started is not None:
            self.election_latency.observe(at - self._election_started)
            self._election_started = None


def raft_families(client: Callable[[], KafkaRaftClient | None]) -> Callable[[], Iterator[Metric]]:
    """A metrics source reading this broker's quorum member when scraped."""

    def collect() -> Iterator[Metric]:
        raft = client()
        if raft is None:
            return
        metrics = raft.metrics
        yield GaugeMetricFamily(
            "purgatory_raft_current_leader",
            "The quorum leader (the active controller's node id) as this member knows it; "
            "-1 when none is known (Kafka's current-leader).",
            value=metrics.leader,
        )
        yield GaugeMetricFamily(
            "purgatory_raft_current_epoch",
            "The quorum epoch this member is in (Kafka's current-epoch).",
            value=metrics.epoch,
        )
        state = GaugeMetricFamily(
            "purgatory_raft_current_state",
            "1 for the role this member plays in the quorum (Kafka's current-state).",
            labels=["state"],
        )
        for name in STATES:
            state.add_metric([name], float(metrics.state == name))
        yield state
        yield GaugeMetricFamily(
            "purgatory_raft_high_watermark",
            "Entries of the metadata log below this offset are committed (Kafka's high-watermark).",
            value=raft.high_watermark,
        )
        yield GaugeMetricFamily(
            "purgatory_raft_log_end_offset",
            "The end of this member's metadata log (Kafka's log-end-offset).",
            value=raft.log.end_offset,
        )
        latency = HistogramMetricFamily(
            "purgatory_raft_commit_latency_seconds",
            "On the leader: from appending a metadata record to a majority holding it "
            "(Kafka's commit-latency).",
        )
        latency.add_metric([], metrics.commit_latency.cumulative(), metrics.commit_latency.sum)
        yield latency
        elections = HistogramMetricFamily(
            "purgatory_raft_election_latency_seconds",
            "From standing as candidate to winning (Kafka's election-latency).",
        )
        elections.add_metric(
            [], metrics.election_latency.cumulative(), metrics.election_latency.sum
        )
        yield elections
        yield CounterMetricFamily(
            "purgatory_raft_elections",
            "Elections this member stood in as candidate.",
            value=metrics.elections,
        )
        yield CounterMetricFamily(
            "purgatory_raft_snapshots",
            "Snapshots of the committed metadata this member took.",
            value=metrics.snapshots,
        )

    return collect
