"""Configs of the group coordinator and its __consumer_offsets topic (Kafka's
GroupCoordinatorConfig)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least, between, parses

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
    ConfigDef(
        "group.coordinator.rebalance.protocols",
        str,
        "classic,consumer,share",
        "The group protocols the coordinator serves: `classic` (JoinGroup and SyncGroup), "
        "`consumer` (KIP-848's ConsumerGroupHeartbeat) and `share` (KIP-932's share groups). "
        "An API of a protocol not listed is not advertised.",
        parses(lambda v: _protocols(v)),
    ),
    ConfigDef(
        "group.consumer.session.timeout.ms",
        int,
        45000,
        "A consumer group member that sends no ConsumerGroupHeartbeat for this long is "
        "removed from its group (KIP-848).",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.min.session.timeout.ms",
        int,
        45000,
        "Smallest `consumer.session.timeout.ms` a consumer group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.max.session.timeout.ms",
        int,
        60000,
        "Largest `consumer.session.timeout.ms` a consumer group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.heartbeat.interval.ms",
        int,
        5000,
        "How often a consumer group member is told to heartbeat (KIP-848).",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.min.heartbeat.interval.ms",
        int,
        5000,
        "Smallest `consumer.heartbeat.interval.ms` a consumer group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.max.heartbeat.interval.ms",
        int,
        15000,
        "Largest `consumer.heartbeat.interval.ms` a consumer group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.consumer.max.size",
        int,
        2147483647,
        "Most members one consumer group may have (GROUP_MAX_SIZE_REACHED beyond).",
        at_least(1),
    ),
    ConfigDef(
        "group.share.session.timeout.ms",
        int,
        45000,
        "A share group member (KIP-932) that sends no ShareGroupHeartbeat for this long is "
        "removed from its group.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.min.session.timeout.ms",
        int,
        45000,
        "Smallest `share.session.timeout.ms` a share group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.max.session.timeout.ms",
        int,
        60000,
        "Largest `share.session.timeout.ms` a share group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.heartbeat.interval.ms",
        int,
        5000,
        "How often a share group member is told to heartbeat.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.min.heartbeat.interval.ms",
        int,
        5000,
        "Smallest `share.heartbeat.interval.ms` a share group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.max.heartbeat.interval.ms",
        int,
        15000,
        "Largest `share.heartbeat.interval.ms` a share group may be given.",
        at_least(1),
    ),
    ConfigDef(
        "group.share.max.size",
        int,
        200,
        "Most members one share group may have (GROUP_MAX_SIZE_REACHED beyond).",
        between(1, 1000),
    ),
    ConfigDef(
        "group.consumer.migration.policy",
        str,
        "bidirectional",
        "Whether a group moves between the classic and the consumer protocol while it has "
        "members (KIP-848's online migration): `upgrade` (a classic group becomes a consumer "
        "group when a consumer-protocol member joins), `downgrade` (a consumer group whose "
        "last consumer-protocol member leaves becomes a classic group), `bidirectional` "
        "(both) or `disabled`. Empty groups convert either way.",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
    ),
    ConfigDef(
        "group.consumer.assignors",
        str,
        "uniform,range",
        "The server-side assignors of consumer groups, by name (`uniform`, `range`) or "
        "Kafka's class name; the first is the default, a member may ask for another "
        "(`group.remote.assignor`).",
        parses(lambda v: _assignor_names(v)),
    ),
    ConfigDef(
        "group.share.record.lock.duration.ms",
        int,
        30000,
        "The record acquisition lock duration in milliseconds for share groups: a record a "
        "share consumer acquired and has not acknowledged by then is available again (or "
        "archived at `group.share.delivery.count.limit`). A group's "
        "`share.record.lock.duration.ms` overrides it.",
        between(1000, 3600000),
    ),
    ConfigDef(
        "group.share.min.record.lock.duration.ms",
        int,
        15000,
        "The record acquisition lock minimum duration in milliseconds for share groups (the "
        "least a group's `share.record.lock.duration.ms` may be).",
        between(1000, 30000),
    ),
    ConfigDef(
        "group.share.max.record.lock.duration.ms",
        int,
        60000,
        "The record acquisition lock maximum duration in milliseconds for share groups (the "
        "most a group's `share.record.lock.duration.ms` may be).",
        between(30000, 3600000),
    ),
    ConfigDef(
        "group.share.delivery.count.limit",
        int,
        5,
        "The maximum number of delivery attempts for a record delivered to a share group: "
        "released or timed out that often, it is archived, never delivered again.",
        between(2, 10),
    ),
    ConfigDef(
        "group.share.partition.max.record.locks",
        int,
        2000,
        "Share-group record lock limit per share-partition: the most records in flight "
        "(from the share-partition start offset to the last acquired) in one partition of "
        "one share group; no new records are acquired beyond it.",
        between(100, 10000),
    ),
)


def _protocols(value: str) -> list[str]:
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("classic", "consumer", "share")]
    if unknown or "classic" not in names:
        raise ValueError("must list classic, and may list consumer and share")
    return names


def _assignor_names(value: str) -> list[str]:
    """The assignors' names, Kafka's class names read as the names they stand for."""
    classes = {
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    }
    names = [classes.get(n.strip(), n.strip()) for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in ("uniform", "range")]
    if not names or unknown:
        raise ValueError("must name one or more of uniform, range")
    return names
