"""Replica fetchers: a follower's long-poll fetch loop, one per leader broker it follows
(Kafka's ReplicaFetcherThread with num.replica.fetchers=1)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from typing import Protocol

import structlog
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.log.leader_epoch_cache import UNDEFINED_EPOCH, EpochEndOffset
from purgatory.broker.ops.metrics import add_histogram, gauge
from purgatory.broker.purgatory import Scheduler
from purgatory.broker.replication.fetch_params import (
    FetchParams,
    FetchPartitionData,
    FetchResult,
    PartitionFetchInfo,
    TopicPartition,
)
from purgatory.broker.replication.partition import Partition
from purgatory.common.histogram import FetchLatency
from purgatory.common.sample_ring import SampleRing
from purgatory.protocol.errors import ErrorCode, KafkaError, error_name
from purgatory.protocol.records import (
    CorruptRecordError,
    iter_batches,
    validate_batch,
)

SAMPLES_KEPT = 20000  # per source broker


class FetcherStats:
    """A follower's fetching from one leader broker (Kafka's FetcherStats and lag)."""

    __slots__ = (
        "bytes",
        "errors",
        "lag",
        "latency",
        "requests",
        "samples",
        "truncations",
        "truncations_refused",
    )

    def __init__(self) -> None:
        # The latest fetch round trips, (wall-clock end, total s, wait s), for experiments
        # that need request-level samples (GET /v1/samples/replica-fetch).
        self.samples = SampleRing(SAMPLES_KEPT, 3)
        self.requests = 0
        self.bytes = 0
        self.errors = 0
        self.truncations = 0  # logs cut back to the leader's (KIP-101)
        self.truncations_refused = 0  # cuts below the high watermark, refused (must stay 0)
        self.latency = FetchLatency()
        self.lag: dict[tuple[str, int], int] = {}  # leader HW - own LEO, per partition


# (partition, the leader epoch the follower knows, the epoch whose end it asks for)
EpochAsk = tuple[TopicPartition, int, int]


class LeaderEndPoint(Protocol):
    """How a fetcher reaches its leader (the network layer's RemoteLeaderEndPoint)."""

    async def fetch(self, params: FetchParams) -> FetchResult: ...

    async def offsets_for_leader_epoch(
        self, asks: list[EpochAsk]
    ) -> dict[TopicPartition, tuple[int, EpochEndOffset]]: ...

    async def close(self) -> None: ...


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker.

    A partition starts *truncating* whenever it follows a new leader epoch: the fetcher
    asks the leader where the follower's latest epoch ends (OffsetForLeaderEpoch) and cuts
    its log back to there before fetching it (KIP-101/279). Each round sends one fetch
    (``replica_id`` = this broker) asking for each other partition from its log end
    offset; the leader holds it up to ``replica.fetch.wait.max.ms`` for
    ``replica.fetch.min.bytes``. The round's latency is recorded as total and *true*
    (total minus the leader's ``wait_time_ms``), with the wait itself.

    Errors back off as in Kafka's fetcher thread: a partition the leader answered with an
    error is left out for ``replica.fetch.backoff.ms`` while the others carry on; a round
    that fails as a whole (connection lost, request-level error) pauses every partition.
    """

    def __init__(
        self,
        broker_id: int,
        source_broker: int,
        leader: LeaderEndPoint,
        config: BrokerConfig,
        stats: FetcherStats,
        scheduler: Scheduler,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.scheduler = scheduler
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch  # this run's registration, sent with every fetch
        self.source_broker = source_broker
        self.leader = leader
        self.config = config
        self.stats = stats
        self.partitions: dict[TopicPartition, Partition] = {}
        self.truncating: set[TopicPartition] = set()
        self._truncated_in: dict[TopicPartition, int] = {}  # the leader epoch truncated for
        self._delayed: dict[TopicPartition, int] = {}  # partition -> left out until (ms)
        self.paused = False  # tests and fault injection hold a fetcher here
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.log = structlog.get_logger("replica_fetcher").bind(
            broker_id=broker_id, source_broker=source_broker
        )

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.leader.close()

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self._delayed.pop(partition.key, None)
        if self._truncated_in.get(partition.key) != partition.leader_epoch:
            self.truncating.add(partition.key)
        self._wakeup.set()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self.truncating.discard(key)
        self._truncated_in.pop(key, None)
        self._delayed.pop(key, None)
        self.stats.lag.pop(key, None)

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            ready = self._ready()
            if not ready or self.paused:
                await self._wait_for_work()
                continue
            try:
                fetchable = ready
                if self.truncating:
                    truncating = ready & self.truncating
                    if truncating:
                        await self._truncate(truncating)
                    fetchable = ready - self.truncating  # with those that just finished
                if fetchable:
                    await self._fetch_once(fetchable)
            except (ConnectionError, KafkaError) as exc:
                self.stats.errors += 1
                self.log.warning("replica_fetch_failed", error=str(exc))
                await self.leader.close()
                await asyncio.sleep(self.config["replica.fetch.backoff.ms"] / 1000)

    def _ready(self) -> AbstractSet[TopicPartition]:
        """The partitions not backing off after an error."""
        if not self._delayed:  # every round of a healthy follower
            return self.partitions.keys()
        now = self.scheduler.now_ms()
        for key, until in list(self._delayed.items()):
            if until <= now:
                del self._delayed[key]
        return self.partitions.keys() - self._delayed.keys()

    def _delay(self, key: TopicPartition) -> None:
        self._delayed[key] = self.scheduler.now_ms() + self.config["replica.fetch.backoff.ms"]

    async def _wait_for_work(self) -> None:
        """Until a partition is added or unpaused, or the first backoff ends."""
        self._wakeup.clear()
        timer = None
        if self._delayed and not self.paused:
            timer = self.scheduler.call_at(min(self._delayed.values()), self._wakeup.set)
        try:
            await self._wakeup.wait()
        finally:
            if timer is not None:
                timer.cancel()

    def _params(self, keys: AbstractSet[TopicPartition]) -> FetchParams:
        config = self.config
        partition_max = config["replica.fetch.max.bytes"]
        asked = []  # a loop, not a generator: this runs every round
        for key, partition in self.partitions.items():
            if key in keys:
                log = partition.log
                info = PartitionFetchInfo(
                    log.log_end_offset, partition_max, partition.leader_epoch, log.log_start_offset
                )
                asked.append((key, info))
        return FetchParams(
            self.broker_id,
            config["replica.fetch.wait.max.ms"],
            config["replica.fetch.min.bytes"],
            config["replica.fetch.response.max.bytes"],
            tuple(asked),
            self.broker_epoch(),
        )

    async def _fetch_once(self, keys: AbstractSet[TopicPartition]) -> None:
        """One round for ``keys``; a partition answered with an error backs off."""
        started = self.scheduler.precise_s()
        result = await self.leader.fetch(self._params(keys))
        total = self.scheduler.precise_s() - started
        stats = self.stats
        stats.requests += 1
        stats.latency.observe(total, result.wait_ms / 1000)
        stats.samples.append(self.scheduler.wall_ms() / 1000, total, result.wait_ms / 1000)
        for key, data in result.partitions:
            partition = self.partitions.get(key)
            if partition is not None and not self._process(partition, data):
                self._delay(key)

    async def _truncate(self, keys: AbstractSet[TopicPartition]) -> None:
        """Ask the leader where each truncating partition's latest epoch ends and cut the
        log back to there; one the leader could not answer for backs off (then asks again)."""
        asks = []
        for key in sorted(keys):
            partition = self.partitions[key]
            log = partition.log
            latest = log.leader_epochs.latest_epoch
            # Nothing written under any epoch, or no records held (an epoch a leader of an
            # empty log started, as Kafka's makeLeader does): nothing to cut.
            if latest < 0 or log.log_end_offset == log.log_start_offset:
                self._truncation_done(partition)
                continue
            asks.append((key, partition.leader_epoch, latest))
        if not asks:
            return
        answers = await self.leader.offsets_for_leader_epoch(asks)
        for key, _, _ in asks:
            current = self.partitions.get(key)
            if current is None or key not in answers or key not in self.truncating:
                continue  # removed (or moved to another epoch) while the leader answered
            error, (epoch, end_offset) = answers[key]
            if error:
                self._delay(key)
                self.log.info(
                    "offset_for_leader_epoch_error",
                    topic=key[0],
                    partition=key[1],
                    error=error_name(error),
                )
                continue
            self._truncate_to_leader(current, epoch, end_offset)

    def _truncate_to_leader(self, partition: Partition, epoch: int, end_offset: int) -> None:
        """KIP-279: the leader's epoch ``epoch`` (at most the one asked about) ends at
        ``end_offset``. If the follower has that epoch too, its log keeps the shorter of the
        two ends and is done; if not, it cuts back to where its own largest earlier epoch
        ends and asks again."""
        log = partition.log
        # (An undefined epoch from the leader is undefined here too.)
        own_epoch, own_end = log.leader_epochs.end_offset_for(epoch, log.log_end_offset)
        if own_epoch == UNDEFINED_EPOCH:  # nothing this old on one side: keep what is committed
            target, done = min(partition.high_watermark, log.log_end_offset), True
        else:
            target, done = min(end_offset, own_end), own_epoch == epoch
        if target < log.log_end_offset:
            self._cut(partition, target, reason="divergent_epoch")
        if done or log.leader_epochs.latest_epoch < 0:
            self._truncation_done(partition)

    def _truncation_done(self, partition: Partition) -> None:
        self.truncating.discard(partition.key)
        self._truncated_in[partition.key] = partition.leader_epoch

    def _cut(self, partition: Partition, offset: int, reason: str) -> None:
        """Truncate to ``offset``, but never below the high watermark this replica has
        seen (acknowledged records), unless the topic allows unclean leader election (the
        one way a leader can lack them)."""
        log = partition.log
        before, high_watermark = log.log_end_offset, partition.high_watermark
        if offset < high_watermark and not partition.unclean_allowed:
            self.stats.truncations_refused += 1
            self.log.error(
                "log_truncation_refused",
                topic=partition.topic,
                partition=partition.index,
                reason=reason,
                to_offset=offset,
                high_watermark=high_watermark,
                hint="the leader lacks records this replica saw acknowledged; only an "
                "unclean election may lose them, and it is not enabled",
            )
            offset = high_watermark
            if offset >= before:
                return
        log.truncate_to(offset)
        partition.high_watermark = min(high_watermark, log.log_end_offset)
        self.stats.truncations += 1
        self.log.warning(
            "log_truncated",
            topic=partition.topic,
            partition=partition.index,
            reason=reason,
            from_offset=before,
            to_offset=log.log_end_offset,
            # Only after an unclean election may a replica lose committed records.
            below_high_watermark=log.log_end_offset < high_watermark,
        )

    def _process(self, partition: Partition, data: FetchPartitionData) -> bool:
        log = partition.log
        if data.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if log.log_end_offset < data.log_start_offset:
                # Behind the leader's log start (restarted empty, or retention moved it):
                # start over where the leader's log starts.
                self.log.warning(
                    "replica_reset",
                    topic=partition.topic,
                    partition=partition.index,
                    log_end_offset=log.log_end_offset,
                    leader_log_start=data.log_start_offset,
                )
                log.reset_to(max(data.log_start_offset, 0))
                partition.high_watermark = log.log_end_offset
            else:
                # Ahead of the leader (it was elected uncleanly, or lost a suffix we still
                # hold): keep only what the leader has committed.
                self._cut(partition, max(data.high_watermark, 0), reason="ahead_of_leader")
            return True
        if data.error:
            self.stats.errors += 1
            self.log.info(
                "replica_fetch_partition_error",
                topic=partition.topic,
                partition=partition.index,
                error=error_name(data.error),
            )
            return False
        if data.records:
            try:
                for batch in iter_batches(data.records):
                    stored = bytes(batch)
                    info = validate_batch(stored, verify_records=False, stored=True)
                    if info.base_offset + info.record_count <= log.log_end_offset:
                        continue  # already have it
                    log.append_as_follower(stored, info)
            except (CorruptRecordError, ValueError) as exc:
                self.stats.errors += 1
                self.log.error(
                    "replica_append_failed",
                    topic=partition.topic,
                    partition=partition.index,
                    error=str(exc),
                )
                return False
            self.stats.bytes += len(data.records)
        partition.follower_update_high_watermark(data.high_watermark)
        partition.follower_update_log_start_offset(data.log_start_offset)
        self.stats.lag[partition.key] = max(0, data.high_watermark - log.log_end_offset)
        return True


class ReplicaFetcherManager:
    """The fetchers of one broker, one per leader broker it follows partitions of."""

    def __init__(
        self,
        broker_id: int,
        members: dict[int, tuple[str, int]],
        config: BrokerConfig,
        scheduler: Scheduler,
        leader_endpoint: Callable[[int], LeaderEndPoint],
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.scheduler = scheduler
        self.broker_id = broker_id
        self.members = members
        self.config = config
        self.broker_epoch = broker_epoch
        self.stats: dict[int, FetcherStats] = {}  # by source (leader) broker, kept after stops
        self.leader_endpoint = leader_endpoint  # broker id -> a way to fetch from it
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[TopicPartition, int] = {}  # partition -> leader it is fetched from

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader (moving it from another fetcher if needed)."""
        leader = partition.leader_id
        current = self._following.get(partition.key)
        if current is not None and current != leader:
            self.unfollow(partition.key)
        if leader < 0 or leader not in self.members:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id,
                leader,
                self.leader_endpoint(leader),
                self.config,
                self.stats.setdefault(leader, FetcherStats()),
                self.scheduler,
                self.broker_epoch,
            )
            self.fetchers[leader] = fetcher
            fetcher.start()
        fetcher.add(partition)
        self._following[partition.key] = leader

    def unfollow(self, key: TopicPartition) -> None:
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(key)

    async def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        self._following.clear()

    def collect_metrics(self) -> Iterator[Metric]:
        """Kafka's FetcherStats, FetcherLagMetrics and MaxLag, by source broker."""
        source = ["source_broker"]
        requests = CounterMetricFamily(
            "purgatory_replica_fetcher_requests", "Fetches sent by this follower.", labels=source
        )
        fetched = CounterMetricFamily(
            "purgatory_replica_fetcher_bytes", "Record bytes replicated.", labels=source
        )
        errors = CounterMetricFamily(
            "purgatory_replica_fetcher_errors",
            "Failed fetches and partition errors.",
            labels=source,
        )
        latency = HistogramMetricFamily(
            "purgatory_replica_fetch_latency_seconds",
            "A follower's fetch round trips: total, and true (total minus the leader's "
            "wait_time_ms, KIP-736).",
            labels=["source_broker", "kind"],
        )
        wait = HistogramMetricFamily(
            "purgatory_replica_fetch_wait_seconds",
            "Time the follower's fetches waited in the leader's purgatory (wait_time_ms).",
            labels=source,
        )
        truncations = CounterMetricFamily(
            "purgatory_log_truncations",
            "Times this follower cut a log back to its leader's (a divergent or uncommitted "
            "suffix, KIP-101), by the leader followed.",
            labels=source,
        )
        refused = CounterMetricFamily(
            "purgatory_log_truncations_refused",
            "Times this follower refused to cut a log below its high watermark (the leader "
            "lacked acknowledged records; only an unclean election may lose them). Stays 0 "
            "on a healthy cluster.",
            labels=source,
        )
        lag = GaugeMetricFamily(
            "purgatory_replica_fetcher_lag",
            "Leader high watermark minus this follower's log end offset, per partition.",
            labels=["topic", "partition"],
        )
        max_lag = 0
        for broker, stats in sorted(self.stats.items()):
            label = [str(broker)]
            requests.add_metric(label, stats.requests)
            fetched.add_metric(label, stats.bytes)
            errors.add_metric(label, stats.errors)
            truncations.add_metric(label, stats.truncations)
            refused.add_metric(label, stats.truncations_refused)
            add_histogram(latency, [str(broker), "total"], stats.latency.total)
            add_histogram(latency, [str(broker), "true"], stats.latency.true)
            add_histogram(wait, label, stats.latency.wait)
            for (topic, partition), value in sorted(stats.lag.items()):
                lag.add_metric([topic, str(partition)], value)
                max_lag = max(max_lag, value)
        yield from (requests, fetched, errors, truncations, refused, latency, wait, lag)
        yield gauge(
            "purgatory_replica_fetcher_max_lag",
            "The largest lag over every partition this broker follows (Kafka's MaxLag).",
            max_lag,
        )
