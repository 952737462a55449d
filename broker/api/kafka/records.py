"""The Kafka listener's record APIs: Produce, Fetch, ListOffsets, DeleteRecords and
InitProducerId.

Each handler turns a kio request into the replica manager's domain parameters and its
answer into the response of the request's version. Produce and Fetch wait in the same
purgatories as on our own protocol; Fetch answers with the hand-written response of
protocol/kafka_fetch.py, which carries the purgatory wait as a tagged field (KIP-736).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.fetch_request import fetch_params
from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.api.results import Deferred, Result, answer
from purgatory.broker.replication.delayed_delete_records import DeleteRecordsResult
from purgatory.broker.replication.delayed_produce import PartitionResponse
from purgatory.broker.replication.fetch_params import (
    FetchPartitionData,
    FetchResult,
    TopicPartition,
)
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_fetch import (
    FetchPartition,
    FetchResponseBody,
    FetchTopic,
    topic_id_bytes,
)
from purgatory.protocol.kafka_records import as_kafka_batches
from purgatory.protocol.kafka_schemas import VERSIONS, build, millis, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker


class RecordApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.replica_manager = broker.replica_manager
        # One per version, made once: nothing is built per request to answer it.
        self._produce_answers = {v: _ProduceAnswer(v) for v in _versions(ApiKey.PRODUCE)}
        self._fetch_answers = {v: _FetchAnswer(v, broker) for v in _versions(ApiKey.FETCH)}

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
        }

    # -- Produce -----------------------------------------------------------------------------

    def handle_produce(self, request: Any, version: int) -> Result:
        topics = request.topic_data
        check_partition_count(topics, lambda t: t.partition_data)
        entries = [((t.name, p.index), p.records or b"") for t in topics for p in t.partition_data]
        acks = request.acks
        timeout_ms = millis(request.timeout)
        responses, done = self.replica_manager.append_records(
            timeout_ms, acks, entries, kafka_batches_only=True
        )
        if not self.broker.apis.appended(responses, acks):
            return None
        to_response = self._produce_answers[version]
        if done is None:
            return to_response(responses)
        return Deferred(done, to_response)

    # -- Fetch -------------------------------------------------------------------------------

    def handle_fetch(self, request: Any, version: int) -> Result:
        names = self.broker.metadata.topic_names if version >= 13 else None
        params = fetch_params(
            -1,  # Kafka's clients; followers fetch over our protocol
            millis(request.max_wait),
            request.min_bytes,
            request.max_bytes,
            request.topics,
            (lambda t: t.topic) if names is None else (lambda t: _name_of(names, t.topic_id.hex)),
            negative_offset_refused=False,  # Kafka: OFFSET_OUT_OF_RANGE, this partition only
        )
        result = self.replica_manager.fetch_messages(params)
        to_response = self._fetch_answers[version]
        if isinstance(result, FetchResult):
            return to_response(result)
        return Deferred(result, to_response)

    # -- ListOffsets -------------------------------------------------------------------------

    def handle_list_offsets(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        offset_for = self.replica_manager.fetch_offset_for_timestamp
        schema = response_module(ApiKey.LIST_OFFSETS, version)
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                error, timestamp, offset = offset_for((topic.name, p.partition_index), p.timestamp)
                parts.append(
                    build(
                        schema.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=error,
                        timestamp=timestamp,
                        offset=offset,
                        # No such offset (a timestamp after every record's): no epoch either.
                        leader_epoch=-1
                        if error or offset < 0
                        else self._leader_epoch(topic.name, p.partition_index),
                    )
                )
            topics.append(build(schema.ListOffsetsTopicResponse, name=topic.name, partitions=parts))
        return build(schema.ListOffsetsResponse, throttle_time=0, topics=topics)

    def _leader_epoch(self, topic: str, index: int) -> int:
        partition = self.replica_manager.partitions.get((topic, index))
        return partition.leader_epoch if partition is not None else -1

    # -- DeleteRecords -----------------------------------------------------------------------

    def handle_delete_records(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        asked = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
        offsets = {
            (t.name, p.partition_index): p.offset for t in request.topics for p in t.partitions
        }
        outcome = self.replica_manager.delete_records(millis(request.timeout), offsets)
        return answer(outcome, lambda results: delete_records_response(version, asked, results))

    # -- InitProducerId ----------------------------------------------------------------------

    def handle_init_producer_id(self, request: Any, version: int) -> Result:
        given = self.broker.producer_ids.init_producer_id(
            request.transactional_id,
            getattr(request, "producer_id", -1),  # from v3
            getattr(request, "producer_epoch", -1),
        )
        return build(
            response_module(ApiKey.INIT_PRODUCER_ID, version).InitProducerIdResponse,
            throttle_time=0,
            error_code=given.error_code,
            producer_id=given.producer_id,
            producer_epoch=given.producer_epoch,
        )


def delete_records_response(
    version: int,
    asked: list[tuple[str, list[int]]],
    results: Mapping[TopicPartition, DeleteRecordsResult],
) -> Any:
    """The DeleteRecordsResponse answering each partition ``asked`` (topic, indexes) with
    its result."""
    schema = response_module(ApiKey.DELETE_RECORDS, version)
    return build(
        schema.DeleteRecordsResponse,
        throttle_time=0,
        topics=[
            build(
                schema.DeleteRecordsTopicResult,
                name=name,
                partitions=[
                    build(
                        schema.DeleteRecordsPartitionResult,
                        partition_index=i,
                        low_watermark=results[(name, i)].low_watermark,
                        error_code=results[(name, i)].error,
                    )
                    for i in indexes
                ],
            )
            for name, indexes in asked
        ],
    )


def _versions(api_key: ApiKey) -> range:
    low, high = VERSIONS[api_key]
    return range(low, high + 1)


class _ProduceAnswer:
    """Turns the replica manager's per-partition outcomes into a ProduceResponse."""

    __slots__ = ("schema",)

    def __init__(self, version: int) -> None:
        self.schema = response_module(ApiKey.PRODUCE, version)

    def __call__(self, responses: list[tuple[TopicPartition, PartitionResponse]]) -> Any:
        schema = self.schema
        topics: list[Any] = []
        current: str | None = None
        parts: list[Any] = []
        for (topic, index), r in responses:
            if topic != current:
                if current is not None:
                    topics.append(
                        build(schema.TopicProduceResponse, name=current, partition_responses=parts)
                    )
                current, parts = topic, []
            parts.append(
                build(
                    schema.PartitionProduceResponse,
                    index=index,
                    error_code=r.error,
                    base_offset=r.base_offset,
                    log_append_time=r.log_append_time_ms,
                    log_start_offset=r.log_start_offset,
                    record_errors=self._record_errors(r.record_errors),
                    error_message=r.error_message,
                )
            )
        if current is not None:
            topics.append(
                build(schema.TopicProduceResponse, name=current, partition_responses=parts)
            )
        return build(schema.ProduceResponse, responses=topics, throttle_time=0)

    def _record_errors(self, errors: tuple[tuple[int, str], ...]) -> list[Any]:
        """The LogValidator's per-record errors, from Produce v8 (KIP-467)."""
        entity = getattr(self.schema, "BatchIndexAndErrorMessage", None)
        if not errors or entity is None:
            return []
        return [
            build(entity, batch_index=index, batch_index_error_message=message)
            for index, message in errors
        ]


class _FetchAnswer:
    """Turns a FetchResult into the FetchResponse of one version: batches of our own
    protocol converted to v2 (Kafka clients read only those), topic ids from the
    metadata, UNKNOWN_TOPIC_ID for ids not known (v13+)."""

    __slots__ = ("broker", "version")

    def __init__(self, version: int, broker: Broker) -> None:
        self.version = version
        self.broker = broker

    def __call__(self, result: FetchResult) -> FetchResponseBody:
        topics: list[FetchTopic] = []
        current: str | None = None
        parts: list[FetchPartition] = []
        known = self.broker.metadata.topics
        by_ids = self.version >= 13
        for (topic, index), data in result.partitions:
            if topic != current:
                state = known.get(topic)
                if state is not None:
                    topic_id = topic_id_bytes(state.topic_id)
                elif topic.startswith(_UNKNOWN_ID):
                    topic_id = topic_id_bytes(topic[len(_UNKNOWN_ID) :])
                else:
                    topic_id = topic_id_bytes("")
                parts = []
                topics.append(FetchTopic(topic, topic_id, parts))
                current = topic
            parts.append(_partition(index, data, by_ids))
        return FetchResponseBody(self.version, topics, result.wait_ms)


# A fetch by a topic id the broker does not know reads a topic named after it, which no
# topic can be ("?" is not allowed in names): answered UNKNOWN_TOPIC_ID, with its id.
_UNKNOWN_ID = "?"


def _name_of(names: dict[str, str], topic_id: str) -> str:
    return names.get(topic_id) or _UNKNOWN_ID + topic_id


def _partition(index: int, data: FetchPartitionData, by_ids: bool) -> FetchPartition:
    error = data.error
    if by_ids and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        error = ErrorCode.UNKNOWN_TOPIC_ID
    records = as_kafka_batches(data.records) if data.records else b""
    return FetchPartition(index, error, data.high_watermark, data.log_start_offset, records)
