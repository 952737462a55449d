"""Configs of topics' defaults, replication, leadership and the brokers' lifecycle with the
controller (Kafka's ReplicationConfigs and KRaftConfigs)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least

REPLICATION_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "auto.create.topics.enable",
        bool,
        True,
        "Create a topic when a client asks for metadata of (or produces to) an unknown one.",
        dynamic=True,
    ),
    ConfigDef(
        "num.partitions",
        int,
        1,
        "Partitions of an auto-created topic, and the default "
        "for CreateTopics with num_partitions -1.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "default.replication.factor",
        int,
        1,
        "Replication factor of auto-created topics and the default for CreateTopics.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "min.insync.replicas",
        int,
        1,
        "In-sync replicas an acks=-1 produce needs: fewer and it is refused "
        "(NOT_ENOUGH_REPLICAS) before appending, or answered with "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank while it waited. Also a topic config.",
        at_least(1),
        topic_name="min.insync.replicas",
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        bool,
        False,
        "When no in-sync replica of a partition is live, let the controller elect any live "
        "replica; records only the lost in-sync replicas held are then lost, as in Kafka. "
        "Off: the partition stays offline until an in-sync replica returns. Also a topic "
        "config.",
        dynamic=True,
        topic_name="unclean.leader.election.enable",
    ),
    ConfigDef(
        "auto.leader.rebalance.enable",
        bool,
        True,
        "Every leader.imbalance.check.interval.seconds, move the leadership of partitions "
        "whose preferred (first) replica is a live in-sync replica back to it.",
        dynamic=True,
    ),
    ConfigDef(
        "leader.imbalance.check.interval.seconds",
        int,
        300,
        "How often the controller checks for leadership away from preferred replicas.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "controlled.shutdown.enable",
        bool,
        True,
        "On SIGTERM or Ctrl-C, ask the controller to move this broker's leaderships to other "
        "in-sync replicas before stopping, so clients see NOT_LEADER_OR_FOLLOWER instead of "
        "a dead leader for a session timeout.",
    ),
    ConfigDef(
        "controlled.shutdown.max.retries",
        int,
        3,
        "Attempts of a controlled shutdown whose controller could not be reached or answered "
        "an error, before the broker stops anyway.",
        at_least(0),
    ),
    ConfigDef(
        "controlled.shutdown.retry.backoff.ms",
        int,
        5000,
        "Wait between controlled shutdown attempts.",
        at_least(0),
    ),
    ConfigDef(
        "replica.lag.time.max.ms",
        int,
        30000,
        "A follower that has not caught up to the leader's log end for this long leaves the "
        "ISR; the leader checks every half of it.",
        at_least(10),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.wait.max.ms",
        int,
        500,
        "`max_wait_ms` of a follower's fetches (they long-poll the leader).",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.min.bytes",
        int,
        1,
        "`min_bytes` of a follower's fetches.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.max.bytes",
        int,
        1048576,
        "Bytes a follower asks for per partition in one fetch (the first batch always comes).",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.response.max.bytes",
        int,
        10485760,
        "Bytes a follower asks for in one fetch, over all partitions.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.socket.timeout.ms",
        int,
        30000,
        "How long a follower waits for its leader to answer a fetch (beyond the fetch's own "
        "replica.fetch.wait.max.ms) before it gives the connection up and starts again.",
        at_least(1),
    ),
    ConfigDef(
        "replica.fetch.backoff.ms",
        int,
        1000,
        "How long a follower leaves out a partition the leader answered with an error "
        "(the others keep fetching), or pauses its fetcher after a failed fetch.",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "broker.session.timeout.ms",
        int,
        9000,
        "A broker whose heartbeats have not reached the active controller for this long is "
        "fenced: it leaves the ISR of its partitions and those it led get a new leader (a "
        "clean election).",
        at_least(10),
    ),
    ConfigDef(
        "broker.registration.backoff.ms",
        int,
        200,
        "Pause between a broker's attempts to register with the active controller, and "
        "between its heartbeats while it is fenced.",
        at_least(1),
    ),
    ConfigDef(
        "broker.heartbeat.interval.ms",
        int,
        2000,
        "How often a broker heartbeats to the active controller, saying how far it has "
        "applied the metadata log (while fenced, every broker.registration.backoff.ms).",
        at_least(1),
    ),
)
