"""The Kafka listener's record APIs: Produce, Fetch, ListOffsets, DeleteRecords and
InitProducerId.

Each handler turns a kio request into the replica manager's domain parameters and its
answer into the response of the request's version. Produce and Fetch wait in the same
purgatories as on our own protocol; Fetch answers with the hand-written response of
protocol/kafka_fetch.py, which carries the purgatory wait as a tagged field (KIP-736).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.fetch_request import (
    UNKNOWN_ID,
    fetch_params,
    fetch_refusals,
    with_fetch_refusals,
)
from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.api.results import Deferred, Result, answer
from purgatory.broker.replication.delayed_delete_records import DeleteRecordsResult
from purgatory.broker.replication.delayed_produce import PartitionResponse, ProduceResult
from purgatory.broker.replication.fetch_params import (
    FetchPartitionData,
    FetchResult,
    TopicPartition,
)
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
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
        }

    # -- Produce -----------------------------------------------------------------------------

    def handle_produce(self, request: Any, version: int) -> Result:
        topics = request.topic_data
        check_partition_count(topics, lambda t: t.partition_data)
        entries = [((t.name, p.index), p.records or b"") for t in topics for p in t.partition_data]
        refused = request_refusals(entries, request.transactional_id, self.broker.auth)
        if refused:
            entries = [entry for entry in entries if entry[0] not in refused]
        acks = request.acks
        timeout_ms = millis(request.timeout)
        responses, done = self.replica_manager.append_records(
            timeout_ms, acks, entries, kafka_batches_only=True
        )
        to_response: Callable[[ProduceResult], Any] = self._produce_answers[version]
        quotas = self.broker.quotas
        if quotas.produce.enabled and (throttle_ms := quotas.produce_throttle_ms()):
            to_response = functools.partial(self._produce_answers[version], throttle_ms=throttle_ms)
        if refused:
            refusals = list(refused.items())
            to_response = functools.partial(authz.with_refusals, to_response, refusals)
            if not self.broker.apis.appended(responses + refusals, acks):
                return None
        elif not self.broker.apis.appended(responses, acks):
            return None
        if done is None:
            return to_response(responses)
        return Deferred(done, to_response)

    # -- Fetch -------------------------------------------------------------------------------

    def handle_fetch(self, request: Any, version: int) -> Result:
        """A full fetch: fetch sessions (KIP-227) are declined, as a broker may, by
        answering session id 0; a request that continues one (an epoch other than -1, a
        sessionless fetch, or 0, a new session) is FETCH_SESSION_ID_NOT_FOUND, as Kafka
        answers a session it does not have."""
        if version >= 7 and request.session_epoch not in (-1, 0):
            return FetchResponseBody(version, [], 0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        names = self.broker.metadata.topic_names if version >= 13 else None
        quotas = self.broker.quotas
        quota, max_bytes = (
            quotas.fetch_quota(request.max_bytes)
            if quotas.fetch.enabled
            else (None, request.max_bytes)
        )
        params = fetch_params(
            -1,  # Kafka's clients; followers fetch over our protocol
            millis(request.max_wait),
            request.min_bytes,
            max_bytes,
            request.topics,
            (lambda t: t.topic) if names is None else (lambda t: _name_of(names, t.topic_id.hex)),
            negative_offset_refused=False,  # Kafka: OFFSET_OUT_OF_RANGE, this partition only
            isolation_level=request.isolation_level,  # (Fetch v4+: every version served)
        )
        params, refused = fetch_refusals(self.broker.auth, params)
        result = self.replica_manager.fetch_messages(params)
        to_response = with_fetch_refusals(self._fetch_answers[version], refused)
        if quota is not None:  # a client quota (broker/quota): recorded as it completes
            to_response = functools.partial(quota.answer, to_response)
        if isinstance(result, FetchResult):
            return to_response(result)
        return Deferred(result, to_response)

    # -- ListOffsets -------------------------------------------------------------------------

    def handle_list_offsets(self, request: Any, version: int) -> Result:
        """Each partition answered once, under its topic, as Kafka's ReplicaManager
        answers: one asked twice is INVALID_REQUEST, a special timestamp older than its
        version UNSUPPORTED_VERSION, then the leader epoch and the offset lookup."""
        check_partition_count(request.topics)
        offset_for = self.replica_manager.fetch_offset_for_timestamp
        schema = response_module(ApiKey.LIST_OFFSETS, version)
        asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        denied = authz.unauthorized_topics(
            self.broker.auth, AclOperation.DESCRIBE, (t.name for t in request.topics)
        )
        isolation_level = getattr(request, "isolation_level", 0)  # (v2+) 1: read_committed
        answers: dict[str, dict[int, Any]] = {}
        for topic in request.topics:
            parts = answers.setdefault(topic.name, {})
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if p.partition_index in parts:
                    continue
                if topic.name in denied:  # (Kafka: before any other check)
                    error: int = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif asked[key] > 1:
                    error = ErrorCode.INVALID_REQUEST
                elif p.timestamp < 0 and version < _TIMESTAMP_SINCE.get(p.timestamp, 1 << 15):
                    error = ErrorCode.UNSUPPORTED_VERSION
                else:
                    error = self._epoch_error(key, getattr(p, "current_leader_epoch", -1))
                if error:
                    timestamp, offset = -1, -1
                else:
                    error, timestamp, offset = offset_for(key, p.timestamp, isolation_level)
                parts[p.partition_index] = build(
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
        topics = [
            build(schema.ListOffsetsTopicResponse, name=name, partitions=list(parts.values()))
            for name, parts in answers.items()
        ]
        return build(schema.ListOffsetsResponse, throttle_time=0, topics=topics)

    def _epoch_error(self, key: TopicPartition, current_leader_epoch: int) -> ErrorCode:
        """ListOffsets' check of the epoch the client knows the leader by (-1: none; any
        other, negative ones too, is compared, as in Kafka): FENCED_LEADER_EPOCH if older
        than this leader's, UNKNOWN_LEADER_EPOCH if newer. Partitions this broker does not
        lead are left to the offset lookup's own errors."""
        partition = self.replica_manager.partitions.get(key)
        if current_leader_epoch == -1 or partition is None or not partition.is_leader:
            return ErrorCode.NONE
        if current_leader_epoch < partition.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch > partition.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

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
        refused = authz.delete_records_refusals(self.broker.auth, offsets)
        outcome = self.replica_manager.delete_records(millis(request.timeout), offsets)
        return answer(
            outcome,
            authz.with_results(
                lambda results: delete_records_response(version, asked, results), refused
            ),
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


# The ListOffsets version from which each special timestamp is served, as Kafka's
# ReplicaManager checks (UNSUPPORTED_VERSION before; any other negative one always):
# earliest, latest, the max timestamp (KIP-734), the earliest local offset (KIP-405).
_TIMESTAMP_SINCE = {-2: 0, -1: 0, -3: 7, -4: 8}


def request_refusals(
    entries: list[tuple[TopicPartition, bytes]],
    transactional_id: str | None,
    auth: AuthHelper,
) -> dict[TopicPartition, PartitionResponse]:
    """Kafka's checks of a Produce request before any append (KafkaApis): a transactional
    batch needs the request's transactional id, and WRITE on it, or every partition is
    refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a topic the principal may not
    WRITE is TOPIC_AUTHORIZATION_FAILED (before its other checks); each partition's
    records are exactly one batch of magic 2 (ProduceRequest.validateRecords), or that
    partition is INVALID_RECORD, with no log information. Shorter or damaged record sets
    are the validator's."""
    if (
        transactional_id is None
        or not auth.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
    ) and any(_transactional(records) for _, records in entries):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return {key: PartitionResponse(error) for key, _ in entries}
    refused = authz.write_refusals(auth, entries) if auth.enabled else {}
    for key, records in entries:
        if key in refused:
            continue
        problem = _not_one_v2_batch(records)
        if problem is not None:
            refused[key] = PartitionResponse(ErrorCode.INVALID_RECORD, error_message=problem)
    return refused


_V2_ATTRIBUTES_LOW = 22  # the low byte of a v2 batch's attributes
_TRANSACTIONAL_FLAG = 0x10


def _transactional(records: bytes) -> bool:
    return (
        len(records) > _V2_ATTRIBUTES_LOW
        and records[16] == 2
        and bool(records[_V2_ATTRIBUTES_LOW] & _TRANSACTIONAL_FLAG)
    )


def _not_one_v2_batch(records: bytes) -> str | None:
    if len(records) < 17:
        return None
    if records[16] != 2:
        return "Produce v3+ carries record batches of magic 2 only"
    end = 12 + int.from_bytes(records[8:12], "big", signed=True)
    rest = len(records) - end
    if rest >= 12 and rest >= 12 + int.from_bytes(records[end + 8 : end + 12], "big", signed=True):
        return "Produce v3+ carries exactly one record batch per partition"
    return None


def _versions(api_key: ApiKey) -> range:
    low, high = VERSIONS[api_key]
    return range(low, high + 1)


class _ProduceAnswer:
    """Turns the replica manager's per-partition outcomes into a ProduceResponse."""

    __slots__ = ("schema",)

    def __init__(self, version: int) -> None:
        self.schema = response_module(ApiKey.PRODUCE, version)

    def __call__(
        self, responses: list[tuple[TopicPartition, PartitionResponse]], throttle_ms: int = 0
    ) -> Any:
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
        return build(schema.ProduceResponse, responses=topics, throttle_time=throttle_ms)

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
    metadata, UNKNOWN_TOPIC_ID for ids not known (v13+; a partition a known topic does
    not have stays UNKNOWN_TOPIC_OR_PARTITION, as in Kafka)."""

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
        unknown_id = False
        for (topic, index), data in result.partitions:
            if topic != current:
                state = known.get(topic)
                unknown_id = by_ids and state is None
                if state is not None:
                    topic_id = topic_id_bytes(state.topic_id)
                elif topic.startswith(_UNKNOWN_ID):
                    topic_id = topic_id_bytes(topic[len(_UNKNOWN_ID) :])
                else:
                    topic_id = topic_id_bytes("")
                parts = []
                topics.append(FetchTopic(topic, topic_id, parts))
                current = topic
            parts.append(_partition(index, data, unknown_id))
        return FetchResponseBody(self.version, topics, result.wait_ms)


# A fetch by a topic id the broker does not know reads a topic named after it, which no
# topic can be ("?" is not allowed in names): answered UNKNOWN_TOPIC_ID, with its id.
_UNKNOWN_ID = UNKNOWN_ID


def _name_of(names: dict[str, str], topic_id: str) -> str:
    return names.get(topic_id) or _UNKNOWN_ID + topic_id


# Partitions answered before any read: an empty list of aborted transactions, as Kafka's.
_NOT_FOUND = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
)


def _partition(index: int, data: FetchPartitionData, unknown_id: bool) -> FetchPartition:
    error = data.error
    if unknown_id and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        error = ErrorCode.UNKNOWN_TOPIC_ID
    records = as_kafka_batches(data.records) if data.records else b""
    # (A remote read's answer has no LSO of its own: the high watermark, as before.)
    lso = data.last_stable_offset if data.last_stable_offset >= 0 else data.high_watermark
    return FetchPartition(
        index,
        error,
        data.high_watermark,
        data.log_start_offset,
        records,
        lso,
        # A partition the metadata does not have (or the principal may not read) gets an
        # empty list from Kafka (its answer made before any read), one whose read failed
        # null, as a read_uncommitted one.
        () if error in _NOT_FOUND else data.aborted_transactions,
    )
