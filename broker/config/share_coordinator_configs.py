"""Configs of the share coordinator and its __share_group_state topic (Kafka's
ShareCoordinatorConfig)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least

SHARE_COORDINATOR_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "share.coordinator.state.topic.num.partitions",
        int,
        50,
        "Partitions of the internal `__share_group_state` topic (created when a share "
        "partition's leader first looks for its state). The state of group G's partition P "
        "of topic T lives in partition hash(`G:T:P`) mod this (Kafka's key, with T's id as "
        "Kafka writes it), led by its share coordinator.",
        at_least(1),
    ),
    ConfigDef(
        "share.coordinator.state.topic.replication.factor",
        int,
        3,
        "Replication factor of `__share_group_state`; a cluster with fewer members uses all "
        "of them (as `offsets.topic.replication.factor`).",
        at_least(1),
    ),
    ConfigDef(
        "share.coordinator.state.topic.min.isr",
        int,
        2,
        "`min.insync.replicas` of `__share_group_state` (capped at its replication factor).",
        at_least(1),
    ),
    ConfigDef(
        "share.coordinator.state.topic.segment.bytes",
        int,
        104857600,
        "`segment.bytes` of `__share_group_state`.",
        at_least(1),
    ),
    ConfigDef(
        "share.coordinator.write.timeout.ms",
        int,
        5000,
        "How long a WriteShareGroupState waits for the in-sync replicas of its "
        "`__share_group_state` partition (acks=-1) before it fails.",
        at_least(1),
    ),
    ConfigDef(
        "share.coordinator.load.buffer.size",
        int,
        5242880,
        "Bytes of `__share_group_state` replayed per step when a broker becomes a state "
        "partition's leader (each step yields to other work).",
        at_least(1),
    ),
)
