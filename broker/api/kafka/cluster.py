"""The Kafka listener's cluster and topic APIs: Metadata, DescribeCluster, CreateTopics,
DeleteTopics and CreatePartitions.

They share the broker's domain answers with our own protocol (KafkaApis builds the
metadata picture, the ForwardingManager creates and deletes topics on the controller) and
only reshape them into the version asked. Metadata lists the live brokers at the one
address that serves both protocols, and real topic ids (UUIDs).
"""

from __future__ import annotations

import inspect
import uuid
from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.kafka.configs import ConfigApis, entry_fields
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result
from purgatory.broker.controller.internal_topics import INTERNAL_TOPICS
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, millis, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

_DEFAULT_TIMEOUT_MS = 30000


class ClusterApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
        }

    # -- Metadata ----------------------------------------------------------------------------

    def handle_metadata(self, request: Any, version: int) -> Result:
        """Topics by name, or (v10+) by topic id: a known id is answered as its name, an
        unknown one UNKNOWN_TOPIC_ID, first, as Kafka lists them."""
        topics: list[str] | None
        unknown_ids: list[str] = []
        if request.topics is None or (version == 0 and not request.topics):
            topics = None  # v0 asks for every topic with an empty list, later versions with null
        else:
            topics = []
            names = self.broker.metadata.topic_names
            for t in request.topics:
                topic_id = getattr(t, "topic_id", None)
                if t.name is not None:
                    topics.append(t.name)
                elif topic_id is not None:
                    name = names.get(topic_id.hex)
                    if name is None:
                        unknown_ids.append(topic_id.hex)
                    else:
                        topics.append(name)
        allow = getattr(request, "allow_auto_topic_creation", True)
        answer = self.broker.apis.handle_metadata(m.MetadataRequest(topics, allow), 0)
        if inspect.isawaitable(answer):
            return self._after(answer, version, unknown_ids)
        return self._metadata(answer, version, unknown_ids)

    async def _after(self, answer: Any, version: int, unknown_ids: list[str]) -> Any:
        return self._metadata(await answer, version, unknown_ids)

    def _metadata(self, answer: m.MetadataResponse, version: int, unknown_ids: list[str]) -> Any:
        schema = response_module(ApiKey.METADATA, version)
        live = self.broker.metadata.live_brokers
        brokers = [
            build(schema.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port)
            for b in answer.brokers
            if b.node_id in live
        ]
        topics = [
            build(
                schema.MetadataResponseTopic,
                error_code=t.error_code,
                name=t.name,
                topic_id=t.topic_id or None,
                is_internal=t.name in INTERNAL_TOPICS,
                partitions=[
                    build(
                        schema.MetadataResponsePartition,
                        error_code=p.error_code,
                        partition_index=p.partition_index,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=p.replica_nodes,
                        isr_nodes=p.isr_nodes,
                        offline_replicas=[r for r in p.replica_nodes if r not in live],
                    )
                    for p in t.partitions
                ],
            )
            for t in answer.topics
        ]
        unknown = [
            build(
                schema.MetadataResponseTopic,
                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                name=None,
                topic_id=topic_id,
                is_internal=False,
                partitions=[],
            )
            for topic_id in unknown_ids
        ]
        return build(
            schema.MetadataResponse,
            throttle_time=0,
            brokers=brokers,
            cluster_id=answer.cluster_id,
            controller_id=answer.controller_id,
            topics=unknown + topics,
        )

    # -- DescribeCluster ---------------------------------------------------------------------

    def handle_describe_cluster(self, request: Any, version: int) -> Result:
        schema = response_module(ApiKey.DESCRIBE_CLUSTER, version)
        metadata = self.broker.metadata
        brokers = [
            build(schema.DescribeClusterBroker, broker_id=i, host=h, port=p)
            for i, (h, p) in self.broker.endpoints().items()
            if i in metadata.live_brokers
        ]
        return build(
            schema.DescribeClusterResponse,
            throttle_time=0,
            error_code=0,
            error_message=None,
            cluster_id=self.broker.config["cluster.id"],
            controller_id=metadata.controller_id,
            brokers=brokers,
        )

    # -- CreateTopics / DeleteTopics ---------------------------------------------------------

    def handle_create_topics(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.topics))
        asked = m.CreateTopicsRequest(
            [
                m.CreatableTopic(
                    t.name,
                    t.num_partitions,
                    t.replication_factor,
                    {c.name: c.value for c in t.configs if c.value is not None},
                    [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
                    if t.assignments
                    else None,
                )
                for t in request.topics
            ],
            _timeout_ms(request),
            request.validate_only,
        )
        # Answered here, never forwarded: a topic the principal may not create (Kafka's
        # ControllerApis), then, as Kafka's ControllerConfigurationValidator refuses them,
        # configs of null value.
        refused = authz.create_topics_refusals(self.broker.auth, (t.name for t in request.topics))
        for t in request.topics:
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls and t.name not in refused:
                refused[t.name] = (
                    ErrorCode.INVALID_CONFIG,
                    f"Null value not supported for topic configs: {','.join(nulls)}",
                )
        # As Kafka's controller, a created topic's configs only to who may DESCRIBE_CONFIGS.
        hidden = authz.unauthorized_topics(
            self.broker.auth, AclOperation.DESCRIBE_CONFIGS, (t.name for t in request.topics)
        )
        return self._create(asked, refused, version, hidden)

    async def _create(
        self,
        asked: m.CreateTopicsRequest,
        refused: dict[str, tuple[int, str]],
        version: int,
        hidden: frozenset[str] = frozenset(),
    ) -> Any:
        schema = response_module(ApiKey.CREATE_TOPICS, version)
        wanted = m.CreateTopicsRequest(
            [t for t in asked.topics if t.name not in refused],
            asked.timeout_ms,
            asked.validate_only,
        )
        created = await self.broker.forwarding.create_topics(wanted) if wanted.topics else None
        results = {r.name: r for r in created.topics} if created is not None else {}
        out = []
        answered: set[str] = set()
        for t in asked.topics:
            if t.name in answered:
                continue  # a name asked twice: one answer, as Kafka gives (INVALID_REQUEST)
            answered.add(t.name)
            r = results.get(t.name)
            code: int
            message: str | None
            if r is None:
                code, message = refused[t.name]
                partitions, factor = -1, -1
            else:
                code, message = r.error_code, r.error_message
                partitions, factor = r.num_partitions, r.replication_factor
            config_error = 0
            if t.name in hidden and not code:  # Kafka: the counts and configs withheld too
                config_error, partitions, factor = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
            out.append(
                build(
                    schema.CreatableTopicResult,
                    name=t.name,
                    topic_id=self._created_id(t.name, code, asked.validate_only),
                    error_code=code,
                    error_message=message,
                    num_partitions=partitions,
                    replication_factor=factor,
                    # From v5 Kafka answers every config of the topic created (the Java
                    # AdminClient's CreateTopicsResult.config()); validate_only too.
                    # An error has no configs: Kafka's empty list, not null.
                    configs=[]
                    if code or config_error
                    else self._created_configs(schema, t.configs, version),
                    topic_config_error_code=config_error,
                )
            )
        return build(schema.CreateTopicsResponse, throttle_time=0, topics=out)

    def _created_id(self, name: str, code: int, validate_only: bool) -> str | None:
        """The created topic's id; with ``validate_only`` a fresh one, as Kafka's controller
        answers the id it would have given (a client may read it from any success)."""
        if code:
            return None
        if validate_only:
            return uuid.uuid4().hex
        state = self.broker.metadata.topics.get(name)
        return state.topic_id if state is not None else None

    def _created_configs(self, schema: Any, configs: dict[str, str], version: int) -> list[Any]:
        if version < 5:
            return []  # no such field
        return [
            build(schema.CreatableTopicConfigs, **entry_fields(e))
            for e in ConfigApis(self.broker).topic_entries(configs)
        ]

    def handle_delete_topics(self, request: Any, version: int) -> Result:
        """Topics by name (before v6) or by name or id (v6). As Kafka's controller answers:
        a name it does not know is UNKNOWN_TOPIC_OR_PARTITION, an id UNKNOWN_TOPIC_ID, an
        entry with neither INVALID_REQUEST."""
        if version >= 6:
            names = self.broker.metadata.topic_names
            topics = []
            for t in request.topics:
                if t.name is not None:
                    topics.append((t.name, t.topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                elif t.topic_id is not None and t.topic_id.int:
                    name = names.get(t.topic_id.hex, "")
                    topics.append((name, t.topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                else:
                    topics.append(("", None, ErrorCode.INVALID_REQUEST))
        else:
            topics = [
                (name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for name in request.topic_names
            ]
        check_topic_count(len(topics))
        refused = authz.delete_topics_refusals(
            self.broker.auth,
            [n for n, _, _ in topics if n],
            self.broker.metadata.topics.__contains__,
        )
        if refused:  # answered here; a topic asked by id keeps its name only if describable
            hidden = authz.unauthorized_topics(self.broker.auth, AclOperation.DESCRIBE, refused)
            topics = [
                (n if topic_id is None or n not in hidden else "", topic_id, refused[n])
                if n in refused
                else (n, topic_id, code)
                for n, topic_id, code in topics
            ]
        return self._delete(topics, _timeout_ms(request), version)

    async def _delete(
        self, topics: list[tuple[str, Any, ErrorCode]], timeout_ms: int, version: int
    ) -> Any:
        schema = response_module(ApiKey.DELETE_TOPICS, version)
        ids = {name: self.broker.metadata.topics.get(name) for name, _, _ in topics}
        named = [
            name
            for name, _, code in topics
            if name and code != ErrorCode.TOPIC_AUTHORIZATION_FAILED
        ]
        deleted = (
            await self.broker.forwarding.delete_topics(m.DeleteTopicsRequest(named, timeout_ms))
            if named
            else None
        )
        results = {r.name: r for r in deleted.responses} if deleted is not None else {}
        out = []
        for name, topic_id, unknown in topics:
            r = results.get(name) if name else None
            state = ids.get(name)
            out.append(
                build(
                    schema.DeletableTopicResult,
                    # A name asked for is echoed ("" too); an unknown id has none.
                    name=name
                    or (name if unknown == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None),
                    topic_id=topic_id or (state.topic_id if state is not None else None),
                    error_code=r.error_code if r is not None else unknown,
                    error_message=r.error_message if r is not None else None,
                )
            )
        return build(schema.DeleteTopicsResponse, throttle_time=0, responses=out)

    # -- CreatePartitions --------------------------------------------------------------------

    def handle_create_partitions(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.topics))
        asked = m.CreatePartitionsRequest(
            [
                m.CreatePartitionsTopic(
                    t.name,
                    t.count,
                    None if t.assignments is None else [list(a.broker_ids) for a in t.assignments],
                )
                for t in request.topics
            ],
            _timeout_ms(request),
            request.validate_only,
        )
        refused = authz.create_partitions_refusals(self.broker.auth, (t.name for t in asked.topics))
        return self._create_partitions(asked, version, refused)

    async def _create_partitions(
        self, asked: m.CreatePartitionsRequest, version: int, refused: frozenset[str]
    ) -> Any:
        forward = self.broker.forwarding.create_partitions
        done = await authz.create_partitions(forward, asked, refused)
        # A name asked twice is answered once (INVALID_REQUEST), as Kafka answers.
        once: dict[str, tuple[str, int, str | None]] = {}
        for r in done.results:
            once.setdefault(r.name, (r.name, r.error_code, r.error_message))
        return create_partitions_response(version, list(once.values()))


def create_partitions_response(version: int, results: list[tuple[str, int, str | None]]) -> Any:
    """A CreatePartitions response: (topic, error code, message) per topic asked."""
    schema = response_module(ApiKey.CREATE_PARTITIONS, version)
    return build(
        schema.CreatePartitionsResponse,
        throttle_time=0,
        results=[
            build(schema.CreatePartitionsTopicResult, name=n, error_code=c, error_message=msg)
            for n, c, msg in results
        ],
    )


def _timeout_ms(request: Any) -> int:
    timeout = getattr(request, "timeout", None)
    return millis(timeout) if timeout is not None else _DEFAULT_TIMEOUT_MS
