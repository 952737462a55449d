"""What a consumer is assigned and where it stands in each partition.

Two positions per partition, as in Kafka's classic consumer: the application's (the next
record ``poll`` hands out) and the fetcher's (the next offset it fetches), which runs
ahead by what sits in the chunk queue. A seek moves both and starts a new *epoch* of the
partition, so chunks fetched before it are recognised as stale and dropped. Partitions
that cannot be fetched now keep their reason here (retried), errors the application must
see wait here for the next ``poll``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog

from purgatory.protocol.errors import KafkaError, error_name

TopicPartition = tuple[str, int]


class SubscriptionState:
    def __init__(self, client_id: str) -> None:
        self.assignment: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}  # the application's next offset
        self.fetch_positions: dict[TopicPartition, int] = {}  # the fetchers' next offset
        self.epochs: dict[TopicPartition, int] = {}
        self.highwater: dict[TopicPartition, int] = {}
        self.trouble: dict[TopicPartition, KafkaError] = {}  # why a partition is not fetched
        self.errors: list[KafkaError] = []  # raised by the next poll
        self.wakeup = asyncio.Event()  # the assignment or a position changed
        self.log = structlog.get_logger("consumer").bind(client_id=client_id)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.assignment = list(dict.fromkeys(partitions))
        for tp in list(self.positions):
            if tp not in self.assignment:
                for table in (
                    self.positions,
                    self.fetch_positions,
                    self.epochs,
                    self.highwater,
                    self.trouble,
                ):
                    table.pop(tp, None)
        self.wakeup.set()

    def set_position(self, tp: TopicPartition, offset: int) -> None:
        """Move both the application and the fetcher to ``offset``; chunks of the
        partition fetched before go stale (a new epoch)."""
        self.positions[tp] = offset
        self.fetch_positions[tp] = offset
        self.epochs[tp] = self.epochs.get(tp, 0) + 1
        self.wakeup.set()

    def is_current(self, tp: TopicPartition, epoch: int) -> bool:
        """Whether what was fetched in ``epoch`` is still wanted (not reassigned or
        sought meanwhile)."""
        return self.epochs.get(tp) == epoch and tp in self.positions

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp in self.assignment if tp in self.fetch_positions]

    # -- lag -----------------------------------------------------------------------------

    def fetcher_lag(self, tp: TopicPartition) -> int | None:
        """High watermark - the fetcher's next offset (Kafka's FetcherLagMetrics)."""
        hw, position = self.highwater.get(tp), self.fetch_positions.get(tp)
        return None if hw is None or position is None else max(hw - position, 0)

    def max_lag(self) -> int:
        """The largest fetcher lag over the assigned partitions (Kafka's MaxLag)."""
        lags = [self.fetcher_lag(tp) for tp in self.assignment]
        return max((lag for lag in lags if lag is not None), default=0)

    def consumer_lag(self, tp: TopicPartition) -> int | None:
        """High watermark - the application's next offset: how far behind it really is."""
        hw, position = self.highwater.get(tp), self.positions.get(tp)
        return None if hw is None or position is None else max(hw - position, 0)

    # -- trouble and errors --------------------------------------------------------------

    def note_trouble(self, errors: dict[TopicPartition, KafkaError]) -> None:
        """Record why partitions cannot be fetched; log a partition once per change of its
        error, not at every retry."""
        for tp, error in errors.items():
            previous = self.trouble.get(tp)
            self.trouble[tp] = error
            if previous is None or previous.code != error.code:
                self.log.warning(
                    "partition_unavailable",
                    partition=f"{tp[0]}-{tp[1]}",
                    error=error_name(error.code),
                    detail=str(error),
                )

    def available(self, tp: TopicPartition) -> None:
        """``tp`` was fetched without error."""
        if self.trouble.pop(tp, None) is not None:
            self.log.warning("partition_available", partition=f"{tp[0]}-{tp[1]}")

    def unavailable(self) -> dict[TopicPartition, str]:
        return {tp: str(e) for tp, e in self.trouble.items() if tp in self.assignment}

    def raise_errors(self) -> None:
        if self.errors:
            error, self.errors = self.errors[0], []
            raise error
