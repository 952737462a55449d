"""The broker-wide budget for the bytes all in-memory logs hold (``log.memory.max.bytes``).

Kafka has no such limit: its logs are on disk, bounded by retention. Here they are in
memory, so a broker that would otherwise grow until the machine swaps deletes instead,
as retention would: the oldest closed segment of the largest log goes first, again and
again, until the logs fit. Only committed segments go (all records below the high
watermark), and in a tiered log only ones the remote tier holds, so nothing a producer
is still waiting on, or that exists nowhere else, is deleted. Each round is logged (at
most once a minute) and counted. When only active segments or uncommitted records are
left, the budget cannot be met: that is logged, and checked again after another
sixteenth of the budget has been appended (not on every append).
"""

from __future__ import annotations

import heapq
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import Metric

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.log.log import LogMemory
from purgatory.broker.ops.metrics import counter, gauge
from purgatory.broker.replication.partition import Partition

_LOG_EVERY_S = 60.0


class LogMemoryBudget:
    def __init__(
        self, config: BrokerConfig, partitions: Callable[[], Iterable[Partition]], log: Any
    ) -> None:
        self.config = config
        self.partitions = partitions
        self.log = log
        self.memory = LogMemory(self.enforce)
        self.evicted_segments = 0
        self.evicted_bytes = 0
        self._logged_at: dict[str, float] = {}
        self._logged_evicted = (0, 0)  # the two counters when the last eviction line went
        self.limit_changed()

    @property
    def limit(self) -> int:
        limit = self.config["log.memory.max.bytes"]
        return limit if limit >= 0 else sys.maxsize

    def limit_changed(self) -> None:
        """``log.memory.max.bytes`` changed: apply it now."""
        self.memory.trigger = self.limit
        if self.memory.used > self.limit:
            self.enforce()

    def enforce(self) -> None:
        """Delete the oldest closed segments of the largest logs until the logs fit."""
        memory, limit = self.memory, self.limit
        largest = [
            (-p.log.size_bytes, i, p)
            for i, p in enumerate(self.partitions())
            if len(p.log.segments) > 1
        ]
        heapq.heapify(largest)
        while memory.used > limit and largest:
            _, i, partition = heapq.heappop(largest)
            freed = partition.log.evict_oldest_segment(partition.high_watermark)
            if not freed:
                continue  # nothing more this log may give now
            self.evicted_segments += 1
            self.evicted_bytes += freed
            if len(partition.log.segments) > 1:
                heapq.heappush(largest, (-partition.log.size_bytes, i, partition))
        segments, freed_bytes = self._logged_evicted
        if self.evicted_segments > segments and self._log(
            "log_memory_budget_evicted",
            segments=self.evicted_segments - segments,
            bytes=self.evicted_bytes - freed_bytes,
            hint="log.memory.max.bytes: the oldest committed segments of the largest "
            "logs were deleted, as retention would; logged at most once a minute",
        ):
            self._logged_evicted = (self.evicted_segments, self.evicted_bytes)
        if memory.used <= limit:
            memory.trigger = limit
            return
        memory.trigger = memory.used + max(limit // 16, 1 << 20)
        self._log(
            "log_memory_budget_unreachable",
            hint="only active segments or uncommitted records are left: lower "
            "log.segment.bytes or raise log.memory.max.bytes; logged at most once a minute",
        )

    def _log(self, event: str, **fields: Any) -> bool:
        """Warn of ``event`` unless it was logged within the last minute; True if logged."""
        now = time.monotonic()
        if now - self._logged_at.get(event, -_LOG_EVERY_S) < _LOG_EVERY_S:
            return False
        self._logged_at[event] = now
        self.log.warning(
            event, log_bytes=self.memory.used, limit=self.config["log.memory.max.bytes"], **fields
        )
        return True

    def collect(self) -> Iterator[Metric]:
        yield gauge(
            "purgatory_log_memory_bytes",
            "Bytes all local partition logs of this broker hold (log.memory.max.bytes bounds it).",
            self.memory.used,
        )
        yield counter(
            "purgatory_log_memory_evicted_segments",
            "Log segments deleted to keep the logs within log.memory.max.bytes.",
            self.evicted_segments,
        )
        yield counter(
            "purgatory_log_memory_evicted_bytes",
            "Bytes of log segments deleted to keep the logs within log.memory.max.bytes.",
            self.evicted_bytes,
        )
