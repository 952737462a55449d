"""KafkaApis: turns one decoded request into its response (or into a pending one).

This is the one place where wire bodies meet the broker's domain: a handler turns the
request body into the parameters of the component that serves it (``FetchParams`` for
the replica manager, offsets for the group coordinator, ...), and that component's
answer back into the response body of the request's API version.

A handler returns what broker/api/results.py describes: the response body, nothing, a
``Deferred`` (a purgatory's answer) or an awaitable (one that needs another broker).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.acl_requests import describe_acls, refusal
from purgatory.broker.api.client_quota_requests import alter_client_quotas, describe_client_quotas
from purgatory.broker.api.fetch_request import fetch_params, fetch_refusals, with_fetch_refusals
from purgatory.broker.api.groups import GroupApis
from purgatory.broker.api.read_committed import drop_aborted
from purgatory.broker.api.request_limits import (
    check_partition_count,
    check_topic_count,
)
from purgatory.broker.api.results import CloseConnection, Deferred, Result, answer
from purgatory.broker.api.share_state_requests import (
    read_share_group_state,
    write_share_group_state,
)
from purgatory.broker.controller.topics import topic_name_problem
from purgatory.broker.replication.delayed_delete_records import DeleteRecordsOutcome
from purgatory.broker.replication.delayed_produce import PartitionResponse
from purgatory.broker.replication.fetch_params import (
    FetchPartitionData,
    FetchResult,
    TopicPartition,
)
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import acl_messages as am
from purgatory.protocol import messages as m
from purgatory.protocol import quota_messages as qm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.api import ApiKey, RequestError, supported_versions
from purgatory.protocol.errors import ErrorCode, is_retriable
from purgatory.protocol.raft_messages import METADATA_TOPIC

if TYPE_CHECKING:
    from purgatory.broker.server import Broker


T = TypeVar("T")


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
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.WRITE_TXN_MARKERS: lambda request, version: broker.txn_marker_writer.write(
                request
            ),
            ApiKey.READ_SHARE_GROUP_STATE: lambda request, version: read_share_group_state(
                broker.share_coordinator, request
            ),
            ApiKey.WRITE_SHARE_GROUP_STATE: lambda request, version: write_share_group_state(
                broker.share_coordinator, request
            ),
            ApiKey.ELECT_LEADERS: self.handle_elect_leaders,
            ApiKey.ALTER_CONFIGS: self.handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials,
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.handle_alter_client_quotas,
            **GroupApis(broker).handlers(),
            # The quorum's and the controller's (Vote, BrokerHeartbeat, ...).
            **{key: _ignore_version(h) for key, h in broker.controller_apis.handlers().items()},
            ApiKey.DESCRIBE_QUORUM: self.handle_describe_quorum,
        }

    # -- produce / fetch -------------------------------------------------------------------

    def handle_produce(self, request: m.ProduceRequest, version: int) -> Result:
        topics = request.topics
        if len(topics) == 1 and len(batches := topics[0].partitions) == 1:  # the common case
            entries = [((topics[0].name, batches[0].index), batches[0].records)]
        else:
            check_partition_count(topics)
            entries = [((t.name, p.index), p.records) for t in topics for p in t.partitions]
        auth = self.broker.auth
        refused = authz.write_refusals(auth, entries) if auth.enabled else None
        if refused:
            entries = [entry for entry in entries if entry[0] not in refused]
        responses, done = self.replica_manager.append_records(
            request.timeout_ms, request.acks, entries
        )
        to_response: Callable[[Any], m.ProduceResponse] = _produce_response
        if refused:  # (Kafka's TOPIC_AUTHORIZATION_FAILED, answered after the appends)
            refusals = list(refused.items())
            to_response = functools.partial(authz.with_refusals, _produce_response, refusals)
            if not self.appended(responses + refusals, request.acks):
                return None
        elif not self.appended(responses, request.acks):
            return None
        if done is None:
            return to_response(responses)
        return Deferred(done, to_response)

    def appended(
        self, responses: list[tuple[TopicPartition, PartitionResponse]], acks: int
    ) -> bool:
        """After a produce's appends (either protocol): start creating unknown topics (so
        the client's retry finds them; with an authorizer only those the principal may
        CREATE, as Metadata's auto-creation) and say whether a response is due: not for
        acks=0, whose failures close the connection instead, as in Kafka."""
        failed = 0
        for (topic, _), response in responses:
            if response.error:
                failed += 1
                if response.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not (
                    authz.unauthorized_topics(
                        self.broker.auth, AclOperation.CREATE, (topic,), AclOperation.CREATE
                    )
                ):
                    self.broker.forwarding.auto_create_in_background(topic)
        if acks != 0:
            return True
        if failed:
            raise CloseConnection(f"acks=0 produce failed for {failed} partition(s)")
        return False

    def handle_fetch(self, request: m.FetchRequest, version: int) -> Result:
        if (
            isinstance(request, m.FetchRequestV2)
            and request.topics[:1]
            and (request.topics[0].topic == METADATA_TOPIC)
        ):
            return self.broker.raft.handle_fetch(request)  # the quorum's log (KRaft)
        params = fetch_params(
            request.replica_id,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            request.topics,
            _topic_name,
            getattr(request, "replica_epoch", -1),  # v2 carries it
            isolation_level=getattr(request, "isolation_level", 0),  # and read_committed
        )
        params, refused = fetch_refusals(self.broker.auth, params)
        result = self.replica_manager.fetch_messages(params)
        to_response = with_fetch_refusals(_FETCH_RESPONSES[version], refused)
        if isinstance(result, FetchResult):
            return to_response(result)
        return Deferred(result, to_response)

    def handle_list_offsets(self, request: m.ListOffsetsRequest, version: int) -> Result:
        check_partition_count(request.topics)
        offset_for = self.replica_manager.fetch_offset_for_timestamp
        denied = authz.unauthorized_topics(
            self.broker.auth, AclOperation.DESCRIBE, (t.name for t in request.topics)
        )
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                error: int
                if topic.name in denied:
                    error, timestamp, offset = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
                else:
                    error, timestamp, offset = offset_for(
                        (topic.name, p.partition_index), p.timestamp, request.isolation_level
                    )
                parts.append(
                    m.ListOffsetsPartitionResponse(p.partition_index, error, timestamp, offset)
                )
            topics.append(m.ListOffsetsTopicResponse(topic.name, parts))
        return m.ListOffsetsResponse(topics)

    def handle_delete_records(self, request: m.DeleteRecordsRequest, version: int) -> Result:
        check_partition_count(request.topics)
        asked = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
        offsets = {
            (t.name, p.partition_index): p.offset for t in request.topics for p in t.partitions
        }
        refused = authz.delete_records_refusals(self.broker.auth, offsets)
        outcome = self.replica_manager.delete_records(request.timeout_ms, offsets)

        def to_response(results: DeleteRecordsOutcome) -> m.DeleteRecordsResponse:
            return m.DeleteRecordsResponse(
                [
                    m.DeleteRecordsTopicResult(
                        name,
                        [
                            m.DeleteRecordsPartitionResult(
                                i, results[(name, i)].low_watermark, results[(name, i)].error
                            )
                            for i in indexes
                        ],
                    )
                    for name, indexes in asked
                ]
            )

        return answer(outcome, authz.with_results(to_response, refused))

    def handle_offset_for_leader_epoch(
        self, request: m.OffsetForLeaderEpochRequest, version: int
    ) -> Result:
        check_partition_count(request.topics)
        end_offset_for = self.replica_manager.last_offset_for_leader_epoch
        denied = authz.unauthorized_topics(
            self.broker.auth,
            AclOperation.DESCRIBE,
            (t.topic for t in request.topics),
            unless_cluster=AclOperation.CLUSTER_ACTION,
        )
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                if topic.topic in denied:
                    error, (epoch, end) = ErrorCode.TOPIC_AUTHORIZATION_FAILED, (-1, -1)
                else:
                    error, (epoch, end) = end_offset_for(
                        (topic.topic, p.partition), p.current_leader_epoch, p.leader_epoch
                    )
                parts.append(m.EpochEndOffset(error, p.partition, epoch, end))
            topics.append(m.OffsetForLeaderTopicResult(topic.topic, parts))
        return m.OffsetForLeaderEpochResponse(topics)

    # -- metadata and topics ---------------------------------------------------------------

    def handle_api_versions(self, request: m.ApiVersionsRequest, version: int) -> Result:
        return m.ApiVersionsResponse(ErrorCode.NONE, supported_versions())

    def handle_metadata(self, request: m.MetadataRequest, version: int) -> Result:
        """As Kafka's handleTopicMetadataRequest: DESCRIBE on each topic (unauthorized
        ones left out of a listing of every topic, TOPIC_AUTHORIZATION_FAILED when named),
        and auto-creation only with CREATE on the cluster or the topic (else
        TOPIC_AUTHORIZATION_FAILED)."""
        if request.topics is not None:
            check_topic_count(len(request.topics))
        auth = self.broker.auth
        topics = request.topics
        hidden = authz.NONE_REFUSED
        if auth.enabled:
            asked = list(self.broker.metadata.topics) if topics is None else topics
            hidden = authz.unauthorized_topics(auth, AclOperation.DESCRIBE, asked)
            if topics is None:
                topics, hidden = sorted(set(asked) - hidden), authz.NONE_REFUSED
        missing = [
            t
            for t in (request.topics or ())
            if t not in self.broker.metadata.topics
            and topic_name_problem(t) is None
            and t not in hidden
        ]
        if (
            missing
            and request.allow_auto_topic_creation
            and self.broker.config["auto.create.topics.enable"]
        ):
            uncreatable = authz.unauthorized_topics(
                auth, AclOperation.CREATE, missing, unless_cluster=AclOperation.CREATE
            )
            if uncreatable:
                hidden = hidden | uncreatable
                missing = [t for t in missing if t not in uncreatable]
            # The brokers' addresses on this request's listener, read before waiting.
            endpoints = self.broker.endpoints()
            if missing:
                return self._metadata_after_create(missing, endpoints, topics, hidden)
        return self.metadata_response(topics, self.broker.endpoints(), refused=hidden)

    async def _metadata_after_create(
        self,
        missing: list[str],
        endpoints: Mapping[int, tuple[str, int]],
        topics: list[str] | None,
        refused: frozenset[str],
    ) -> m.MetadataResponse:
        created = await self.broker.forwarding.create_topics(
            m.CreateTopicsRequest(
                [self.broker.forwarding.creatable(name) for name in dict.fromkeys(missing)]
            )
        )
        return self.metadata_response(
            topics,
            endpoints,
            creating={r.name: r.error_code for r in created.topics},
            refused=refused,
        )

    def metadata_response(
        self,
        topics: list[str] | None,
        endpoints: Mapping[int, tuple[str, int]],
        creating: Mapping[str, int] | None = None,
        refused: frozenset[str] = frozenset(),
    ) -> m.MetadataResponse:
        """The Metadata answer for ``topics`` (None: all). ``creating``: the outcome of
        auto-creating missing topics; ``endpoints``: the brokers' addresses on the
        listener asked; ``refused``: topics answered TOPIC_AUTHORIZATION_FAILED. As in
        Kafka, a topic whose creation is under way, or
        failed for now (a controller handover), answers LEADER_NOT_AVAILABLE so the client
        asks again; one that cannot be created answers that error; and
        UNKNOWN_TOPIC_OR_PARTITION means nobody is creating it."""
        creating = creating or {}
        brokers = [m.MetadataBroker(i, h, p) for i, (h, p) in endpoints.items()]
        set_by_broker = self.broker.config.topic_defaults_set()
        cache = self.broker.metadata.topics
        names = sorted(cache) if topics is None else topics
        out = []
        for name in names:
            if refused and name in refused:
                out.append(m.MetadataTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, "", []))
                continue
            state = cache.get(name)
            if state is None:
                code: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if topic_name_problem(name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif name in creating:
                    code = creating[name]
                    if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS) or is_retriable(code):
                        code = ErrorCode.LEADER_NOT_AVAILABLE
                out.append(m.MetadataTopic(code, name, "", []))
                continue
            live = self.broker.metadata.live_brokers
            out.append(
                m.MetadataTopic(
                    ErrorCode.NONE,
                    name,
                    state.topic_id,
                    [
                        # A leader that is not live (no failover yet): no leader until it returns.
                        m.MetadataPartition(
                            ErrorCode.NONE,
                            p.partition_index,
                            p.leader_id,
                            p.leader_epoch,
                            p.replicas,
                            p.isr,
                        )
                        if p.leader_id in live
                        else m.MetadataPartition(
                            ErrorCode.LEADER_NOT_AVAILABLE,
                            p.partition_index,
                            -1,
                            p.leader_epoch,
                            p.replicas,
                            p.isr,
                        )
                        for p in state.partitions
                    ],
                    {**set_by_broker, **state.configs} if set_by_broker else state.configs,
                )
            )
        return m.MetadataResponse(
            self.broker.config["cluster.id"], self.broker.metadata.controller_id, brokers, out
        )

    def handle_create_topics(self, request: m.CreateTopicsRequest, version: int) -> Result:
        check_topic_count(len(request.topics))
        refused = authz.create_topics_refusals(self.broker.auth, (t.name for t in request.topics))
        if refused:
            return authz.create_topics(self.broker.forwarding.create_topics, request, refused)
        return self.broker.forwarding.create_topics(request)

    def handle_delete_topics(self, request: m.DeleteTopicsRequest, version: int) -> Result:
        check_topic_count(len(request.topic_names))
        refused = authz.delete_topics_refusals(
            self.broker.auth, request.topic_names, self.broker.metadata.topics.__contains__
        )
        if refused:
            return authz.delete_topics(self.broker.forwarding.delete_topics, request, refused)
        return self.broker.forwarding.delete_topics(request)

    def handle_create_partitions(self, request: m.CreatePartitionsRequest, version: int) -> Result:
        check_topic_count(len(request.topics))
        refused = authz.create_partitions_refusals(
            self.broker.auth, (t.name for t in request.topics)
        )
        if refused:
            forward = self.broker.forwarding.create_partitions
            return authz.create_partitions(forward, request, refused)
        return self.broker.forwarding.create_partitions(request)

    def handle_init_producer_id(self, request: m.InitProducerIdRequest, version: int) -> Result:
        refused = authz.init_producer_id_refusal(self.broker.auth, request.transactional_id)
        if refused:
            return m.InitProducerIdResponse(refused, -1, -1)
        return m.InitProducerIdResponse(
            *self.broker.producer_ids.init_producer_id(
                request.transactional_id, request.producer_id, request.producer_epoch
            )
        )

    def handle_alter_configs(
        self, request: m.IncrementalAlterConfigsRequest, version: int
    ) -> Result:
        """AlterConfigs: every config given is SET, the others of the resource removed."""
        return self._alter_configs(request, incremental=False)

    def _alter_configs(
        self, request: m.IncrementalAlterConfigsRequest, incremental: bool
    ) -> Result:
        refused = authz.alter_configs_refusals(self.broker.auth, request.resources)
        if refused:
            forward = functools.partial(
                self.broker.forwarding.alter_configs, incremental=incremental
            )
            return authz.alter_configs(forward, request, refused)
        return self.broker.forwarding.alter_configs(request, incremental=incremental)

    def handle_incremental_alter_configs(
        self, request: m.IncrementalAlterConfigsRequest, version: int
    ) -> Result:
        return self._alter_configs(request, incremental=True)

    def handle_describe_user_scram_credentials(
        self, request: sm.DescribeUserScramCredentialsRequest, version: int
    ) -> Result:
        """Answered from this broker's metadata image, as Kafka's brokers answer it."""
        check_topic_count(len(request.users or ()))
        if authz.cluster_refused(self.broker.auth, AclOperation.DESCRIBE):
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_REFUSED
            return sm.DescribeUserScramCredentialsResponse(
                error,
                message,
                [
                    sm.DescribeUserScramCredentialsResult(user, error, message, [])
                    for user in request.users or ()
                ],
            )
        return self.broker.metadata.image.scram.describe(request.users)

    def handle_alter_user_scram_credentials(
        self, request: sm.AlterUserScramCredentialsRequest, version: int
    ) -> Result:
        check_topic_count(len(request.deletions) + len(request.upsertions))
        if authz.cluster_refused(self.broker.auth, AclOperation.ALTER):
            users = {d.name for d in request.deletions} | {u.name for u in request.upsertions}
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_REFUSED
            return sm.AlterUserScramCredentialsResponse(
                [sm.AlterUserScramCredentialsResult(user, error, message) for user in sorted(users)]
            )
        return self.broker.forwarding.alter_user_scram_credentials(request)

    # -- ACLs (as the Kafka listener's: broker/api/acl_requests.py) ----------------------------

    def handle_describe_acls(self, request: am.DescribeAclsRequest, version: int) -> Result:
        refused = refusal(self.broker.auth, AclOperation.DESCRIBE)
        if refused is not None:
            return am.DescribeAclsResponse(*refused, [])
        return describe_acls(self.broker.metadata.image.acls.acls, request.filter)

    def handle_create_acls(self, request: am.CreateAclsRequest, version: int) -> Result:
        check_topic_count(len(request.creations))
        refused = refusal(self.broker.auth, AclOperation.ALTER)
        if refused is not None:
            return am.CreateAclsResponse(
                [am.AclCreationResult(*refused) for _ in request.creations]
            )
        return self.broker.forwarding.create_acls(request)

    def handle_delete_acls(self, request: am.DeleteAclsRequest, version: int) -> Result:
        check_topic_count(len(request.filters))
        refused = refusal(self.broker.auth, AclOperation.ALTER)
        if refused is not None:
            return am.DeleteAclsResponse(
                [am.DeleteAclsFilterResult(*refused, []) for _ in request.filters]
            )
        return self.broker.forwarding.delete_acls(request)

    # -- client quotas (as the Kafka listener's: broker/api/client_quota_requests.py) --------

    def handle_describe_client_quotas(
        self, request: qm.DescribeClientQuotasRequest, version: int
    ) -> Result:
        return describe_client_quotas(self.broker, request)

    def handle_alter_client_quotas(
        self, request: qm.AlterClientQuotasRequest, version: int
    ) -> Result:
        return alter_client_quotas(self.broker, request)

    def handle_describe_quorum(self, request: Any, version: int) -> Result:
        if authz.cluster_refused(self.broker.auth, AclOperation.DESCRIBE):
            return authz.describe_quorum_refused()
        return self.broker.describe_quorum()

    def handle_elect_leaders(self, request: m.ElectLeadersRequest, version: int) -> Result:
        if request.election_type not in (m.PREFERRED_ELECTION, m.UNCLEAN_ELECTION):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"election_type must be {m.PREFERRED_ELECTION} (preferred) or "
                f"{m.UNCLEAN_ELECTION} (unclean), got {request.election_type}",
            )
        if request.leader_id >= 0 and (
            request.election_type != m.PREFERRED_ELECTION or request.topic_partitions is None
        ):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                "leader_id goes with a preferred election of the partitions named",
            )
        if request.topic_partitions is not None:
            check_topic_count(len(request.topic_partitions))
        if authz.cluster_refused(self.broker.auth, AclOperation.ALTER):
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return m.ElectLeadersResponse(
                error,
                [
                    m.ReplicaElectionResult(
                        t.topic, [m.PartitionResult(p, error, None) for p in t.partitions]
                    )
                    for t in request.topic_partitions or ()
                ],
            )
        return self.broker.forwarding.elect_leaders(request)


# -- domain results to response bodies ----------------------------------------------------


def _topic_name(topic: m.FetchTopic) -> str:
    return topic.topic


def _by_topic(
    entries: list[tuple[TopicPartition, Any]],
    entry: Callable[[int, Any], Any],
    topic_entry: Callable[[str, list[Any]], T],
) -> list[T]:
    """Group per-partition results by topic, keeping request order: consecutive entries of
    one topic form one topic entry."""
    if len(entries) == 1:  # most produces and fetches
        (topic, index), value = entries[0]
        return [topic_entry(topic, [entry(index, value)])]
    out: list[T] = []
    current: str | None = None
    parts: list[Any] = []
    for (topic, index), value in entries:
        if topic != current:
            parts = []
            out.append(topic_entry(topic, parts))
            current = topic
        parts.append(entry(index, value))
    return out


def _partition_data(index: int, data: FetchPartitionData) -> m.PartitionData:
    return m.PartitionData(
        index, data.error, data.high_watermark, data.log_start_offset, data.records
    )


def _fetch_topics(result: FetchResult) -> list[m.FetchableTopicResponse]:
    return _by_topic(result.partitions, _partition_data, m.FetchableTopicResponse)


def _fetch_response_v0(result: FetchResult) -> m.FetchResponseV0:
    return m.FetchResponseV0(_fetch_topics(result))


def _fetch_response_v1(result: FetchResult) -> m.FetchResponseV1:
    return m.FetchResponseV1(_fetch_topics(result), wait_time_ms=result.wait_ms)


def _partition_data_v2(index: int, data: FetchPartitionData) -> m.PartitionDataV2:
    records = data.records
    if data.aborted_transactions:  # read_committed: the broker drops them (read_committed.py)
        records = drop_aborted(records, data.aborted_transactions)
    return m.PartitionDataV2(index, data.error, data.high_watermark, data.log_start_offset, records)


def _fetch_response_v2(result: FetchResult) -> m.FetchResponseV2:
    topics = _by_topic(result.partitions, _partition_data_v2, m.FetchableTopicResponseV2)
    return m.FetchResponseV2(topics, wait_time_ms=result.wait_ms)


_FETCH_RESPONSES: dict[int, Callable[[FetchResult], Any]] = {
    0: _fetch_response_v0,
    1: _fetch_response_v1,
    2: _fetch_response_v2,
}


def _produce_partition(index: int, r: PartitionResponse) -> m.PartitionProduceResponse:
    return m.PartitionProduceResponse(
        index, r.error, r.base_offset, r.log_append_time_ms, r.log_start_offset, r.error_message
    )


def _produce_response(
    responses: list[tuple[TopicPartition, PartitionResponse]],
) -> m.ProduceResponse:
    return m.ProduceResponse(_by_topic(responses, _produce_partition, m.TopicProduceResponse))


def _ignore_version(handler: Callable[[Any], Any]) -> Callable[[Any, int], Result]:
    """A controller API handler (request only) as the network layer calls handlers."""

    def handle(request: Any, version: int) -> Result:
        return handler(request)

    return handle
