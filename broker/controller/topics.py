"""The controller's rules for topics: legal names, the partition limit, and where a new
topic's replicas go (Kafka's rack-unaware assignment)."""

from __future__ import annotations

import re

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
