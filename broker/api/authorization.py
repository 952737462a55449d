"""Kafka's authorization checks (KafkaApis' and ControllerApis' ``authHelper`` calls) that
both protocols' handlers share: what in a request the principal may not act on, and the
error each refused piece gets, to be answered next to the rest.

Every function answers "nothing refused" at once without an authorizer (``auth.enabled``
False), so a handler with the authorizer off behaves as before. Each asks about the
request being handled: call it before the handler's first ``await`` (the connection's
principal is the server's current one only until then)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from purgatory.broker.replication.delayed_delete_records import DeleteRecordsResult
from purgatory.broker.replication.delayed_produce import PartitionResponse
from purgatory.broker.replication.fetch_params import TopicPartition
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.errors import ErrorCode

T = TypeVar("T")

NONE_REFUSED: frozenset[str] = frozenset()

# Kafka's ApiError messages for a refusal (its Errors' default messages).
TOPIC_REFUSED = "Topic authorization failed."
CLUSTER_REFUSED = "Cluster authorization failed."
GROUP_REFUSED = "Group authorization failed."

_BROKER_LOGGER = 8  # ConfigResource.Type.BROKER_LOGGER, a broker's as BROKER


def unauthorized_topics(
    auth: AuthHelper,
    operation: AclOperation,
    names: Iterable[str],
    unless_cluster: AclOperation | None = None,
) -> frozenset[str]:
    """The topics among ``names`` the principal may not ``operation``: none without an
    authorizer, or when it may ``unless_cluster`` on the cluster (Kafka's
    CLUSTER_ACTION for OffsetForLeaderEpoch, CREATE for CreateTopics, ...)."""
    if not auth.enabled:
        return NONE_REFUSED
    if unless_cluster is not None and auth.authorize_cluster(unless_cluster):
        return NONE_REFUSED
    asked = set(names)
    return frozenset(asked - auth.authorized(operation, ResourceType.TOPIC, asked))


def _once(names: Iterable[str]) -> list[str]:
    """The names asked once (one asked twice is the controller's INVALID_REQUEST, which
    Kafka answers before authorizing)."""
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    return [name for name, count in seen.items() if count == 1]


# -- Produce (WRITE on each topic) ------------------------------------------------------------


def write_refusals(
    auth: AuthHelper, entries: list[tuple[TopicPartition, bytes]]
) -> dict[TopicPartition, PartitionResponse]:
    """Produce: TOPIC_AUTHORIZATION_FAILED for each partition of a topic the principal may
    not WRITE, before any other check of it (an unknown topic too), as Kafka's
    handleProduceRequest."""
    denied = unauthorized_topics(auth, AclOperation.WRITE, {key[0] for key, _ in entries})
    if not denied:
        return {}
    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return {key: PartitionResponse(error) for key, _ in entries if key[0] in denied}


def with_refusals(
    respond: Callable[[list[tuple[TopicPartition, T]]], Any],
    refusals: list[tuple[TopicPartition, T]],
    appended: list[tuple[TopicPartition, T]],
) -> Any:
    """The response to the partitions served, then those refused (Kafka's order)."""
    return respond(appended + refusals)


# -- DeleteRecords (DELETE on each topic) -----------------------------------------------------


def delete_records_refusals(
    auth: AuthHelper, offsets: dict[TopicPartition, int]
) -> dict[TopicPartition, DeleteRecordsResult]:
    """DeleteRecords: TOPIC_AUTHORIZATION_FAILED (low watermark -1) for each partition of
    a topic the principal may not DELETE; ``offsets`` loses them."""
    denied = unauthorized_topics(auth, AclOperation.DELETE, {key[0] for key in offsets})
    if not denied:
        return {}
    refused = {
        key: DeleteRecordsResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for key in offsets
        if key[0] in denied
    }
    for key in refused:
        del offsets[key]
    return refused


def with_results(
    respond: Callable[[dict[TopicPartition, T]], Any], refused: Mapping[TopicPartition, T]
) -> Callable[[dict[TopicPartition, T]], Any]:
    """``respond`` to the results served and those ``refused`` together."""
    if not refused:
        return respond
    return lambda results: respond({**results, **refused})


# -- CreateTopics, DeleteTopics, CreatePartitions (ControllerApis) ------------------------------


def create_topics_refusals(auth: AuthHelper, names: Iterable[str]) -> dict[str, tuple[int, str]]:
    """CreateTopics: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED,
    "Authorization failed.", as Kafka's ControllerApis.createTopics)."""
    denied = unauthorized_topics(auth, AclOperation.CREATE, _once(names), AclOperation.CREATE)
    return {
        name: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.") for name in denied
    }


def delete_topics_refusals(
    auth: AuthHelper, names: Iterable[str], known: Callable[[str], bool]
) -> dict[str, ErrorCode]:
    """DeleteTopics: DELETE on the cluster, else on each topic; a topic the principal may
    not DESCRIBE is TOPIC_AUTHORIZATION_FAILED even when it does not exist (only those
    who may describe it learn UNKNOWN_TOPIC_OR_PARTITION), as Kafka's
    ControllerApis.deleteTopics."""
    asked = _once(names)
    undeletable = unauthorized_topics(auth, AclOperation.DELETE, asked, AclOperation.DELETE)
    if not undeletable:
        return {}
    hidden = unauthorized_topics(auth, AclOperation.DESCRIBE, undeletable)
    return {
        name: ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for name in undeletable
        if name in hidden or known(name)
    }


def create_partitions_refusals(auth: AuthHelper, names: Iterable[str]) -> frozenset[str]:
    """CreatePartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED, no message)."""
    return unauthorized_topics(auth, AclOperation.ALTER, _once(names))


async def create_topics(
    forward: Callable[[m.CreateTopicsRequest], Awaitable[m.CreateTopicsResponse]],
    request: m.CreateTopicsRequest,
    refused: Mapping[str, tuple[int, str]],
) -> m.CreateTopicsResponse:
    """``forward`` the topics not ``refused``; every topic answered in request order."""
    wanted = [t for t in request.topics if t.name not in refused]
    created = (
        await forward(m.CreateTopicsRequest(wanted, request.timeout_ms, request.validate_only))
        if wanted
        else m.CreateTopicsResponse([])
    )
    refusals = {name: m.CreatableTopicResult(name, *refusal) for name, refusal in refused.items()}
    names = [t.name for t in request.topics]
    return m.CreateTopicsResponse(_in_request_order(names, created.topics, refusals))


async def delete_topics(
    forward: Callable[[m.DeleteTopicsRequest], Awaitable[m.DeleteTopicsResponse]],
    request: m.DeleteTopicsRequest,
    refused: Mapping[str, int],
) -> m.DeleteTopicsResponse:
    wanted = [name for name in request.topic_names if name not in refused]
    deleted = (
        await forward(m.DeleteTopicsRequest(wanted, request.timeout_ms))
        if wanted
        else m.DeleteTopicsResponse([])
    )
    refusals = {name: m.DeletableTopicResult(name, code) for name, code in refused.items()}
    return m.DeleteTopicsResponse(
        _in_request_order(request.topic_names, deleted.responses, refusals)
    )


async def create_partitions(
    forward: Callable[[m.CreatePartitionsRequest], Awaitable[m.CreatePartitionsResponse]],
    request: m.CreatePartitionsRequest,
    refused: frozenset[str],
) -> m.CreatePartitionsResponse:
    wanted = [t for t in request.topics if t.name not in refused]
    done = (
        await forward(m.CreatePartitionsRequest(wanted, request.timeout_ms, request.validate_only))
        if wanted
        else m.CreatePartitionsResponse([])
    )
    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    refusals = {name: m.CreatePartitionsTopicResult(name, error) for name in refused}
    names = [t.name for t in request.topics]
    return m.CreatePartitionsResponse(_in_request_order(names, done.results, refusals))


class _Named(Protocol):
    name: str


R = TypeVar("R", bound=_Named)


def _in_request_order(names: list[str], served: list[R], refusals: Mapping[str, R]) -> list[R]:
    """The controller's results (``served``) and the ``refusals``, in the order of the
    request's ``names`` (a name asked twice: its results once, where first asked)."""
    by_name: dict[str, list[R]] = {}
    for r in served:
        by_name.setdefault(r.name, []).append(r)
    out: list[R] = []
    for name in dict.fromkeys(names):
        out += [refusals[name]] if name in refusals else by_name.pop(name, [])
    for rest in by_name.values():
        out += rest
    return out


# -- Configs (DESCRIBE_CONFIGS, ALTER_CONFIGS) --------------------------------------------------


def config_refusal(
    auth: AuthHelper, operation: AclOperation, resource_type: int, name: str
) -> tuple[int, str] | None:
    """Why the principal may not ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the
    configs of a resource, if it may not: a topic's need it on the TOPIC
    (TOPIC_AUTHORIZATION_FAILED), a broker's on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED),
    a group's on the GROUP (GROUP_AUTHORIZATION_FAILED), as Kafka's ConfigHelper and ControllerApis.authorizeAlterResource. Other types are
    left to the handler's own error."""
    if not auth.enabled:
        return None
    if resource_type == m.TOPIC_RESOURCE:
        allowed = auth.authorize(operation, ResourceType.TOPIC, name)
        return None if allowed else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, TOPIC_REFUSED)
    if resource_type in (m.BROKER_RESOURCE, _BROKER_LOGGER):
        allowed = auth.authorize_cluster(operation)
        return None if allowed else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED)
    if resource_type == m.GROUP_RESOURCE:
        allowed = auth.authorize(operation, ResourceType.GROUP, name)
        return None if allowed else (ErrorCode.GROUP_AUTHORIZATION_FAILED, GROUP_REFUSED)
    return None


ConfigRefusals = dict[tuple[int, str], tuple[int, str]]  # (type, name): (error, message)


def alter_configs_refusals(auth: AuthHelper, resources: Iterable[Any]) -> ConfigRefusals:
    """AlterConfigs and IncrementalAlterConfigs: ALTER_CONFIGS per resource (each with
    ``resource_type`` and ``resource_name``)."""
    if not auth.enabled:
        return {}
    refused = {}
    for r in resources:
        refusal = config_refusal(auth, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
        if refusal is not None:
            refused[(r.resource_type, r.resource_name)] = refusal
    return refused


async def alter_configs(
    forward: Callable[
        [m.IncrementalAlterConfigsRequest], Awaitable[m.IncrementalAlterConfigsResponse]
    ],
    request: m.IncrementalAlterConfigsRequest,
    refused: Mapping[tuple[int, str], tuple[int, str]],
) -> m.IncrementalAlterConfigsResponse:
    """``forward`` the changes of resources not ``refused``; every resource answered in
    request order."""
    if not refused:
        return await forward(request)
    wanted = [r for r in request.resources if (r.resource_type, r.resource_name) not in refused]
    done = (
        await forward(m.IncrementalAlterConfigsRequest(wanted, request.validate_only))
        if wanted
        else m.IncrementalAlterConfigsResponse([])
    )
    served = {(r.resource_type, r.resource_name): r for r in done.responses}
    out = []
    for r in request.resources:
        key = (r.resource_type, r.resource_name)
        if key in refused:
            out.append(m.AlterConfigsResourceResponse(*refused[key], *key))
        elif key in served:
            out.append(served[key])
    return m.IncrementalAlterConfigsResponse(out)


# -- InitProducerId ---------------------------------------------------------------------------


def init_producer_id_refusal(auth: AuthHelper, transactional_id: str | None) -> int:
    """InitProducerId, as Kafka's handleInitProducerIdRequest: a transactional producer
    needs WRITE on its TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an
    idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679),
    else CLUSTER_AUTHORIZATION_FAILED. NONE when allowed."""
    if not auth.enabled:
        return ErrorCode.NONE
    if transactional_id is not None:
        if auth.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return ErrorCode.NONE
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if auth.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) or auth.authorize_by_resource_type(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def cluster_refused(auth: AuthHelper, operation: AclOperation) -> bool:
    """Whether the principal may not ``operation`` on the cluster (never without an
    authorizer): ElectLeaders (ALTER), DescribeQuorum and DescribeUserScramCredentials
    (DESCRIBE), AlterUserScramCredentials (ALTER), DescribeLogDirs (DESCRIBE)."""
    return auth.enabled and not auth.authorize_cluster(operation)


def describe_quorum_refused() -> rm.DescribeQuorumResponse:
    """DescribeQuorum without DESCRIBE on the cluster: Kafka's top-level
    CLUSTER_AUTHORIZATION_FAILED, no partition."""
    error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return rm.DescribeQuorumResponse(error, CLUSTER_REFUSED, -1, -1, -1, [], [])
