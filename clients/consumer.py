"""Consumer: background fetchers fill a bounded chunk queue; the application polls it.

As in Kafka's classic consumer: one fetcher per broker it fetches from long-polls that
broker for the assigned partitions it leads and puts each partition's fetched records in a
queue of at most ``queued.max.message.chunks`` chunks (each up to
``fetch.message.max.bytes``, Kafka's name for ``max.partition.fetch.bytes``). A full queue
blocks the fetcher's ``put``, which is what throttles fetching; memory never grows. A
fetcher's position (its next fetch offset) moves when a fetch is processed, before the
``put``; the application's position when ``poll`` hands records out. So the fetcher's lag
(``MaxLag``: high watermark - next fetch offset) only tells how far behind the application
is when queue and chunks are small, while ``high watermark - consumed offset`` (and the
offset checker's ``log end - committed``) always does.

Partitions are assigned by hand (``assign``) or by the group (``subscribe``: the
ConsumerCoordinator joins ``group_id`` and the group's leader splits the topics' partitions
among its members, again at every rebalance). Committed offsets live with the group's
coordinator (OffsetCommit/OffsetFetch): manual ``commit()`` and auto-commit every
``auto.commit.interval.ms``, and before partitions are given up in a rebalance. The
fetchers live in ``clients.fetcher``, assignment and positions in
``clients.subscription_state``, commits in ``clients.offset_commits``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, Unpack

import structlog

from purgatory.clients.cluster import ClientCluster
from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.consumer_coordinator import ConsumerCoordinator
from purgatory.clients.coordinator_client import CoordinatorClient
from purgatory.clients.fetcher import Chunk, ConsumerMessage, FetchConfig, Fetcher, OnFetch
from purgatory.clients.offset_commits import OffsetCommits
from purgatory.clients.security import ClientSecurity, SecurityKeywords
from purgatory.clients.subscription_state import SubscriptionState, TopicPartition
from purgatory.common.histogram import FetchLatency
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode, KafkaError

__all__ = ["Consumer", "ConsumerMessage", "ConsumerRebalanceListener"]


class ConsumerRebalanceListener(Protocol):
    """Told which partitions a rebalance takes away (before, after their positions were
    committed with auto-commit) and which it gives (after); either method may be async."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> Any: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> Any: ...


class Consumer:
    def __init__(
        self,
        bootstrap: str,
        *,
        group_id: str | None = None,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        fetch_message_max_bytes: int | None = None,
        queued_max_message_chunks: int = 2,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        on_fetch: OnFetch | None = None,
        client_id: str = "purgatory-consumer",
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: Sequence[str] = ("range", "roundrobin"),
        isolation_level: str = "read_uncommitted",
        **security: Unpack[SecurityKeywords],
    ) -> None:
        """``security``: Kafka's client security configs (``security_protocol``,
        ``sasl_mechanism``, ...; clients/security.py)."""
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto.offset.reset must be earliest, latest or none, got {auto_offset_reset!r}"
            )
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                "isolation.level must be read_uncommitted or read_committed, got "
                f"{isolation_level!r}"
            )
        self.read_committed = isolation_level == "read_committed"
        if queued_max_message_chunks < 1:
            raise ValueError("queued.max.message.chunks must be at least 1")
        self.group_id = group_id
        self.client_id = client_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.cluster = ClientCluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=max(request_timeout_ms, fetch_max_wait_ms + 5000),
            security=ClientSecurity.from_keywords(security),
        )
        self.state = SubscriptionState(client_id)
        self.queue: asyncio.Queue[Chunk] = asyncio.Queue(maxsize=queued_max_message_chunks)
        config = FetchConfig(
            fetch_min_bytes,
            fetch_max_wait_ms,
            fetch_max_bytes,
            # fetch.message.max.bytes is the classic consumer's name for the same bound.
            fetch_message_max_bytes or max_partition_fetch_bytes,
            retry_backoff_ms,
            self.read_committed,
        )
        self.fetcher = Fetcher(
            self.cluster, self.state, config, self.queue, self._out_of_range, on_fetch
        )
        self._current: deque[ConsumerMessage] = deque()  # the chunk being handed out
        self.owner = f"{client_id}@{socket.gethostname()}"  # shown by the offset checker
        self.log = structlog.get_logger("consumer").bind(client_id=client_id)
        self.group: CoordinatorClient | None = None
        self.commits: OffsetCommits | None = None
        if group_id is not None:
            self.group = CoordinatorClient(
                self.cluster,
                group_id,
                retry_backoff_ms=retry_backoff_ms,
                timeout_ms=request_timeout_ms,
            )
            self.commits = OffsetCommits(self.group, self.owner, group_instance_id, self.log)
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.partition_assignment_strategy = list(partition_assignment_strategy)
        self.retry_backoff_ms = retry_backoff_ms
        self.coordinator: ConsumerCoordinator | None = None
        self._listener: ConsumerRebalanceListener | None = None

    async def start(self) -> None:
        await self.cluster.refresh([])

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def fetch_latency(self) -> dict[int, FetchLatency]:
        """Per broker: fetch round trips, total and true (total minus the broker's wait)."""
        return self.fetcher.fetch_latency

    @property
    def fetch_errors(self) -> dict[int, int]:
        """Retried partition errors, by code."""
        return self.fetcher.fetch_errors

    @property
    def queue_high_water(self) -> int:
        """The most chunks ever queued at once."""
        return self.fetcher.queue_high_water

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.state.assign(partitions)
        if self._current:
            head = self._current[0]
            if (head.topic, head.partition) not in self.state.positions:
                self._current.clear()

    def subscribe(
        self, topics: list[str], listener: ConsumerRebalanceListener | None = None
    ) -> None:
        """Consume ``topics`` as a member of ``group_id``: the group assigns the partitions
        (the first ``poll`` joins it). ``listener`` hears of each rebalance."""
        if self.group is None:
            raise ValueError("subscribe needs a group_id")
        if not topics:
            raise ValueError("subscribe to at least one topic")
        if self.coordinator is not None:
            raise RuntimeError("already subscribed")
        self._listener = listener
        self.coordinator = ConsumerCoordinator(
            self.cluster,
            self.group,
            topics,
            assignors=self.partition_assignment_strategy,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            group_instance_id=self.group_instance_id,
            retry_backoff_ms=self.retry_backoff_ms,
            on_revoked=self._on_revoked,
            on_assigned=self._on_assigned,
        )
        assert self.commits is not None
        self.commits.coordinator = self.coordinator

    async def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        if self.enable_auto_commit and self.commits is not None:
            await self.commits.commit_moved(self.state.positions)
        await self._tell_listener("on_partitions_revoked", partitions)
        self.assign([])

    async def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        self.assign(partitions)
        await self._tell_listener("on_partitions_assigned", partitions)
        try:
            await self._ensure_running()
        except (ConnectionClosed, KafkaError) as exc:  # the next poll tries again
            self.log.info("positions_not_ready", error=str(exc))

    async def _tell_listener(self, method: str, partitions: list[TopicPartition]) -> None:
        if self._listener is None:
            return
        result = getattr(self._listener, method)(list(partitions))
        if inspect.isawaitable(result):
            await result

    async def assign_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Assign every partition of ``topics`` (which must exist)."""
        await self.cluster.ensure_topics(topics, auto_create=False)
        tps = [(t, p.partition_index) for t in topics for p in self.cluster.partitions_for(t) or []]
        self.assign(tps)
        return tps

    def assignment(self) -> list[TopicPartition]:
        return list(self.state.assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self.state.assignment:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned")
        if offset < 0:
            raise ValueError(f"cannot seek to negative offset {offset}")
        self._set_position(tp, offset)

    def _set_position(self, tp: TopicPartition, offset: int) -> None:
        """Move both the application and the fetcher to ``offset``; queued chunks of the
        partition go stale and are dropped when they come out."""
        self.state.set_position(tp, offset)
        if self._current and (self._current[0].topic, self._current[0].partition) == tp:
            self._current.clear()

    async def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self.state.assignment), m.EARLIEST_TIMESTAMP)

    async def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self.state.assignment), m.LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition) -> int | None:
        """The offset of the next record the application will get."""
        return self.state.positions.get(tp)

    def fetch_position(self, tp: TopicPartition) -> int | None:
        """The offset the fetcher will fetch next."""
        return self.state.fetch_positions.get(tp)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch."""
        return self.state.highwater.get(tp)

    def fetcher_lag(self, tp: TopicPartition) -> int | None:
        return self.state.fetcher_lag(tp)

    def max_lag(self) -> int:
        return self.state.max_lag()

    def consumer_lag(self, tp: TopicPartition) -> int | None:
        return self.state.consumer_lag(tp)

    def queued_chunks(self) -> int:
        return self.queue.qsize()

    def unavailable(self) -> dict[TopicPartition, str]:
        """Assigned partitions that cannot be fetched now, with the last reason; they are
        retried with backoff while the others are fetched."""
        return self.state.unavailable()

    async def _reset(self, tps: list[TopicPartition], timestamp: int) -> None:
        """Move ``tps`` to the offset of ``timestamp``; partitions whose leader cannot
        answer now keep no position and are tried again by the next poll."""
        errors: dict[TopicPartition, KafkaError] = {}
        offsets = await self.cluster.list_offsets(tps, timestamp, errors, self.read_committed)
        for tp, offset in offsets.items():
            self._set_position(tp, offset)
        self.state.note_trouble(errors)

    def _reset_timestamp(self) -> int:
        """Where auto.offset.reset moves a partition without a usable position."""
        return m.EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else m.LATEST_TIMESTAMP

    async def _out_of_range(self, tp: TopicPartition, offset: int) -> None:
        """A fetch at ``offset`` was out of range: reset by auto.offset.reset, or (none)
        stop fetching the partition and raise from the next poll."""
        if self.auto_offset_reset == "none":
            self.state.errors.append(
                KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"{tp[0]}-{tp[1]} offset {offset}")
            )
            self.state.fetch_positions.pop(tp, None)
            return
        with contextlib.suppress(ConnectionClosed, KafkaError):
            await self._reset([tp], self._reset_timestamp())

    async def list_offsets(
        self, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return await self.cluster.list_offsets(tps, timestamp, None, self.read_committed)

    async def _initialize_positions(self) -> None:
        positions = self.state.positions
        missing = [tp for tp in self.state.assignment if tp not in positions]
        if not missing:
            return
        if self.group is not None:
            try:
                committed = await self.group.committed(missing)
            except (ConnectionClosed, KafkaError) as exc:
                if isinstance(exc, KafkaError) and not exc.retriable:
                    raise
                # Unreadable now: try again at the next poll.
                error = (
                    exc
                    if isinstance(exc, KafkaError)
                    else KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
                )
                self.state.note_trouble(dict.fromkeys(missing, error))
                return
            for tp, (offset, _) in committed.items():
                self._set_position(tp, offset)
            # No committed offset: reset.
            missing = [tp for tp in missing if tp not in positions]
        if missing:
            if self.auto_offset_reset == "none":
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"no position for {missing[0][0]}-{missing[0][1]} and auto.offset.reset=none",
                )
            await self._reset(missing, self._reset_timestamp())

    # -- polling -------------------------------------------------------------------------------

    async def _ensure_running(self) -> None:
        """Positions for every assigned partition, a fetcher for each broker leading one of
        them, and the auto-commit task."""
        await self._initialize_positions()
        leaders, leaderless = await self.cluster.by_leader(self.state.assignment)
        self.state.note_trouble(
            {tp: KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader now") for tp in leaderless}
        )
        self.fetcher.ensure_fetching(list(leaders))
        if self.enable_auto_commit and self.commits is not None:
            self.commits.start_auto_commit(
                self.auto_commit_interval_ms, lambda: self.state.positions
            )

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ConsumerMessage]:
        """Records from the chunk queue: waits up to ``timeout_ms`` for the first, then hands
        out what is already fetched (at most ``max_records``)."""
        state = self.state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        if self.coordinator is not None:
            if not await self._await_assignment(timeout_ms):
                return []
        elif not state.assignment:
            raise RuntimeError("no partitions assigned (assign them, or subscribe with a group)")
        state.raise_errors()
        await self._ensure_running()
        limit = max_records if max_records is not None else 1 << 62
        out: list[ConsumerMessage] = []
        while len(out) < limit:
            if not self._current:
                chunk = self._next_chunk_nowait()
                if chunk is None:
                    if out:
                        break
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        async with asyncio.timeout(min(remaining, 0.5)):
                            chunk = await self.queue.get()
                    except TimeoutError:
                        state.raise_errors()
                        await self._ensure_running()  # leaders may have moved
                        continue
                if not state.is_current(chunk.tp, chunk.epoch):
                    continue
                position = state.positions[chunk.tp]
                self._current.extend(r for r in chunk.records if r.offset >= position)
                continue
            record = self._current.popleft()
            out.append(record)
            state.positions[(record.topic, record.partition)] = record.offset + 1
        return out

    async def _await_assignment(self, timeout_ms: int) -> bool:
        """Start group membership on the first poll, and wait (up to ``timeout_ms``) for
        a generation's assignment; raise what ended the membership for good."""
        coordinator = self.coordinator
        assert coordinator is not None
        coordinator.start()
        if not coordinator.joined.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_ms / 1000):
                    await coordinator.joined.wait()
        if coordinator.fatal is not None:
            raise coordinator.fatal
        if coordinator.joined.is_set() and self.state.assignment:
            return True
        if coordinator.joined.is_set():  # a member without partitions: nothing to fetch
            await asyncio.sleep(timeout_ms / 1000)
        return False

    def _next_chunk_nowait(self) -> Chunk | None:
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    # -- committed offsets ---------------------------------------------------------------------

    def _require_commits(self) -> OffsetCommits:
        if self.commits is None:
            raise RuntimeError("this consumer has no group_id")
        return self.commits

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: what the application has consumed) for the group,
        in the current generation when the group assigned them. The commit's metadata
        names this consumer (the offset checker's owner). Raises KafkaError naming the
        first partition not committed."""
        commits = self._require_commits()
        await commits.commit(dict(self.state.positions) if offsets is None else offsets)

    async def committed_offsets(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        committed = await self._require_commits().group.committed(tps)
        return {tp: committed[tp][0] if tp in committed else None for tp in tps}

    async def close(self) -> None:
        """Stop fetching; with auto-commit, commit what was consumed; as a group member, tell
        the rebalance listener the partitions are revoked and leave; close connections."""
        await self.fetcher.close()
        if self.commits is not None:
            await self.commits.stop_auto_commit()
            if self.enable_auto_commit:
                await self.commits.commit_moved(self.state.positions)
        if self.coordinator is not None:
            if self.coordinator.in_generation and self.group_instance_id is None:
                # A dynamic member that leaves gives its partitions up (Kafka's
                # onLeavePrepare); a static one keeps them for when it comes back.
                try:
                    await self._tell_listener("on_partitions_revoked", self.coordinator.assignment)
                except Exception as exc:  # closing goes on: the group must hear the leave
                    self.log.warning("rebalance_listener_failed", error=repr(exc))
            await self.coordinator.close()
        await self.cluster.close()
