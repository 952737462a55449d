"""The controller's rules for topics: legal names, the partition limit, a new topic's
checks, and where its replicas go (Kafka's rack-unaware assignment)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Container
from typing import Any

from broker.config.broker_config import BrokerConfig, validate_topic_configs
from broker.config.definitions import ConfigError
from protocol.errors import ErrorCode
from protocol.messages import CreatableTopic, CreatableTopicResult, PartitionState, TopicState

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_PARTITIONS_PER_TOPIC = 10000


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
    existing: Container[str],
) -> TopicState | CreatableTopicResult:
    """A CreateTopics entry checked (name, partition count, replication factor, configs)
    and, if valid, the new topic with its replicas assigned from ``start``; else the error
    result to answer."""

    def fail(code: ErrorCode, message: str) -> CreatableTopicResult:
        return CreatableTopicResult(topic.name, code, message)

    problem = topic_name_problem(topic.name)
    if problem:
        return fail(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if topic.name in existing:
        return fail(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    partitions = topic.num_partitions if topic.num_partitions != -1 else config["num.partitions"]
    if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        return fail(
            ErrorCode.INVALID_PARTITIONS,
            f"num_partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}, got {partitions}",
        )
    rf = (
        topic.replication_factor
        if topic.replication_factor != -1
        else config["default.replication.factor"]
    )
    if not 1 <= rf <= len(brokers):
        return fail(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {rf} must be between 1 and the "
            f"{len(brokers)} brokers of the cluster",
        )
    try:
        configs: dict[str, Any] = validate_topic_configs(topic.configs, config.topic_defaults())
    except ConfigError as exc:
        return fail(ErrorCode.INVALID_CONFIG, str(exc))
    assignment = assign_replicas(brokers, partitions, rf, start % len(brokers))
    return TopicState(
        topic.name,
        uuid.uuid4().hex,
        {k: str(v) for k, v in configs.items()},
        [
            PartitionState(p, replicas[0], 0, replicas, list(replicas))
            for p, replicas in enumerate(assignment)
        ],
    )
