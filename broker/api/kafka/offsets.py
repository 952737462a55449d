"""The Kafka listener's committed-offset APIs: FindCoordinator, OffsetCommit, OffsetFetch
and OffsetDelete, served by the group coordinator (``broker/coordinator``).

FindCoordinator names the leader of the group's ``__consumer_offsets`` partition, or of
a transactional id's ``__transaction_state`` partition (creating the topic on first use:
COORDINATOR_NOT_AVAILABLE until it exists); the other
APIs answer NOT_COORDINATOR on any other broker, and Kafka clients then ask again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api import coordinator_acls
from purgatory.broker.api.coordinator_acls import (
    GROUP_KEY,
    TRANSACTION_KEY,
    coordinator_key_error,
    offset_commit_refusal,
    offset_delete_refusal,
)
from purgatory.broker.api.request_limits import check_partition_count, check_topic_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.coordinator.group_metadata import CommittedOffset, TopicPartition
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker


class OffsetApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.OFFSET_DELETE: self.handle_offset_delete,
            ApiKey.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit,
        }

    # -- FindCoordinator ---------------------------------------------------------------------

    def _coordinator(self, key_type: int, key: str) -> tuple[int, str | None, int, str, int]:
        """(error, message, node id, host, port) of the coordinator of ``key``."""
        if code := coordinator_key_error(self.auth, key_type, key):
            return code, None, -1, "", -1
        if key_type == GROUP_KEY:
            code, node = self.coordinator.find_coordinator(key)
        elif key_type == TRANSACTION_KEY:
            code, node = self.broker.transaction_coordinator.find_coordinator(key)
        else:
            message = f"unknown coordinator key type {key_type} (0: group, 1: transaction)"
            return ErrorCode.INVALID_REQUEST, message, -1, "", -1
        if code:
            return code, None, -1, "", -1
        address = self.broker.endpoints().get(node)
        if address is None:  # its broker has no listener of this name
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
        host, port = address
        return ErrorCode.NONE, None, node, host, port

    def handle_find_coordinator(self, request: Any, version: int) -> Result:
        schema = response_module(ApiKey.FIND_COORDINATOR, version)
        if version < 4:
            key_type = getattr(request, "key_type", GROUP_KEY)  # v0 finds groups only
            code, message, node, host, port = self._coordinator(key_type, request.key)
            return build(
                schema.FindCoordinatorResponse,
                throttle_time=0,
                error_code=code,
                error_message=message,
                node_id=node,
                host=host,
                port=port,
            )
        check_topic_count(len(request.coordinator_keys))
        coordinators = []
        for key in request.coordinator_keys:
            code, message, node, host, port = self._coordinator(request.key_type, key)
            coordinators.append(
                build(
                    schema.Coordinator,
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=message,
                )
            )
        return build(schema.FindCoordinatorResponse, throttle_time=0, coordinators=coordinators)

    # -- OffsetCommit ------------------------------------------------------------------------

    def handle_offset_commit(self, request: Any, version: int) -> Result:
        offsets = _offsets_to_commit(request)
        generation = getattr(request, "generation_id_or_member_epoch", None)
        if generation is None:
            generation = request.generation_id
        code, allowed, denied = offset_commit_refusal(self.auth, request.group_id, offsets)
        if code or (not allowed and denied):
            result: Any = dict.fromkeys(offsets, code) if code else denied
        else:
            result = self.coordinator.offsets.commit_offsets(
                request.group_id,
                generation,
                request.member_id,
                getattr(request, "group_instance_id", None),
                allowed,
                version,
            )
        schema = response_module(ApiKey.OFFSET_COMMIT, version)

        def to_response(errors: dict[TopicPartition, int]) -> Any:
            if denied:
                errors = {**errors, **denied}
            topics = [
                build(
                    schema.OffsetCommitResponseTopic,
                    name=t.name,
                    partitions=[
                        build(
                            schema.OffsetCommitResponsePartition,
                            partition_index=p.partition_index,
                            error_code=errors[(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
            return build(schema.OffsetCommitResponse, throttle_time=0, topics=topics)

        return answer(result, to_response)

    # -- TxnOffsetCommit ---------------------------------------------------------------------

    def handle_txn_offset_commit(self, request: Any, version: int) -> Result:
        """Offsets a transaction commits (AddOffsetsToTxn came first); they become the
        group's when the transaction commits. PRODUCER_FENCED is not checked here: the
        coordinator fences the producer's transaction itself (Kafka checks it from v3+
        with transaction version 2 only)."""
        offsets = _offsets_to_commit(request)
        code, allowed, denied = offset_commit_refusal(
            self.auth, request.group_id, offsets, request.transactional_id
        )
        if code:
            return txn_offset_commit_response(version, request, code)
        if not allowed and denied:
            return txn_offset_commit_response(version, request, denied)
        result = self.coordinator.offsets.commit_txn_offsets(
            request.group_id,
            request.producer_id,
            getattr(request, "generation_id", -1),
            getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None),
            allowed,
        )
        if denied:
            return answer(
                result,
                lambda errors: txn_offset_commit_response(version, request, {**errors, **denied}),
            )
        return answer(result, lambda errors: txn_offset_commit_response(version, request, errors))

    # -- OffsetFetch -------------------------------------------------------------------------

    def handle_offset_fetch(self, request: Any, version: int) -> Result:
        if version >= 8:
            groups = [(g.group_id, g.topics) for g in request.groups]
        else:
            groups = [(request.group_id, request.topics)]
        check_topic_count(len(groups))
        # v9+: the consumer group member asking (KIP-848), by group
        members = {}
        if version >= 9:
            members = {g.group_id: (g.member_id, g.member_epoch) for g in request.groups}
        for _, topics in groups:
            if topics is not None:
                check_partition_count(topics, lambda t: t.partition_indexes)
        schema = response_module(ApiKey.OFFSET_FETCH, version)
        batched = version >= 8
        topic_cls = schema.OffsetFetchResponseTopics if batched else schema.OffsetFetchResponseTopic
        part_cls = (
            schema.OffsetFetchResponsePartitions if batched else schema.OffsetFetchResponsePartition
        )
        results = []
        for group, topics in groups:
            asked = (
                None
                if topics is None
                else [(t.name, i) for t in topics for i in t.partition_indexes]
            )
            code, offsets, denied = coordinator_acls.fetch_offsets(
                self.auth, self.coordinator.offsets, group, asked
            )
            partition_code = code if version < 2 else ErrorCode.NONE  # v1: no group error
            if code and asked is not None:
                offsets = dict.fromkeys(asked)
            if not code and version >= 9:  # a consumer group's member: its epoch checked
                member = members[group]
                code = self.coordinator.offsets.member_fetch_error(group, *member)
                offsets = {} if code else offsets  # Kafka: no topics
            # KIP-447: a read_committed consumer asks for stable offsets only; one an open
            # transaction is committing is UNSTABLE_OFFSET_COMMIT until it ends.
            unstable = (
                self.coordinator.offsets.pending_txn_partitions(group)
                if getattr(request, "require_stable", False) and not code
                else frozenset()
            )
            by_topic: dict[str, list[Any]] = {}
            for tp, committed in offsets.items():
                if tp in denied:
                    part = _partition(part_cls, tp[1], None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif tp in unstable:
                    part = _partition(part_cls, tp[1], None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
                else:
                    part = _partition(part_cls, tp[1], committed, partition_code)
                by_topic.setdefault(tp[0], []).append(part)
            results.append(
                (
                    group,
                    code,
                    [build(topic_cls, name=n, partitions=parts) for n, parts in by_topic.items()],
                )
            )
        if batched:
            return build(
                schema.OffsetFetchResponse,
                throttle_time=0,
                groups=[
                    build(schema.OffsetFetchResponseGroup, group_id=g, topics=t, error_code=c)
                    for g, c, t in results
                ],
            )
        _, code, topics = results[0]
        return build(schema.OffsetFetchResponse, throttle_time=0, topics=topics, error_code=code)

    # -- OffsetDelete ------------------------------------------------------------------------

    def handle_offset_delete(self, request: Any, version: int) -> Result:
        check_partition_count(request.topics)
        asked = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        code, allowed, denied = offset_delete_refusal(self.auth, request.group_id, asked)
        if code or (not allowed and denied):
            result: Any = (code, {})
        else:
            result = self.coordinator.offsets.delete_offsets(request.group_id, allowed)
        schema = response_module(ApiKey.OFFSET_DELETE, version)

        def to_response(outcome: tuple[int, dict[TopicPartition, int]]) -> Any:
            code, errors = outcome
            if denied:
                errors = {**errors, **denied}
            topics = [
                build(
                    schema.OffsetDeleteResponseTopic,
                    name=t.name,
                    partitions=[
                        build(
                            schema.OffsetDeleteResponsePartition,
                            partition_index=p.partition_index,
                            error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE),
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
            if code:
                topics = []
            return build(
                schema.OffsetDeleteResponse, error_code=code, throttle_time=0, topics=topics
            )

        return answer(result, to_response)


def _partition(cls: Any, index: int, committed: CommittedOffset | None, code: int) -> Any:
    if committed is None:
        offset, epoch, metadata = -1, -1, ""
    else:
        offset, epoch, metadata = committed.offset, committed.leader_epoch, committed.metadata
    return build(
        cls,
        partition_index=index,
        committed_offset=offset,
        committed_leader_epoch=epoch,
        metadata=metadata,
        error_code=code,
    )


def _offsets_to_commit(request: Any) -> dict[TopicPartition, tuple[int, int, str | None]]:
    """(offset, leader epoch, metadata) per partition of an OffsetCommit or TxnOffsetCommit."""
    check_partition_count(request.topics)
    return {
        (t.name, p.partition_index): (
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
    }


def txn_offset_commit_response(
    version: int, request: Any, errors: dict[TopicPartition, int] | int
) -> Any:
    """The response with each partition's error (or ``errors`` throughout)."""
    schema = response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    return build(
        schema.TxnOffsetCommitResponse,
        throttle_time=0,
        topics=[
            build(
                schema.TxnOffsetCommitResponseTopic,
                name=t.name,
                partitions=[
                    build(
                        schema.TxnOffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=errors
                        if isinstance(errors, int)
                        else errors[(t.name, p.partition_index)],
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
