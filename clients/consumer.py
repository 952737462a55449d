"""Consumer: assign/seek/poll over partition leaders with ``fetch.min.bytes``,
``fetch.max.wait.ms``, ``max.partition.fetch.bytes`` and ``auto.offset.reset``; committed
offsets per group (OffsetCommit/OffsetFetch, stored by each partition's leader)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import msgspec

from clients.cluster import ClientCluster
from clients.connection import ConnectionClosed
from clients.stats import FetchLatency
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import METADATA_STALE, ErrorCode, KafkaError
from protocol.records import Header, decode_records

TopicPartition = tuple[str, int]


class ConsumerMessage(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


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
        auto_offset_reset: str = "latest",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        client_id: str = "purgatory-consumer",
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto.offset.reset must be earliest, latest or none, got {auto_offset_reset!r}"
            )
        self.group_id = group_id
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.auto_offset_reset = auto_offset_reset
        self.retry_backoff_ms = retry_backoff_ms
        self.cluster = ClientCluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=max(request_timeout_ms, fetch_max_wait_ms + 5000),
        )
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._highwater: dict[TopicPartition, int] = {}
        # Per broker: fetch round trips, total and true (total minus the broker's wait).
        self.fetch_latency: dict[int, FetchLatency] = {}

    async def start(self) -> None:
        await self.cluster.refresh([])

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- assignment and positions --------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._assignment = list(dict.fromkeys(partitions))
        for tp in list(self._positions):
            if tp not in self._assignment:
                del self._positions[tp]

    async def assign_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Assign every partition of ``topics`` (which must exist)."""
        await self.cluster.ensure_topics(topics, auto_create=False)
        tps = [(t, p.partition_index) for t in topics for p in self.cluster.partitions_for(t) or []]
        self.assign(tps)
        return tps

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._assignment:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned")
        if offset < 0:
            raise ValueError(f"cannot seek to negative offset {offset}")
        self._positions[tp] = offset

    async def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self._assignment), m.EARLIEST_TIMESTAMP)

    async def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        await self._reset(list(tps or self._assignment), m.LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition) -> int | None:
        return self._positions.get(tp)

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as of the last fetch."""
        return self._highwater.get(tp)

    async def _reset(self, tps: list[TopicPartition], timestamp: int) -> None:
        offsets = await self.list_offsets(tps, timestamp)
        self._positions.update(offsets)

    async def list_offsets(
        self, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for leader, group in (await self._by_leader(tps)).items():
            conn = await self.cluster.connection(leader)
            request = m.ListOffsetsRequest(
                -1,
                [
                    m.ListOffsetsTopic(t, [m.ListOffsetsPartition(p, timestamp) for p in ps])
                    for t, ps in _by_topic(group).items()
                ],
            )
            response: m.ListOffsetsResponse = await conn.send(ApiKey.LIST_OFFSETS, request)
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError(
                            part.error_code, f"ListOffsets for {topic.name}-{part.partition_index}"
                        )
                    out[(topic.name, part.partition_index)] = part.offset
        return out

    async def _by_leader(self, tps: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = {}
        missing = [tp for tp in tps if self.cluster.leader_for(*tp) < 0]
        if missing:
            await self.cluster.refresh(sorted({t for t, _ in missing}))
        for tp in tps:
            leader = self.cluster.leader_for(*tp)
            if leader < 0:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} has no known leader"
                )
            groups.setdefault(leader, []).append(tp)
        return groups

    async def _initialize_positions(self) -> None:
        missing = [tp for tp in self._assignment if tp not in self._positions]
        if not missing:
            return
        if self.group_id is not None:
            committed = await self.committed_offsets(missing)
            for tp, offset in committed.items():
                if offset is not None:
                    self._positions[tp] = offset
            missing = [tp for tp in missing if tp not in self._positions]
        if missing:
            if self.auto_offset_reset == "none":
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"no position for {missing[0][0]}-{missing[0][1]} and auto.offset.reset=none",
                )
            ts = (
                m.EARLIEST_TIMESTAMP if self.auto_offset_reset == "earliest" else m.LATEST_TIMESTAMP
            )
            await self._reset(missing, ts)

    # -- fetching ------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ConsumerMessage]:
        """Fetch from every assigned partition's leader until records arrive or the timeout."""
        if not self._assignment:
            raise RuntimeError("no partitions assigned")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            await self._initialize_positions()
            started = loop.time()
            wait_ms = max(0, min(self.fetch_max_wait_ms, int((deadline - started) * 1000)))
            records = await self._fetch_once(wait_ms)
            if records or loop.time() >= deadline:
                if max_records is not None and len(records) > max_records:
                    for r in records[max_records:]:  # hand these out next time
                        tp = (r.topic, r.partition)
                        self._positions[tp] = min(self._positions[tp], r.offset)
                    records = records[:max_records]
                return records
            # "Nothing" sooner than max_wait (an error answer, or a broker that does not
            # long-poll): wait out the rest rather than spin.
            early = started + wait_ms / 1000 - loop.time()
            if early > 0:
                await asyncio.sleep(min(early, deadline - loop.time()))

    async def _fetch_once(self, wait_ms: int) -> list[ConsumerMessage]:
        try:
            groups = await self._by_leader(self._assignment)
        except KafkaError as exc:
            if exc.code in METADATA_STALE:
                await asyncio.sleep(self.retry_backoff_ms / 1000)
                return []
            raise
        results = await asyncio.gather(
            *(self._fetch_from(leader, tps, wait_ms) for leader, tps in groups.items()),
            return_exceptions=True,
        )
        out: list[ConsumerMessage] = []
        stale = False
        for result in results:
            if isinstance(result, (ConnectionClosed, KafkaError)):
                stale = True
                continue
            if isinstance(result, BaseException):
                raise result
            records, needs_refresh = result
            out.extend(records)
            stale |= needs_refresh
        if stale:
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh(sorted({t for t, _ in self._assignment}))
        return out

    async def _fetch_from(
        self, leader: int, tps: list[TopicPartition], wait_ms: int
    ) -> tuple[list[ConsumerMessage], bool]:
        conn = await self.cluster.connection(leader)
        request = m.FetchRequest(
            -1,
            wait_ms,
            self.fetch_min_bytes,
            self.fetch_max_bytes,
            [
                m.FetchTopic(
                    t,
                    [
                        m.FetchPartition(p, self._positions[(t, p)], self.max_partition_fetch_bytes)
                        for p in ps
                    ],
                )
                for t, ps in _by_topic(tps).items()
            ],
        )
        started = time.perf_counter()
        response: m.FetchResponseV1 = await conn.send(
            ApiKey.FETCH, request, timeout_ms=wait_ms + self.cluster.request_timeout_ms
        )
        latency = self.fetch_latency.get(leader)
        if latency is None:
            latency = self.fetch_latency[leader] = FetchLatency()
        latency.observe(time.perf_counter() - started, response.wait_time_ms / 1000)
        out: list[ConsumerMessage] = []
        stale = False
        for topic in response.responses:
            for part in topic.partitions:
                tp = (topic.topic, part.partition_index)
                if tp not in self._positions:
                    continue
                if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if self.auto_offset_reset == "none":
                        raise KafkaError(
                            part.error_code, f"{tp[0]}-{tp[1]} offset {self._positions[tp]}"
                        )
                    del self._positions[tp]  # re-initialised by auto.offset.reset
                    continue
                if part.error_code:
                    if part.error_code in METADATA_STALE:
                        stale = True
                        continue
                    raise KafkaError(part.error_code, f"fetch {tp[0]}-{tp[1]}")
                self._highwater[tp] = part.high_watermark
                if not part.records:
                    continue
                position = self._positions[tp]
                for record in decode_records(part.records):
                    if record.offset >= position:
                        out.append(
                            ConsumerMessage(
                                tp[0],
                                tp[1],
                                record.offset,
                                record.timestamp,
                                record.key,
                                record.value,
                                record.headers,
                            )
                        )
                        position = record.offset + 1
                self._positions[tp] = position
        return out, stale

    # -- committed offsets ---------------------------------------------------------------------

    def _require_group(self) -> str:
        if self.group_id is None:
            raise RuntimeError("this consumer has no group_id")
        return self.group_id

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) for the group."""
        group = self._require_group()
        offsets = dict(self._positions) if offsets is None else offsets
        for leader, tps in (await self._by_leader(list(offsets))).items():
            conn = await self.cluster.connection(leader)
            request = m.OffsetCommitRequest(
                group,
                [
                    m.OffsetCommitTopic(
                        t, [m.OffsetCommitPartition(p, offsets[(t, p)]) for p in ps]
                    )
                    for t, ps in _by_topic(tps).items()
                ],
            )
            response: m.OffsetCommitResponse = await conn.send(ApiKey.OFFSET_COMMIT, request)
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError(
                            part.error_code,
                            f"commit {topic.name}-{part.partition_index} "
                            f"at {offsets[(topic.name, part.partition_index)]} for group {group!r}",
                        )

    async def committed_offsets(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        group = self._require_group()
        out: dict[TopicPartition, int | None] = {}
        for leader, group_tps in (await self._by_leader(tps)).items():
            conn = await self.cluster.connection(leader)
            request = m.OffsetFetchRequest(
                group, [m.OffsetFetchTopic(t, ps) for t, ps in _by_topic(group_tps).items()]
            )
            response: m.OffsetFetchResponse = await conn.send(ApiKey.OFFSET_FETCH, request)
            for topic in response.topics:
                for part in topic.partitions:
                    if part.error_code:
                        raise KafkaError(
                            part.error_code, f"offset fetch {topic.name}-{part.partition_index}"
                        )
                    offset = part.committed_offset
                    out[(topic.name, part.partition_index)] = offset if offset >= 0 else None
        return out

    async def close(self) -> None:
        await self.cluster.close()


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, []).append(partition)
    return out
