"""How many partition replicas one broker may hold (``max.broker.partitions``, the name
KIP-578 gives it; Kafka itself has no cap). Logs live in memory here: each replica costs
its broker about 3 KiB idle (measured: 20,000 one-replica partitions grew a broker's RSS
by 53 MB), more with its fetch and purgatory state under load, before any record. So by
default the cap follows the memory budget: one replica per ``REPLICA_BYTES`` of
``log.memory.max.bytes`` (131,072 at the 1 GiB default), never below ``FLOOR`` (a small
budget, set to watch eviction, must still hold the internal topics), none without a
budget. The active controller refuses a CreateTopics or CreatePartitions entry that would
take any broker past it (POLICY_VIOLATION, naming the broker and the config)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState

REPLICA_BYTES = 8192
FLOOR = 1000


def broker_partition_limit(config: BrokerConfig) -> int | None:
    """The cap on replicas per broker; None: none."""
    limit: int = config["max.broker.partitions"]
    if limit >= 0:
        return limit
    budget: int = config["log.memory.max.bytes"]
    if budget < 0:
        return None
    return max(FLOOR, budget // REPLICA_BYTES)


class ReplicaCounts:
    """The replicas each broker holds, as a request's entries are admitted one by one."""

    def __init__(self, topics: Iterable[TopicState], limit: int | None) -> None:
        self.limit = limit
        self.counts: Counter[int] = Counter()
        if limit is not None:
            for topic in topics:
                for partition in topic.partitions:
                    self.counts.update(partition.replicas)

    def admit(self, partitions: Sequence[PartitionState]) -> str | None:
        """Count ``partitions`` in; or, if they would take a broker past the cap, why not
        (and nothing is counted)."""
        if self.limit is None:
            return None
        adding = Counter(r for p in partitions for r in p.replicas)
        over = sorted(b for b, n in adding.items() if self.counts[b] + n > self.limit)
        if over:
            broker = over[0]
            return (
                f"broker {broker} holds {self.counts[broker]} partition replicas and would hold "
                f"{self.counts[broker] + adding[broker]}; max.broker.partitions is {self.limit} "
                "(by default one per 8 KiB of log.memory.max.bytes: raise either, or delete "
                "topics)"
            )
        self.counts.update(adding)
        return None
