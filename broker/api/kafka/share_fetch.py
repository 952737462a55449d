"""KIP-932's record APIs on the Kafka listener: ShareFetch (78) and ShareAcknowledge (79),
v1-2, served by the partitions' leader (Kafka's KafkaApis.handleShareFetchRequest and
handleShareAcknowledgeRequest).

A share consumer's requests go through its share session (ShareSessionCache): epoch 0
opens it, -1 closes it (its acquired records released once the request's acknowledgements
are applied), any other epoch continues it. Acknowledgements piggybacked on a ShareFetch
are applied before it fetches, and a request that acknowledged records (or closed a session
holding some) is answered only once the partitions' state is stored by the share
coordinator (SharePartitionManager.write_state): a partition whose write failed is answered
with the write's error. A ShareFetch with nothing to acquire waits up to ``max_wait_ms`` in
the ShareFetch purgatory (DelayedShareFetch). The group membership is the share group
coordinator's: a leader does not check it, as Kafka's do not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.coordinator_acls import group_error
from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.broker.share.delayed_share_fetch import (
    NOTHING,
    DelayedShareFetch,
    ShareFetchParams,
    ShareFetchResult,
    SharePartitionData,
    share_fetch,
    watch_keys,
)
from purgatory.broker.share.share_session_cache import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    TopicIdPartition,
)
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, millis, response_module

if TYPE_CHECKING:
    from purgatory.broker.replication.fetch_params import TopicPartition
    from purgatory.broker.server import Broker

SHARE_APIS = frozenset({ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE})

# Kafka's acknowledge types: GAP, ACCEPT, RELEASE, REJECT (ShareFetch v2's RENEW, 4, is not
# served: such a batch is INVALID_REQUEST).
_MAX_ACKNOWLEDGE_TYPE = 3

# Errors answered with the partition's current leader (and its endpoint).
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})

# (first offset, last offset, acknowledge types)
Batch = tuple[int, int, Sequence[int]]

# Each partition's acknowledgement result: its error code, and its topic's name when known.
Acknowledged = dict[TopicIdPartition, tuple[int, str | None]]
# The writes of the partitions' state after acknowledgements: their error codes once stored.
Writes = dict[TopicIdPartition, asyncio.Future[int]]


class _Asked(NamedTuple):
    """A request's partitions, by id: the names the metadata knows, the ids it does not."""

    named: dict[TopicIdPartition, TopicPartition]
    unknown: list[TopicIdPartition]


class ShareFetchApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.SHARE_FETCH: self.handle_share_fetch,
            ApiKey.SHARE_ACKNOWLEDGE: self.handle_share_acknowledge,
        }

    # -- ShareFetch --------------------------------------------------------------------------

    def handle_share_fetch(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        broker = self.broker
        group_id, member_id, epoch = (
            request.group_id,
            request.member_id,
            request.share_session_epoch,
        )
        if code := group_error(self.auth, AclOperation.READ, group_id or ""):
            return error_response(ApiKey.SHARE_FETCH, version, code, None)
        if not group_id or not member_id:
            message = "ShareFetch needs a group id and a member id."
            return error_response(ApiKey.SHARE_FETCH, version, ErrorCode.INVALID_REQUEST, message)
        requested = [
            (t.topic_id.hex if t.topic_id else "", p.partition_index)
            for t in request.topics
            for p in t.partitions
        ]
        acknowledgements = {
            (t.topic_id.hex if t.topic_id else "", p.partition_index): [
                (b.first_offset, b.last_offset, b.acknowledge_types)
                for b in p.acknowledgement_batches
            ]
            for t in request.topics
            for p in t.partitions
            if p.acknowledgement_batches
        }
        forgotten = [
            (t.topic_id.hex if t.topic_id else "", index)
            for t in request.forgotten_topics_data
            for index in t.partitions
        ]
        cache = broker.share_sessions
        now_ms = broker.scheduler.now_ms()
        session: ShareSession | ErrorCode | None = None
        if epoch == INITIAL_EPOCH:
            if acknowledgements:
                message = "An initial ShareFetch (epoch 0) cannot acknowledge records."
                return error_response(
                    ApiKey.SHARE_FETCH, version, ErrorCode.INVALID_REQUEST, message
                )
            session = cache.open(group_id, member_id, requested, now_ms)
        elif epoch == FINAL_EPOCH:
            if cache.get(group_id, member_id) is None:
                code = ErrorCode.SHARE_SESSION_NOT_FOUND
                return error_response(ApiKey.SHARE_FETCH, version, code, None)
        else:
            session = cache.continue_session(
                group_id, member_id, epoch, requested, forgotten, now_ms
            )
        if isinstance(session, ErrorCode):
            return error_response(ApiKey.SHARE_FETCH, version, session, None)
        listener = broker.socket_server.current_listener
        lock_ms = broker.share_partitions.record_lock_duration_ms(group_id)
        acknowledged, writes = self._acknowledge(group_id, member_id, acknowledgements)
        if session is None:  # the final epoch: acknowledge, close, answer
            released = self._close(group_id, member_id)
            return self._when_stored(
                acknowledged,
                writes,
                released,
                ShareFetchResult([], 0, False),
                lambda r: self._fetch_response(
                    version, listener, lock_ms, r, {}, acknowledged, True
                ),
            )
        full = epoch == INITIAL_EPOCH
        asked = self._names(session.partitions)
        refused = self._refused(asked)
        partitions = tuple(key for tp, key in asked.named.items() if tp not in refused)
        params = ShareFetchParams(
            group_id,
            member_id,
            millis(request.max_wait),
            request.min_bytes,
            request.max_bytes,
            request.max_records,
            partitions,
        )
        manager, replica_manager = broker.share_partitions, broker.replica_manager

        def respond(r: ShareFetchResult) -> Any:
            return self._fetch_response(
                version, listener, lock_ms, r, refused, acknowledged, full, asked
            )

        result = share_fetch(params, manager, replica_manager)
        if result.acquired or result.errored or params.max_wait_ms <= 0 or not partitions:
            return self._when_stored(acknowledged, writes, [], result, respond)
        operation = DelayedShareFetch(params, manager, replica_manager)
        if replica_manager.share_fetch_purgatory.try_complete_else_watch(
            operation, watch_keys(params)
        ):
            return self._when_stored(acknowledged, writes, [], operation.response.result(), respond)
        replica_manager.parked[operation.response] = operation
        return self._when_stored(acknowledged, writes, [], operation.response, respond)

    # -- ShareAcknowledge --------------------------------------------------------------------

    def handle_share_acknowledge(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        broker = self.broker
        group_id, member_id, epoch = (
            request.group_id,
            request.member_id,
            request.share_session_epoch,
        )
        key = ApiKey.SHARE_ACKNOWLEDGE
        if code := group_error(self.auth, AclOperation.READ, group_id or ""):
            return error_response(key, version, code, None)
        if not group_id or not member_id:
            message = "ShareAcknowledge needs a group id and a member id."
            return error_response(key, version, ErrorCode.INVALID_REQUEST, message)
        session = broker.share_sessions.acknowledge(
            group_id, member_id, epoch, broker.scheduler.now_ms()
        )
        if isinstance(session, ErrorCode):
            return error_response(key, version, session, None)
        acknowledgements = {
            (t.topic_id.hex if t.topic_id else "", p.partition_index): [
                (b.first_offset, b.last_offset, b.acknowledge_types)
                for b in p.acknowledgement_batches
            ]
            for t in request.topics
            for p in t.partitions
        }
        acknowledged, writes = self._acknowledge(group_id, member_id, acknowledgements)
        released = self._close(group_id, member_id) if epoch == FINAL_EPOCH else []
        listener = broker.socket_server.current_listener
        lock_ms = broker.share_partitions.record_lock_duration_ms(group_id)
        return self._when_stored(
            acknowledged,
            writes,
            released,
            None,
            lambda _: self._acknowledge_response(version, listener, lock_ms, acknowledged),
        )

    def _acknowledge_response(
        self, version: int, listener: str, lock_ms: int, acknowledged: Acknowledged
    ) -> Any:
        key = ApiKey.SHARE_ACKNOWLEDGE
        schema = response_module(key, version)
        endpoints: dict[int, Any] = {}
        topics: dict[str, list[Any]] = {}
        for (topic_id, index), (code, name) in acknowledged.items():
            topics.setdefault(topic_id, []).append(
                build(
                    schema.PartitionData,
                    partition_index=index,
                    error_code=code,
                    current_leader=self._leader(schema, name, index, code, listener, endpoints),
                )
            )
        return build(
            schema.ShareAcknowledgeResponse,
            throttle_time=0,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout=lock_ms,
            responses=[
                build(schema.ShareAcknowledgeTopicResponse, topic_id=tid, partitions=parts)
                for tid, parts in topics.items()
            ],
            node_endpoints=list(endpoints.values()),
        )

    # -- shared steps ------------------------------------------------------------------------

    def _names(self, partitions: Iterable[TopicIdPartition]) -> _Asked:
        names = self.broker.metadata.topic_names
        named: dict[TopicIdPartition, TopicPartition] = {}
        unknown: list[TopicIdPartition] = []
        for topic_id, index in partitions:
            name = names.get(topic_id)
            if name is None:
                unknown.append((topic_id, index))
            else:
                named[(topic_id, index)] = (name, index)
        return _Asked(named, unknown)

    def _refused(self, asked: _Asked) -> dict[TopicIdPartition, int]:
        """The partitions answered before any read: an unknown topic id, a topic the
        principal may not READ, a partition the metadata does not have."""
        refused: dict[TopicIdPartition, int] = dict.fromkeys(
            asked.unknown, ErrorCode.UNKNOWN_TOPIC_ID
        )
        denied = authz.unauthorized_topics(
            self.auth, AclOperation.READ, {name for name, _ in asked.named.values()}
        )
        metadata = self.broker.metadata
        for tp, (name, index) in asked.named.items():
            if name in denied:
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif metadata.partition(name, index) is None:
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return refused

    def _acknowledge(
        self, group_id: str, member_id: str, acknowledgements: dict[TopicIdPartition, list[Batch]]
    ) -> tuple[Acknowledged, Writes]:
        """Apply each partition's acknowledgements (Kafka's handleAcknowledgements): its
        error code and its topic's name when known, and the writes of the partitions'
        state they changed."""
        writes: Writes = {}
        if not acknowledgements:
            return {}, writes
        asked = self._names(acknowledgements)
        refused = self._refused(asked)
        manager = self.broker.share_partitions
        out: Acknowledged = {}
        for tp, batches in acknowledgements.items():
            name = asked.named.get(tp, (None, 0))[0]
            if tp in refused or name is None:
                out[tp] = (refused.get(tp, ErrorCode.UNKNOWN_TOPIC_ID), name)
                continue
            code = _batches_error(batches)
            if code == ErrorCode.NONE and batches:
                share_partition = manager.share_partition(group_id, name, tp[1])
                if isinstance(share_partition, ErrorCode):
                    code = share_partition
                else:
                    code = share_partition.acknowledge(member_id, batches)
                    if code == ErrorCode.NONE:
                        writes[tp] = manager.write_state(share_partition)
            out[tp] = (code, name)
        return out, writes

    def _close(self, group_id: str, member_id: str) -> list[asyncio.Future[int]]:
        """The session closed (epoch -1): the member's acquired records are available (the
        writes of the partitions' state that changed)."""
        session = self.broker.share_sessions.remove(group_id, member_id)
        if session is None:
            return []
        return self.broker.share_partitions.release_member(group_id, member_id)

    def _when_stored(
        self,
        acknowledged: Acknowledged,
        writes: Writes,
        released: list[asyncio.Future[int]],
        pending: Any,
        respond: Callable[[Any], Any],
    ) -> Result:
        """The answer ``respond`` makes of ``pending`` (a result, or the future of one),
        once the writes are stored: each acknowledged partition whose write failed
        answered with the write's error."""
        if not writes and not released:
            return answer(pending, respond)
        return self._answer_stored(acknowledged, writes, released, pending, respond)

    async def _answer_stored(
        self,
        acknowledged: Acknowledged,
        writes: Writes,
        released: list[asyncio.Future[int]],
        pending: Any,
        respond: Callable[[Any], Any],
    ) -> Any:
        try:
            for tp, write in writes.items():
                code = await write
                if code != ErrorCode.NONE:
                    acknowledged[tp] = (code, acknowledged[tp][1])
            for write in released:
                await write
            if isinstance(pending, asyncio.Future):
                pending = await pending
        finally:
            if isinstance(pending, asyncio.Future) and not pending.done():
                pending.cancel()  # the client went away: the waiting fetch acquires nothing
        return respond(pending)

    def _leader(
        self,
        schema: Any,
        topic: str | None,
        index: int,
        code: int,
        listener: str,
        endpoints: dict[int, Any],
    ) -> Any:
        """The partition's current leader, as Kafka 4.3.1 answers it for every partition
        of a known topic (unknown: -1); for an answer that says this broker is not the
        leader, the leader's endpoint added to ``endpoints``."""
        state = None if topic is None else self.broker.metadata.partition(topic, index)
        if state is None:
            return build(schema.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1)
        address = self.broker.metadata.endpoints(listener).get(state.leader_id)
        if code in _LEADER_ERRORS and address is not None and state.leader_id not in endpoints:
            endpoints[state.leader_id] = build(
                schema.NodeEndpoint, node_id=state.leader_id, host=address[0], port=address[1]
            )
        return build(
            schema.LeaderIdAndEpoch, leader_id=state.leader_id, leader_epoch=state.leader_epoch
        )

    def _fetch_response(
        self,
        version: int,
        listener: str,
        lock_ms: int,
        result: ShareFetchResult,
        refused: dict[TopicIdPartition, int],
        acknowledged: dict[TopicIdPartition, tuple[int, str | None]],
        full: bool,
        asked: _Asked | None = None,
    ) -> Any:
        """The ShareFetchResponse: every partition of the session when it opened (``full``),
        else those with records, an error or an acknowledgement result, as Kafka's
        ShareSessionContext answers."""
        schema = response_module(ApiKey.SHARE_FETCH, version)
        names: dict[TopicIdPartition, str | None] = {}
        fetched: dict[TopicIdPartition, SharePartitionData] = {}
        if asked is not None:
            names = {tp: name for tp, (name, _) in asked.named.items()}
            fetched = {tp: SharePartitionData(code, b"", []) for tp, code in refused.items()}
            by_key = {key: tp for tp, key in asked.named.items()}
            for key, data in result.partitions:
                fetched[by_key[key]] = data
        endpoints: dict[int, Any] = {}
        topics: dict[str, list[Any]] = {}
        for tp in dict.fromkeys([*fetched, *acknowledged]):
            data = fetched.get(tp, NOTHING)
            ack_code, ack_name = acknowledged.get(tp, (ErrorCode.NONE, None))
            if not full and tp not in acknowledged and not data.error and not data.acquired:
                continue
            name = names.get(tp, ack_name)
            topics.setdefault(tp[0], []).append(
                build(
                    schema.PartitionData,
                    partition_index=tp[1],
                    error_code=data.error,
                    acknowledge_error_code=ack_code,
                    current_leader=self._leader(
                        schema, name, tp[1], data.error, listener, endpoints
                    ),
                    records=data.records,
                    acquired_records=[
                        build(
                            schema.AcquiredRecords,
                            first_offset=a.first_offset,
                            last_offset=a.last_offset,
                            delivery_count=a.delivery_count,
                        )
                        for a in data.acquired
                    ],
                )
            )
        return build(
            schema.ShareFetchResponse,
            throttle_time=0,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout=lock_ms,
            responses=[
                build(schema.ShareFetchableTopicResponse, topic_id=topic_id, partitions=parts)
                for topic_id, parts in topics.items()
            ],
            node_endpoints=list(endpoints.values()),
        )


def _batches_error(batches: list[Batch]) -> ErrorCode:
    """Kafka's validateAcknowledgementBatches: ascending batches, first <= last, one type
    or one per offset, each a type served."""
    previous_last = -1
    for first, last, types in batches:
        if (
            first > last
            or first < previous_last
            or not types
            or (len(types) > 1 and last - first != len(types) - 1)
            or any(t < 0 or t > _MAX_ACKNOWLEDGE_TYPE for t in types)
        ):
            return ErrorCode.INVALID_REQUEST
        previous_last = last
    return ErrorCode.NONE


def error_response(key: int, version: int, code: int, message: str | None) -> Any:
    """A ShareFetch or ShareAcknowledge refused as a whole: the top-level error, no
    partitions (Kafka's getErrorResponse)."""
    schema = response_module(key, version)
    cls = (
        schema.ShareFetchResponse if key == ApiKey.SHARE_FETCH else schema.ShareAcknowledgeResponse
    )
    return build(
        cls,
        throttle_time=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=0,
        responses=[],
        node_endpoints=[],
    )
