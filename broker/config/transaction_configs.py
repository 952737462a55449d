"""Configs of the transaction coordinator and its __transaction_state topic (Kafka's
TransactionStateManagerConfig and TransactionLogConfig)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least

TRANSACTION_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "transaction.state.log.num.partitions",
        int,
        50,
        "Partitions of the internal `__transaction_state` topic (created on the first "
        "FindCoordinator of a transactional id). The coordinator of transactional id T is "
        "the leader of partition hash(T) mod this.",
        at_least(1),
    ),
    ConfigDef(
        "transaction.state.log.replication.factor",
        int,
        3,
        "Replication factor of `__transaction_state`; a cluster with fewer members uses all "
        "of them (as `offsets.topic.replication.factor`).",
        at_least(1),
    ),
    ConfigDef(
        "transaction.state.log.min.isr",
        int,
        2,
        "`min.insync.replicas` of `__transaction_state` (capped at its replication factor).",
        at_least(1),
    ),
    ConfigDef(
        "transaction.state.log.segment.bytes",
        int,
        104857600,
        "`segment.bytes` of `__transaction_state`.",
        at_least(1),
    ),
    ConfigDef(
        "transaction.max.timeout.ms",
        int,
        900000,
        "Longest `transaction.timeout.ms` a producer may ask for (InitProducerId answers "
        "INVALID_TRANSACTION_TIMEOUT above).",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "transactional.id.expiration.ms",
        int,
        604800000,
        "How long a transactional id with no transaction in flight is kept after its last "
        "use; then it is forgotten.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        int,
        10000,
        "Kafka's scan for transactions open past their timeout. Accepted so Kafka's "
        "configuration files work; here each open transaction's timeout is its own timer on "
        "the timing wheel, so it is aborted (its producer fenced) at its timeout, not up to "
        "this much later.",
        at_least(1),
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        int,
        3600000,
        "How often the coordinator forgets transactional ids past "
        "`transactional.id.expiration.ms`.",
        at_least(1),
    ),
)
