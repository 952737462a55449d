"""Configs of the group coordinator and its __consumer_offsets topic (Kafka's
GroupCoordinatorConfig)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least

GROUP_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "offsets.topic.num.partitions",
        int,
        50,
        "Partitions of the internal `__consumer_offsets` topic (created on first use). The "
        "coordinator of group G is the leader of partition hash(G) mod this.",
        at_least(1),
    ),
    ConfigDef(
        "offsets.topic.replication.factor",
        int,
        3,
        "Replication factor of `__consumer_offsets`. Kafka refuses to create the topic "
        "while fewer brokers exist; here a cluster with fewer members uses all of them "
        "(so a single broker works without changing it).",
        at_least(1),
    ),
    ConfigDef(
        "offsets.commit.timeout.ms",
        int,
        5000,
        "How long a commit (or a group's assignment) waits for every in-sync replica of its "
        "`__consumer_offsets` partition; then it fails with COORDINATOR_NOT_AVAILABLE.",
        at_least(1),
    ),
    ConfigDef(
        "offsets.retention.minutes",
        int,
        10080,
        "The committed offsets of a group are deleted this long after the group became "
        "empty (a group that only commits: after its last commit).",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "offsets.retention.check.interval.ms",
        int,
        600000,
        "How often each coordinator looks for offsets to expire.",
        at_least(1),
    ),
    ConfigDef(
        "offset.metadata.max.bytes",
        int,
        4096,
        "Longest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond).",
        at_least(0),
    ),
    ConfigDef(
        "group.initial.rebalance.delay.ms",
        int,
        3000,
        "How long the first rebalance of an empty group waits for more members to join "
        "(each new member extends it by this much, up to the rebalance timeout).",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "group.min.session.timeout.ms",
        int,
        6000,
        "Shortest session timeout a member may ask for (INVALID_SESSION_TIMEOUT below).",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "group.max.session.timeout.ms",
        int,
        1800000,
        "Longest session timeout a member may ask for (INVALID_SESSION_TIMEOUT above).",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "group.max.size",
        int,
        2147483647,
        "Most members one group may have (GROUP_MAX_SIZE_REACHED beyond).",
        at_least(1),
        dynamic=True,
    ),
)
