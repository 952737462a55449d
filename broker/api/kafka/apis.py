"""KafkaListenerApis: the Kafka listener's handler table, ApiVersions, and each API's error
response.

Kafka's protocol has no request-level error: a request refused as a whole (a limit, an
injected fault, a bug) is answered with the API's own response, the code in every
place it has one (every partition of a Produce, every topic of a CreateTopics, ...), as
Kafka's ``AbstractRequest.getErrorResponse`` does.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.kafka.acls import ACL_APIS, AclApis
from purgatory.broker.api.kafka.acls import error_response as acl_error_response
from purgatory.broker.api.kafka.client_quotas import CLIENT_QUOTA_APIS, ClientQuotaApis
from purgatory.broker.api.kafka.client_quotas import error_response as quota_error_response
from purgatory.broker.api.kafka.cluster import ClusterApis, create_partitions_response
from purgatory.broker.api.kafka.configs import (
    ConfigApis,
    alter_configs_response,
    describe_configs_response,
)
from purgatory.broker.api.kafka.consumer_groups import CONSUMER_GROUP_APIS, ConsumerGroupApis
from purgatory.broker.api.kafka.consumer_groups import (
    error_response as consumer_group_error_response,
)
from purgatory.broker.api.kafka.groups import GROUP_APIS, GroupApis
from purgatory.broker.api.kafka.groups import error_response as group_error_response
from purgatory.broker.api.kafka.leader_election import LeaderElectionApis
from purgatory.broker.api.kafka.leader_election import error_response as election_error_response
from purgatory.broker.api.kafka.log_info import LOG_INFO_APIS, LogInfoApis
from purgatory.broker.api.kafka.log_info import error_response as log_info_error_response
from purgatory.broker.api.kafka.offsets import OffsetApis, txn_offset_commit_response
from purgatory.broker.api.kafka.quorum import QuorumApis, describe_quorum_response
from purgatory.broker.api.kafka.records import RecordApis, delete_records_response
from purgatory.broker.api.kafka.sasl import SASL_APIS
from purgatory.broker.api.kafka.sasl import error_response as sasl_error_response
from purgatory.broker.api.kafka.sasl import handlers as sasl_handlers
from purgatory.broker.api.kafka.scram_credentials import SCRAM_APIS, ScramCredentialApis
from purgatory.broker.api.kafka.scram_credentials import error_response as scram_error_response
from purgatory.broker.api.kafka.share_fetch import SHARE_APIS, ShareFetchApis
from purgatory.broker.api.kafka.share_fetch import error_response as share_fetch_error_response
from purgatory.broker.api.kafka.share_groups import SHARE_GROUP_APIS, ShareGroupApis
from purgatory.broker.api.kafka.share_groups import (
    error_response as share_group_error_response,
)
from purgatory.broker.api.kafka.transactions import TRANSACTION_APIS, TransactionApis
from purgatory.broker.api.kafka.transactions import error_response as transaction_error_response
from purgatory.broker.api.results import Result
from purgatory.broker.network.request_channel import Request
from purgatory.broker.replication.delayed_delete_records import DeleteRecordsResult
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_fetch import (
    FetchPartition,
    FetchResponseBody,
    FetchTopic,
    topic_id_bytes,
)
from purgatory.protocol.kafka_schemas import VERSIONS, build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

# KIP-511: what a broker accepts as client software name and version.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class KafkaListenerApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.handlers: dict[int, Callable[[Any, int], Result]] = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            **RecordApis(broker).handlers(),
            **ClusterApis(broker).handlers(),
            **OffsetApis(broker).handlers(),
            **GroupApis(broker).handlers(),
            **ConsumerGroupApis(broker).handlers(),
            **ShareGroupApis(broker).handlers(),
            **ShareFetchApis(broker).handlers(),
            **ConfigApis(broker).handlers(),
            **QuorumApis(broker).handlers(),
            **LogInfoApis(broker).handlers(),
            **LeaderElectionApis(broker).handlers(),
            **TransactionApis(broker).handlers(),
            **sasl_handlers(),
            **AclApis(broker).handlers(),
            **ClientQuotaApis(broker).handlers(),
            **ScramCredentialApis(broker).handlers(),
        }
        missing = set(VERSIONS) - set(self.handlers)
        assert not missing, f"advertised without a handler: {missing}"
        # Kafka advertises KIP-848's APIs only where its group coordinator serves them.
        protocols = broker.config["group.coordinator.rebalance.protocols"].lower()
        self.hidden = frozenset(
            (CONSUMER_GROUP_APIS if "consumer" not in protocols else frozenset())
            | (SHARE_GROUP_APIS if "share" not in protocols else frozenset())
        )
        if "share" not in protocols:  # KIP-932's record APIs go with its group APIs
            self.hidden |= SHARE_APIS
        for key in self.hidden:
            self.handlers[key] = _unsupported(key)

    def handle_api_versions(self, request: Any, version: int) -> Result:
        if request is None:  # a version we do not serve: v0's shape, so any client reads it
            return _api_versions(0, ErrorCode.UNSUPPORTED_VERSION, self.hidden)
        if version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name)
            and _SOFTWARE.fullmatch(request.client_software_version)
        ):
            return _api_versions(version, ErrorCode.INVALID_REQUEST, self.hidden)
        return _api_versions(version, ErrorCode.NONE, self.hidden)

    # -- error responses ---------------------------------------------------------------------

    def error_response(self, request: Request, code: int, message: str) -> Any:
        """The response of ``request``'s API and version answering it ``code`` throughout."""
        body, version = request.body, request.api_version
        key = request.api_key
        schema: Any = response_module(key, version) if key != ApiKey.FETCH else None
        if key == ApiKey.API_VERSIONS:
            return _api_versions(version if body is not None else 0, code, self.hidden)
        if key in GROUP_APIS:
            return group_error_response(key, version, body, code)
        if key in CONSUMER_GROUP_APIS:
            return consumer_group_error_response(key, version, body, code, message)
        if key in SHARE_GROUP_APIS:
            return share_group_error_response(key, version, body, code, message)
        if key in SHARE_APIS:
            return share_fetch_error_response(key, version, code, message)
        if key in LOG_INFO_APIS:
            return log_info_error_response(key, version, body, code)
        if key == ApiKey.PRODUCE:
            if body.acks == 0:
                return None
            topics = _each_partition(
                schema,
                (
                    "TopicProduceResponse",
                    "partition_responses",
                    "PartitionProduceResponse",
                    "index",
                ),
                [(t.name, [p.index for p in t.partition_data]) for t in body.topic_data],
                error_code=code,
                base_offset=-1,
                record_errors=(),
                error_message=message,
            )
            return build(schema.ProduceResponse, throttle_time=0, responses=topics)
        if key == ApiKey.FETCH:
            topics = [
                FetchTopic(
                    getattr(t, "topic", "") or "",
                    topic_id_bytes(t.topic_id.hex) if getattr(t, "topic_id", None) else bytes(16),
                    [FetchPartition(p.partition, code, -1, -1, b"") for p in t.partitions],
                )
                for t in body.topics
            ]
            return FetchResponseBody(version, topics, 0, code)
        if key == ApiKey.LIST_OFFSETS:
            topics = _each_partition(
                schema,
                (
                    "ListOffsetsTopicResponse",
                    "partitions",
                    "ListOffsetsPartitionResponse",
                    "partition_index",
                ),
                [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics],
                error_code=code,
            )
            return build(schema.ListOffsetsResponse, throttle_time=0, topics=topics)
        if key == ApiKey.METADATA:
            return build(
                schema.MetadataResponse,
                throttle_time=0,
                brokers=[],
                topics=[
                    build(
                        schema.MetadataResponseTopic,
                        error_code=code,
                        name=t.name,
                        topic_id=None,
                        partitions=[],
                    )
                    for t in body.topics or ()
                ],
            )
        if key == ApiKey.OFFSET_COMMIT:
            topics = _each_partition(
                schema,
                (
                    "OffsetCommitResponseTopic",
                    "partitions",
                    "OffsetCommitResponsePartition",
                    "partition_index",
                ),
                [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics],
                error_code=code,
            )
            return build(schema.OffsetCommitResponse, throttle_time=0, topics=topics)
        if key == ApiKey.OFFSET_FETCH:
            if version >= 8:
                return build(
                    schema.OffsetFetchResponse,
                    throttle_time=0,
                    groups=[
                        build(
                            schema.OffsetFetchResponseGroup,
                            group_id=g.group_id,
                            topics=[],
                            error_code=code,
                        )
                        for g in body.groups
                    ],
                )
            return build(schema.OffsetFetchResponse, throttle_time=0, topics=[], error_code=code)
        if key == ApiKey.FIND_COORDINATOR:
            if version >= 4:
                return build(
                    schema.FindCoordinatorResponse,
                    throttle_time=0,
                    coordinators=[
                        build(
                            schema.Coordinator,
                            key=k,
                            node_id=-1,
                            host="",
                            port=-1,
                            error_code=code,
                            error_message=message,
                        )
                        for k in body.coordinator_keys
                    ],
                )
            return build(
                schema.FindCoordinatorResponse,
                throttle_time=0,
                error_code=code,
                error_message=message,
                node_id=-1,
                host="",
                port=-1,
            )
        if key == ApiKey.CREATE_TOPICS:
            return build(
                schema.CreateTopicsResponse,
                throttle_time=0,
                topics=[
                    build(
                        schema.CreatableTopicResult,
                        name=t.name,
                        topic_id=None,
                        error_code=code,
                        error_message=message,
                        configs=None,
                    )
                    for t in body.topics
                ],
            )
        if key == ApiKey.DELETE_TOPICS:
            names = [t.name for t in body.topics] if version >= 6 else list(body.topic_names)
            return build(
                schema.DeleteTopicsResponse,
                throttle_time=0,
                responses=[
                    build(
                        schema.DeletableTopicResult,
                        name=name,
                        topic_id=None,
                        error_code=code,
                        error_message=message,
                    )
                    for name in names
                ],
            )
        if key == ApiKey.DELETE_RECORDS:
            asked = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
            return delete_records_response(
                version, asked, collections.defaultdict(lambda: DeleteRecordsResult(code))
            )
        if key == ApiKey.CREATE_PARTITIONS:
            return create_partitions_response(
                version, [(t.name, code, message) for t in body.topics]
            )
        if key == ApiKey.DESCRIBE_CONFIGS:
            return describe_configs_response(
                version, [(r, code, message, []) for r in body.resources]
            )
        if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
            return alter_configs_response(
                ApiKey(key), version, [(r, code, message) for r in body.resources]
            )
        if key == ApiKey.TXN_OFFSET_COMMIT:
            return txn_offset_commit_response(version, body, code)
        if key in TRANSACTION_APIS:
            return transaction_error_response(key, version, body, code)
        if key in SCRAM_APIS:
            return scram_error_response(key, version, body, code, message)
        if key in ACL_APIS:
            return acl_error_response(key, version, body, code, message)
        if key in CLIENT_QUOTA_APIS:
            return quota_error_response(key, version, body, code, message)
        if key in SASL_APIS:
            return sasl_error_response(key, version, code, message)
        if key == ApiKey.DESCRIBE_CLUSTER:
            return build(
                schema.DescribeClusterResponse,
                throttle_time=0,
                error_code=code,
                error_message=message,
                cluster_id="",
                brokers=[],
            )
        if key == ApiKey.ELECT_LEADERS:
            return election_error_response(version, body, code, message)
        if key == ApiKey.DESCRIBE_QUORUM:
            refused = rm.DescribeQuorumResponse(code, message, -1, -1, -1, [], [])
            return describe_quorum_response(version, refused, {}, "")
        raise AssertionError(f"no error response for api key {key}")  # pragma: no cover


def _each_partition(
    schema: Any,
    shape: tuple[str, str, str, str],
    asked: list[tuple[str, list[int]]],
    **values: Any,
) -> list[Any]:
    """The topic entries of a response answering every partition ``asked`` with
    ``values``. ``shape``: the response's topic class, its partitions field, the
    partition class and its index field (Kafka names them differently per API)."""
    topic_cls, parts_field, part_cls, index_field = shape
    return [
        build(
            getattr(schema, topic_cls),
            name=name,
            **{
                parts_field: [
                    build(getattr(schema, part_cls), **{index_field: i}, **values) for i in indexes
                ]
            },
        )
        for name, indexes in asked
    ]


def _unsupported(key: ApiKey) -> Callable[[Any, int], Result]:
    """An API not enabled here: UNSUPPORTED_VERSION, as Kafka answers it."""

    def handle(request: Any, version: int) -> Result:
        raise RequestError(ErrorCode.UNSUPPORTED_VERSION, f"{key.api_name} is not enabled")

    return handle


def _api_versions(version: int, code: int, hidden: frozenset[ApiKey]) -> Any:
    schema = response_module(ApiKey.API_VERSIONS, version)
    return build(
        schema.ApiVersionsResponse,
        error_code=code,
        api_keys=[
            build(schema.ApiVersion, api_key=int(k), min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(VERSIONS.items())
            if k not in hidden
        ],
        throttle_time=0,
    )
