"""The controller's rules for topics as pure functions: legal names (and Kafka's
collisions between '.' and '_'), the partition limit, a CreateTopics request's checks,
where replicas go (Kafka's rack-unaware assignment), and adding partitions."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from purgatory.broker.config.broker_config import BrokerConfig, validate_topic_configs
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.topic_configs import kafka_value
from purgatory.broker.controller.partition_limits import ReplicaCounts
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState
from purgatory.protocol.messages import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_PARTITIONS_PER_TOPIC = 10000


def repeated_names(names: Iterable[str]) -> set[str]:
    """Topics named more than once in a request: Kafka refuses every entry of them."""
    counts = Counter(names)
    return {name for name, n in counts.items() if n > 1}


def topic_name_problem(name: str) -> str | None:
    """Kafka's topic name rules; None when the name is legal."""
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if not LEGAL_TOPIC.match(name):
        return (
            f"topic name {name!r} is illegal: use 1 to 249 characters of "
            "ASCII letters, digits, '.', '_' and '-'"
        )
    return None


def has_collision_chars(name: str) -> bool:
    """Kafka's ``Topic.hasCollisionChars``: whether the name has '.' or '_'."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: a name as per-topic metric names show it,
    '.' written as '_', so ``a.b`` and ``a_b`` are one name there."""
    return name.replace(".", "_")


def collision_index(names: Iterable[str]) -> dict[str, str]:
    """Existing topics with '.' or '_' by their unified name (Kafka's
    ``topicsWithCollisionChars``); where two already share one, the least name."""
    index: dict[str, str] = {}
    for name in names:
        if has_collision_chars(name):
            unified = unify_collision_chars(name)
            index[unified] = min(name, index.get(unified, name))
    return index


def collision_problem(name: str, collisions: Mapping[str, str]) -> str | None:
    """Kafka's refusal of a new topic that differs from an existing one only in '.'
    against '_' (their metrics would share one name); None when it collides with none."""
    if not has_collision_chars(name):
        return None
    existing = collisions.get(unify_collision_chars(name))
    if existing is None or existing == name:
        return None
    return f"Topic '{name}' collides with existing topic: {existing}"


def assign_replicas(
    brokers: list[int], partitions: int, replication_factor: int, start: int
) -> list[list[int]]:
    """Kafka's rack-unaware assignment: partition p's leader is broker (start + p) mod n;
    follower j sits 1 + (shift + j) mod (n - 1) places after it, the shift growing by one
    after every n partitions, so replicas of a partition are distinct brokers."""
    n = len(brokers)
    out = []
    shift = start
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out


def new_topic(
    topic: CreatableTopic,
    config: BrokerConfig,
    brokers: list[int],
    start: int,
    existing: Collection[str],
    topic_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    collisions: Mapping[str, str] | None = None,
) -> TopicState | CreatableTopicResult:
    """A CreateTopics entry checked (name, partition count, replication factor, configs)
    and, if valid, the new topic with its replicas assigned from ``start``; else the error
    result to answer. ``collisions``: ``collision_index(existing)``, when the caller has
    it already."""

    def fail(code: ErrorCode, message: str) -> CreatableTopicResult:
        return CreatableTopicResult(topic.name, code, message)

    problem = topic_name_problem(topic.name)
    if problem:
        return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if topic.name in existing:
        # Kafka's words: kafka-topics prints them after "Error while executing topic command : ".
        return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    collides = collision_problem(
        topic.name, collision_index(existing) if collisions is None else collisions
    )
    if collides:
        return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, collides)
    manual: list[list[int]] | None = None
    if topic.assignments is not None:
        manual_or_error = manual_assignment(topic, brokers)
        if isinstance(manual_or_error, tuple):
            return fail(*manual_or_error)
        manual = manual_or_error
    partitions = topic.num_partitions if topic.num_partitions != -1 else config["num.partitions"]
    if manual is None and not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        return fail(
            ErrorCode.INVALID_PARTITIONS,
            f"num_partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}, got {partitions}",
        )
    rf = (
        topic.replication_factor
        if topic.replication_factor != -1
        else config["default.replication.factor"]
    )
    if manual is None and not 1 <= rf <= len(brokers):
        return fail(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {rf} must be between 1 and the "
            f"{len(brokers)} brokers of the cluster",
        )
    try:
        configs: dict[str, Any] = validate_topic_configs(topic.configs, config.topic_defaults())
    except ConfigError as exc:
        return fail(ErrorCode.INVALID_CONFIG, str(exc))
    assignment = manual or assign_replicas(brokers, partitions, rf, start % len(brokers))
    return TopicState(
        topic.name,
        topic_id(),
        {k: kafka_value(v) for k, v in configs.items()},
        [
            PartitionState(p, replicas[0], 0, replicas, list(replicas))
            for p, replicas in enumerate(assignment)
        ],
    )


def manual_assignment(
    topic: CreatableTopic, brokers: list[int]
) -> list[list[int]] | tuple[ErrorCode, str]:
    """A CreateTopics entry's manual assignments as each partition's replicas, checked as
    Kafka's controller does, or the error to answer: INVALID_REQUEST with a partition
    count or replication factor beside them, INVALID_REPLICA_ASSIGNMENT for a partition
    given twice, an empty or repeated replica, a broker not in the cluster, replica counts
    that differ, or indexes that are not 0, 1, 2, ..."""
    if topic.replication_factor != -1:
        return ErrorCode.INVALID_REQUEST, (
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if topic.num_partitions != -1:
        return ErrorCode.INVALID_REQUEST, (
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    invalid = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    by_index: dict[int, list[int]] = {}
    for index, replicas in topic.assignments or ():
        if index in by_index:
            return invalid, f"Found multiple manual partition assignments for partition {index}"
        if not replicas:
            return invalid, "The manual partition assignment includes an empty replica list."
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            return invalid, (
                f"The manual partition assignment includes broker {unknown[0]}, but no such "
                "broker is registered."
            )
        if len(set(replicas)) != len(replicas):
            return invalid, "The manual partition assignment includes a broker more than once."
        if by_index and len(replicas) != len(next(iter(by_index.values()))):
            return invalid, (
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions."
            )
        by_index[index] = list(replicas)
    if sorted(by_index) != list(range(len(by_index))) or not by_index:
        return invalid, "partitions should be a consecutive 0-based integer sequence"
    return [by_index[i] for i in range(len(by_index))]


def create_topics(
    request: CreateTopicsRequest,
    existing: Collection[str],
    config: BrokerConfig,
    brokers: list[int],
    start: int,
    topic_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    replicas: ReplicaCounts | None = None,
) -> tuple[list[CreatableTopicResult], dict[str, TopicState]]:
    """CreateTopics checked topic by topic: one result per entry, and the new topics (none
    when ``validate_only``), the first placed from ``start``, each next one a step further;
    ``replicas``: what the brokers hold, against max.broker.partitions. As in Kafka, a
    name is checked for collisions against the topics that exist, not against the
    others of the same request."""
    results: list[CreatableTopicResult] = []
    created: dict[str, TopicState] = {}
    repeated = repeated_names(t.name for t in request.topics)
    collisions = (
        collision_index(existing)
        if any(has_collision_chars(t.name) for t in request.topics)
        else {}
    )
    for topic in request.topics:
        if topic.name in repeated:
            results.append(
                CreatableTopicResult(
                    topic.name,
                    ErrorCode.INVALID_REQUEST,
                    f"topic {topic.name!r} appears more than once in the request",
                )
            )
            continue
        made = new_topic(
            topic, config, brokers, start + len(created), existing, topic_id, collisions
        )
        if isinstance(made, CreatableTopicResult):
            results.append(made)
            continue
        full = replicas.admit(made.partitions) if replicas is not None else None
        if full is not None:
            results.append(CreatableTopicResult(topic.name, ErrorCode.POLICY_VIOLATION, full))
            continue
        partitions, rf = len(made.partitions), len(made.partitions[0].replicas)
        results.append(CreatableTopicResult(topic.name, ErrorCode.NONE, None, partitions, rf))
        if not request.validate_only:
            created[topic.name] = made
    return results, created


def grow_topics(
    request: CreatePartitionsRequest,
    topics: dict[str, TopicState],
    brokers: list[int],
    replicas: ReplicaCounts | None = None,
) -> tuple[list[CreatePartitionsTopicResult], dict[str, TopicState]]:
    """CreatePartitions checked topic by topic: one result per entry, and the topics that
    grow (none when ``validate_only``); ``replicas``: what the brokers hold, against
    max.broker.partitions."""
    results: list[CreatePartitionsTopicResult] = []
    grown: dict[str, TopicState] = {}
    repeated = repeated_names(t.name for t in request.topics)
    for change in request.topics:
        if change.name in repeated:
            outcome: TopicState | tuple[ErrorCode, str] = (
                ErrorCode.INVALID_REQUEST,
                f"topic {change.name!r} appears more than once in the request",
            )
        else:
            outcome = _grown(topics.get(change.name), change, brokers)
        if isinstance(outcome, TopicState) and replicas is not None:
            added = outcome.partitions[len(topics[change.name].partitions) :]
            full = replicas.admit(added)
            if full is not None:
                outcome = ErrorCode.POLICY_VIOLATION, full
        if isinstance(outcome, TopicState):
            results.append(CreatePartitionsTopicResult(change.name, ErrorCode.NONE))
            if not request.validate_only:
                grown[change.name] = outcome
        else:
            results.append(CreatePartitionsTopicResult(change.name, *outcome))
    return results, grown


def _grown(
    topic: TopicState | None, change: CreatePartitionsTopic, brokers: list[int]
) -> TopicState | tuple[ErrorCode, str]:
    """``topic`` with partitions added up to ``change.count`` (Kafka never removes
    partitions: keys would move and offsets would vanish), or the error to answer. New
    partitions keep the topic's replication factor; without explicit assignments they are
    placed as if the topic had been created with that many partitions."""
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {change.name!r} does not exist"
    current, count = len(topic.partitions), change.count
    if count < current:
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"topic {change.name!r} has {current} partitions, more than the {count} asked "
            "for; partitions can only be added",
        )
    if count == current:
        return ErrorCode.INVALID_PARTITIONS, f"topic {change.name!r} already has {count} partitions"
    if count > MAX_PARTITIONS_PER_TOPIC:
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"count must be at most {MAX_PARTITIONS_PER_TOPIC}, got {count}",
        )
    rf = len(topic.partitions[0].replicas)
    if change.assignments is None:
        first = topic.partitions[0].replicas[0]
        start = brokers.index(first) if first in brokers else 0
        added = assign_replicas(brokers, count, rf, start)[current:]
    else:
        added = change.assignments
        problem = _assignment_problem(added, count - current, rf, brokers)
        if problem:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    partitions = [
        *topic.partitions,
        *(
            PartitionState(current + i, replicas[0], 0, list(replicas), list(replicas))
            for i, replicas in enumerate(added)
        ),
    ]
    return TopicState(topic.name, topic.topic_id, topic.configs, partitions)


def _assignment_problem(
    assignments: list[list[int]], added: int, rf: int, brokers: list[int]
) -> str | None:
    if len(assignments) != added:
        return f"{added} partitions are added but {len(assignments)} assignments were given"
    for index, replicas in enumerate(assignments):
        if len(replicas) != rf:
            return (
                f"assignment {index} has {len(replicas)} replicas; the topic's replication "
                f"factor is {rf}"
            )
        if len(set(replicas)) != len(replicas):
            return f"assignment {index} names a broker twice: {replicas}"
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            return f"assignment {index} names unknown brokers {unknown} (brokers: {brokers})"
    return None


TopicsRequest = CreateTopicsRequest | CreatePartitionsRequest | DeleteTopicsRequest


def every_topic_fails(request: TopicsRequest, code: ErrorCode, message: str | None) -> Any:
    """The answer to a topics request that failed as a whole: each entry with ``code``."""
    if isinstance(request, CreateTopicsRequest):
        return CreateTopicsResponse(
            [CreatableTopicResult(t.name, code, message) for t in request.topics]
        )
    if isinstance(request, CreatePartitionsRequest):
        return CreatePartitionsResponse(
            [CreatePartitionsTopicResult(t.name, code, message) for t in request.topics]
        )
    return DeleteTopicsResponse(
        [DeletableTopicResult(name, code, message) for name in request.topic_names]
    )
