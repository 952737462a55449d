"""The quorum's configuration from a broker's (Kafka's QuorumConfig): its timings, and where
a member keeps its log (``metadata.log.dir``)."""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.raft.log_store import FileLogStore, LogStore, MemoryLogStore


@dataclass(frozen=True)
class QuorumConfig:
    """Kafka's ``controller.quorum.*`` timings, in milliseconds."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 << 20
    snapshot_bytes: int = 20 << 20  # metadata.log.max.record.bytes.between.snapshots


def quorum_config(config: BrokerConfig) -> QuorumConfig:
    fetch_timeout = config["controller.quorum.fetch.timeout.ms"]
    return QuorumConfig(
        election_timeout_ms=config["controller.quorum.election.timeout.ms"],
        fetch_timeout_ms=fetch_timeout,
        election_backoff_max_ms=config["controller.quorum.election.backoff.max.ms"],
        request_timeout_ms=config["controller.quorum.request.timeout.ms"],
        retry_backoff_ms=config["controller.quorum.retry.backoff.ms"],
        # Kafka waits at most 500 ms; a fetch must come back well within the fetch timeout.
        fetch_max_wait_ms=min(500, fetch_timeout // 4),
        snapshot_bytes=config["metadata.log.max.record.bytes.between.snapshots"],
    )


def open_store(config: BrokerConfig, voters: frozenset[int]) -> LogStore:
    """The member's store: ``metadata.log.dir`` when set, else memory. A voter of a quorum
    of several that keeps its state in memory forgets its votes and entries when it
    restarts, which Raft does not survive: it is warned about."""
    directory = config["metadata.log.dir"]
    if directory:
        return FileLogStore(directory, config.broker_id, config["cluster.id"])
    if len(voters) > 1 and config.broker_id in voters:
        structlog.get_logger("raft").bind(broker_id=config.broker_id).warning(
            "metadata_log_in_memory",
            hint="this controller keeps the quorum's log and votes in memory: restarted, it "
            "forgets them, and two voters restarting together can lose committed metadata; "
            "set metadata.log.dir (purgatory cluster, the container and "
            "purgatory.testing.Cluster do)",
        )
    return MemoryLogStore()
