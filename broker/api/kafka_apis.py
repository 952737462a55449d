"""KafkaApis: turns one decoded request into its response (or into a pending one).

A handler returns the response body, ``None`` when no response is due (Produce with
acks=0), or an awaitable when the answer needs another broker (metadata with topic
auto-creation, CreateTopics forwarded to the controller, registrations).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from broker.controller.controller import topic_name_problem
from protocol import messages as m
from protocol.api import ApiKey, RequestError, supported_versions
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.server import Broker

MAX_PARTITIONS_PER_REQUEST = 10000

Result = msgspec.Struct | None | Awaitable[msgspec.Struct]


class CloseConnection(Exception):
    """Kafka's answer to a failed acks=0 produce: close the connection so the client notices."""


class KafkaApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.replica_manager = broker.replica_manager
        self.metrics = broker.metrics
        self.log = structlog.get_logger("kafka_apis").bind(broker_id=broker.broker_id)
        # api_key -> handler(body, version); the network layer calls these directly.
        self.handlers: dict[int, Callable[[Any, int], Result]] = {
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.UPDATE_METADATA: self.handle_update_metadata,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.BROKER_REGISTRATION: self.handle_broker_registration,
            ApiKey.ALTER_PARTITION: self.handle_alter_partition,
            ApiKey.FETCH_SNAPSHOT: self.handle_fetch_snapshot,
        }

    # -- produce / fetch -------------------------------------------------------------------

    def handle_produce(self, request: m.ProduceRequest, version: int) -> Result:
        topics = request.topics
        if len(topics) != 1 or len(topics[0].partitions) > MAX_PARTITIONS_PER_REQUEST:
            _check_partition_count(topics)
        response, failed, unknown = self.replica_manager.append_records(request)
        for topic in unknown:
            self.broker.auto_create_in_background(topic)
        if request.acks == 0:
            if failed:
                raise CloseConnection(f"acks=0 produce failed for {failed} partition(s)")
            return None
        return response

    def handle_fetch(self, request: m.FetchRequest, version: int) -> Result:
        if request.max_bytes < 0 or request.min_bytes < 0 or request.max_wait_ms < 0:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                "max_wait_ms, min_bytes and max_bytes must not be negative",
            )
        _check_partition_count(request.topics)
        for topic in request.topics:
            for p in topic.partitions:
                if p.partition_max_bytes < 0 or p.fetch_offset < 0:
                    raise RequestError(
                        ErrorCode.INVALID_REQUEST,
                        "fetch_offset and partition_max_bytes must not be negative",
                    )
        return self.replica_manager.fetch_messages(request, version)

    def handle_list_offsets(self, request: m.ListOffsetsRequest, version: int) -> Result:
        _check_partition_count(request.topics)
        return self.replica_manager.list_offsets(request)

    def handle_offset_commit(self, request: m.OffsetCommitRequest, version: int) -> Result:
        _check_partition_count(request.topics)
        return self.replica_manager.commit_offsets(request)

    def handle_offset_fetch(self, request: m.OffsetFetchRequest, version: int) -> Result:
        _check_partition_count(request.topics, lambda t: t.partition_indexes)
        return self.replica_manager.fetch_offsets(request)

    # -- metadata and topics ---------------------------------------------------------------

    def handle_api_versions(self, request: m.ApiVersionsRequest, version: int) -> Result:
        return m.ApiVersionsResponse(ErrorCode.NONE, supported_versions())

    def handle_metadata(self, request: m.MetadataRequest, version: int) -> Result:
        if request.topics is not None:
            _check_topic_count(len(request.topics))
        missing = [
            t
            for t in (request.topics or ())
            if t not in self.broker.metadata.topics and topic_name_problem(t) is None
        ]
        if (
            missing
            and request.allow_auto_topic_creation
            and self.broker.config["auto.create.topics.enable"]
        ):
            return self._metadata_after_create(request, missing)
        return self.broker.metadata_response(request.topics)

    async def _metadata_after_create(
        self, request: m.MetadataRequest, missing: list[str]
    ) -> m.MetadataResponse:
        created = await self.broker.create_topics(
            m.CreateTopicsRequest([m.CreatableTopic(name) for name in dict.fromkeys(missing)])
        )
        return self.broker.metadata_response(
            request.topics, creating={r.name: r.error_code for r in created.topics}
        )

    def handle_create_topics(self, request: m.CreateTopicsRequest, version: int) -> Result:
        _check_topic_count(len(request.topics))
        return self.broker.create_topics(request)

    def handle_delete_topics(self, request: m.DeleteTopicsRequest, version: int) -> Result:
        _check_topic_count(len(request.topic_names))
        return self.broker.delete_topics(request)

    # -- inter-broker ----------------------------------------------------------------------

    def handle_update_metadata(self, request: m.UpdateMetadataRequest, version: int) -> Result:
        if not self.broker.apply_metadata(request):
            return m.UpdateMetadataResponse(ErrorCode.STALE_CONTROLLER_EPOCH)
        return m.UpdateMetadataResponse(ErrorCode.NONE)

    def handle_broker_registration(
        self, request: m.BrokerRegistrationRequest, version: int
    ) -> Result:
        controller = self.broker.controller
        if controller is None:
            return m.BrokerRegistrationResponse(
                ErrorCode.NOT_CONTROLLER, f"broker {self.broker.broker_id} is not the controller"
            )
        return self._register(request)

    def handle_fetch_snapshot(self, request: m.FetchSnapshotRequest, version: int) -> Result:
        return m.FetchSnapshotResponse(ErrorCode.NONE, self.broker.metadata.snapshot())

    def handle_alter_partition(self, request: m.AlterPartitionRequest, version: int) -> Result:
        controller = self.broker.controller
        if controller is None:
            return m.AlterPartitionResponse(ErrorCode.NOT_CONTROLLER, [])
        return controller.alter_partition(request)

    async def _register(self, request: m.BrokerRegistrationRequest) -> m.BrokerRegistrationResponse:
        assert self.broker.controller is not None
        try:
            await self.broker.controller.register(request.broker_id, request.incarnation)
        except KafkaError as exc:
            return m.BrokerRegistrationResponse(exc.code, str(exc))
        except asyncio.CancelledError:
            raise
        return m.BrokerRegistrationResponse(ErrorCode.NONE)


def _check_topic_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"at most {MAX_PARTITIONS_PER_REQUEST} topics per request"
        )


def _partitions_of(topic: Any) -> list[Any]:
    return topic.partitions  # type: ignore[no-any-return]


def _check_partition_count(
    topics: list[Any], partitions_of: Callable[[Any], list[Any]] = _partitions_of
) -> None:
    """Refuse requests naming more partitions than one request may (bounded loop time)."""
    if len(topics) == 1 and len(partitions_of(topics[0])) <= MAX_PARTITIONS_PER_REQUEST:
        return
    count = 0
    for topic in topics:
        count += len(partitions_of(topic))
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"request names {count} partitions; at most {MAX_PARTITIONS_PER_REQUEST} are served per request",
        )
