"""The Kafka listener's committed-offset APIs: FindCoordinator, OffsetCommit, OffsetFetch.

Until consumer groups have their own coordinator (with ``__consumer_offsets``), a
group's committed offsets live with each partition's leader, as on our own protocol, so
both protocols see the same commits and ``purgatory consumer-groups`` reads them. Every
broker can therefore coordinate any group: FindCoordinator names the broker asked, and
it hands each partition's commit or read to that partition's leader (itself, or another
broker over our protocol). A partition whose leader is unknown or moving answers
COORDINATOR_LOAD_IN_PROGRESS, which Kafka clients retry without looking for a new
coordinator.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.api.request_limits import check_partition_count, check_topic_count
from broker.api.results import Result
from broker.coordinator.group_coordinator import OffsetAndMetadata
from broker.replication.fetch_params import TopicPartition
from clients.connection import ConnectionClosed
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import METADATA_STALE, ErrorCode, KafkaError
from protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from broker.server import Broker

_FORWARD_TIMEOUT_MS = 5000
GROUP_KEY = 0  # FindCoordinator key types: 0 group, 1 transaction


def _retriable(code: int) -> int:
    """A leader error is the coordinator's business, not the client's: retry later."""
    if code in METADATA_STALE:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return code


class OffsetApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
        }

    # -- FindCoordinator ---------------------------------------------------------------------

    def handle_find_coordinator(self, request: Any, version: int) -> Result:
        schema = response_module(ApiKey.FIND_COORDINATOR, version)
        host, port = self.broker.members[self.broker.broker_id]
        node = self.broker.broker_id
        if request.key_type != GROUP_KEY:
            code: int = ErrorCode.INVALID_REQUEST
            message: str | None = "only group coordinators exist here (no transactions)"
            node, host, port = -1, "", -1
        else:
            code, message = ErrorCode.NONE, None
        if version < 4:
            return build(
                schema.FindCoordinatorResponse,
                throttle_time=0,
                error_code=code,
                error_message=message,
                node_id=node,
                host=host,
                port=port,
            )
        coordinators = [
            build(
                schema.Coordinator,
                key=key,
                node_id=node,
                host=host,
                port=port,
                error_code=code,
                error_message=message,
            )
            for key in request.coordinator_keys
        ]
        return build(schema.FindCoordinatorResponse, throttle_time=0, coordinators=coordinators)

    # -- OffsetCommit ------------------------------------------------------------------------

    def handle_offset_commit(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        offsets = [
            ((t.name, p.partition_index), (p.committed_offset, p.committed_metadata))
            for t in request.topics
            for p in t.partitions
        ]
        return self._commit(request, version, offsets)

    async def _commit(
        self, request: Any, version: int, offsets: list[tuple[TopicPartition, OffsetAndMetadata]]
    ) -> Any:
        group = request.group_id
        errors = await self._route(
            [key for key, _ in offsets],
            offsets,
            lambda local: self.coordinator.commit_offsets(group, local),
            lambda remote: m.OffsetCommitRequest(
                group,
                [
                    m.OffsetCommitTopic(t, [m.OffsetCommitPartition(p, o, md)])
                    for (t, p), (o, md) in remote
                ],
            ),
            ApiKey.OFFSET_COMMIT,
            lambda response: [p.error_code for t in response.topics for p in t.partitions],
            lambda code: code,
        )
        schema = response_module(ApiKey.OFFSET_COMMIT, version)
        codes = iter(errors)
        topics = [
            build(
                schema.OffsetCommitResponseTopic,
                name=t.name,
                partitions=[
                    build(
                        schema.OffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=_retriable(next(codes)),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
        return build(schema.OffsetCommitResponse, throttle_time=0, topics=topics)

    # -- OffsetFetch -------------------------------------------------------------------------

    def handle_offset_fetch(self, request: Any, version: int) -> Result:
        if version >= 8:
            groups = [(g.group_id, g.topics) for g in request.groups]
        else:
            groups = [(request.group_id, request.topics)]
        check_topic_count(len(groups))
        for _, topics in groups:
            if topics is not None:
                check_partition_count(topics, lambda t: t.partition_indexes)
        return self._offset_fetch(groups, version)

    async def _offset_fetch(self, groups: list[tuple[str, Any]], version: int) -> Any:
        schema = response_module(ApiKey.OFFSET_FETCH, version)
        batched = version >= 8
        topic_cls = schema.OffsetFetchResponseTopics if batched else schema.OffsetFetchResponseTopic
        part_cls = (
            schema.OffsetFetchResponsePartitions if batched else schema.OffsetFetchResponsePartition
        )
        results = []
        for group, topics in groups:
            if topics is None:  # every partition the group committed: every partition known
                asked = [
                    (name, p.partition_index)
                    for name, state in sorted(self.broker.metadata.topics.items())
                    for p in state.partitions
                ]
            else:
                asked = [(t.name, i) for t in topics for i in t.partition_indexes]
            answers = await self._fetch_group(group, asked)
            by_topic: dict[str, list[Any]] = {}
            for (topic, index), (code, (offset, metadata)) in zip(asked, answers, strict=True):
                if topics is None and offset < 0:
                    continue  # nothing committed: only named partitions answer -1
                by_topic.setdefault(topic, []).append(
                    build(
                        part_cls,
                        partition_index=index,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        metadata=metadata or "",
                        error_code=_retriable(code),
                    )
                )
            results.append(
                (
                    group,
                    [
                        build(topic_cls, name=name, partitions=parts)
                        for name, parts in by_topic.items()
                    ],
                )
            )
        if batched:
            return build(
                schema.OffsetFetchResponse,
                throttle_time=0,
                groups=[
                    build(schema.OffsetFetchResponseGroup, group_id=g, topics=t, error_code=0)
                    for g, t in results
                ],
            )
        return build(
            schema.OffsetFetchResponse, throttle_time=0, topics=results[0][1], error_code=0
        )

    async def _fetch_group(
        self, group: str, asked: list[TopicPartition]
    ) -> list[tuple[int, OffsetAndMetadata]]:
        return await self._route(
            asked,
            asked,
            lambda local: self.coordinator.fetch_offsets(group, local),
            lambda remote: m.OffsetFetchRequest(
                group, [m.OffsetFetchTopic(t, [p]) for t, p in remote]
            ),
            ApiKey.OFFSET_FETCH,
            lambda response: [
                (p.error_code, (p.committed_offset, p.metadata))
                for t in response.topics
                for p in t.partitions
            ],
            lambda code: (code, (-1, None)),
        )

    # -- routing to partition leaders ---------------------------------------------------------

    async def _route(
        self,
        keys: list[TopicPartition],
        entries: list[Any],
        local: Any,
        remote_request: Any,
        api: ApiKey,
        remote_results: Any,
        failed: Any,
    ) -> list[Any]:
        """Serve each entry where its partition's leader (``keys``, in the same order) is:
        here with ``local``, elsewhere by sending ``remote_request`` of the entries to the
        leader (all leaders at once); results in entry order."""
        by_leader: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            state = self.broker.metadata.partition(*key)
            leader = state.leader_id if state is not None else self.broker.broker_id
            by_leader.setdefault(leader, []).append(i)
        results: list[Any] = [None] * len(entries)
        remote: list[tuple[list[int], Any]] = []
        for leader, indexes in by_leader.items():
            chosen = [entries[i] for i in indexes]
            if leader == self.broker.broker_id or leader < 0:
                for i, result in zip(indexes, local(chosen), strict=True):
                    results[i] = result
            else:
                remote.append((indexes, self._send(leader, api, remote_request(chosen))))
        answers = await asyncio.gather(*(call for _, call in remote), return_exceptions=True)
        for (indexes, _), answer in zip(remote, answers, strict=True):
            if isinstance(answer, ConnectionClosed | KafkaError | OSError | TimeoutError):
                served = [failed(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)] * len(indexes)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                served = remote_results(answer)
            for i, result in zip(indexes, served, strict=True):
                results[i] = result
        return results

    async def _send(self, broker_id: int, api: ApiKey, body: Any) -> Any:
        conn = await self.broker.connection_to(broker_id, timeout_s=_FORWARD_TIMEOUT_MS / 1000)
        return await conn.send(api, body, timeout_ms=_FORWARD_TIMEOUT_MS)
