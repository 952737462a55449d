"""The simulated remote tier (Kafka's RemoteStorageManager): copied segments, and reads that
take a modelled latency and fail at a configured rate.

The latency model and error rate are read from the broker config at every read, so
changing them at run time (``PUT /v1/config/remote.storage.latency.ms``) affects the next
read. The store holds the segments it was given by the RemoteLogManager, keyed by
(topic id, partition) so a re-created topic never sees an old one's data.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.log.log_segment import LogSegment

# The 99th percentile of the standard normal distribution.
Z_99 = 2.3263478740408408

RemotePartition = tuple[str, int]  # (topic id, partition)


class RemoteStorageError(Exception):
    """A read from the remote store failed (simulated, or its segment is gone)."""


class RemoteFetchInfo(NamedTuple):
    """One partition's read from the remote tier (Kafka's RemoteStorageFetchInfo)."""

    remote_partition: RemotePartition
    topic: str
    partition: int
    segment_base_offset: int
    fetch_offset: int
    max_bytes: int


class LatencyModel(NamedTuple):
    """``fixed``: always ``median_ms``; ``lognormal``: median ``median_ms``, 99th percentile
    ``p99_ms``."""

    distribution: str
    median_ms: float
    p99_ms: float

    @classmethod
    def from_config(cls, config: BrokerConfig) -> LatencyModel:
        return cls(
            config["remote.storage.latency.distribution"],
            config["remote.storage.latency.ms"],
            config["remote.storage.latency.p99.ms"],
        )

    def sample_ms(self, rng: random.Random) -> float:
        if self.distribution == "fixed" or self.median_ms <= 0:
            return self.median_ms
        sigma = math.log(max(self.p99_ms, self.median_ms) / self.median_ms) / Z_99
        return rng.lognormvariate(math.log(self.median_ms), sigma)


class RemoteStorage:
    """Segments copied from tiered logs, and reads of them."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.segments: dict[RemotePartition, dict[int, LogSegment]] = {}
        self.size_bytes = 0

    def copy_log_segment(self, key: RemotePartition, segment: LogSegment) -> None:
        """Store a closed segment (its bytes are immutable, so they are shared, not copied)."""
        stored = self.segments.setdefault(key, {})
        if segment.base_offset not in stored:
            stored[segment.base_offset] = segment
            self.size_bytes += segment.size_bytes

    def delete_log_segment(self, key: RemotePartition, base_offset: int) -> None:
        segment = self.segments.get(key, {}).pop(base_offset, None)
        if segment is not None:
            self.size_bytes -= segment.size_bytes

    def retain(self, key: RemotePartition, base_offsets: Iterable[int]) -> None:
        """Delete the partition's segments other than ``base_offsets`` (what its log still
        lists: a follower that started over, retention that ran meanwhile)."""
        keep = set(base_offsets)
        for base in [b for b in self.segments.get(key, {}) if b not in keep]:
            self.delete_log_segment(key, base)

    def delete_partition(self, key: RemotePartition) -> None:
        for base in list(self.segments.get(key, {})):
            self.delete_log_segment(key, base)
        self.segments.pop(key, None)

    def partitions(self) -> list[RemotePartition]:
        return list(self.segments)

    async def fetch_log_segment(self, info: RemoteFetchInfo) -> bytes:
        """Batches of one remote segment from the one holding ``fetch_offset``, within
        ``max_bytes`` (the first regardless), after the modelled latency. Raises
        RemoteStorageError at the configured error rate or if the segment is gone."""
        await self.sleep(LatencyModel.from_config(self.config).sample_ms(self.rng) / 1000)
        if self.rng.random() < self.config["remote.storage.error.rate"]:
            raise RemoteStorageError(
                f"simulated remote read failure for {info.topic}-{info.partition} "
                f"(remote.storage.error.rate={self.config['remote.storage.error.rate']})"
            )
        segment = self.segments.get(info.remote_partition, {}).get(info.segment_base_offset)
        if segment is None:
            raise RemoteStorageError(
                f"remote segment {info.segment_base_offset} of {info.topic}-{info.partition} "
                "was deleted"
            )
        return b"".join(segment.read(info.fetch_offset, info.max_bytes))
