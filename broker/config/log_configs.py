"""Configs of the in-memory logs, their retention and the remote tier (Kafka's
ServerLogConfigs and RemoteLogManagerConfig)."""

from __future__ import annotations

from purgatory.broker.config.config_def import ConfigDef, at_least, between, minus_one_or_at_least

LOG_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "log.retention.bytes",
        int,
        268435456,
        "Bytes a partition log keeps (both tiers): its oldest whole segments are deleted "
        "while it keeps at least this much without them. Kafka's "
        "default is -1 (unlimited, on disk); logs here live in memory, so the default is "
        "256 MiB per partition. -1: unlimited. Topic config: `retention.bytes`.",
        minus_one_or_at_least(0),
        aliases=("retention.bytes",),
        topic_name="retention.bytes",
    ),
    ConfigDef(
        "log.memory.max.bytes",
        int,
        1073741824,
        "Bytes all partition logs of this broker may hold in memory together (Kafka has no "
        "such limit: its logs are on disk). Past it, the oldest committed closed segments "
        "of the largest logs are deleted, as retention would, with a warning "
        "(purgatory_log_memory_evicted_segments_total). -1: unlimited.",
        minus_one_or_at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "max.broker.partitions",
        int,
        -1,
        "Partition replicas one broker may hold (KIP-578's name; Kafka has no cap). The active "
        "controller refuses a CreateTopics or CreatePartitions entry that would take a "
        "broker past it with POLICY_VIOLATION. -1: one per 8 KiB of log.memory.max.bytes "
        "(131,072 at its default; at least 1,000; none when the budget is -1), since every "
        "replica costs memory here (about 3 KiB idle) before it holds a record.",
        minus_one_or_at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "log.retention.ms",
        int,
        604800000,
        "Milliseconds a log keeps a segment after its newest record's timestamp (7 days). "
        "-1: unlimited. Topic config: `retention.ms`.",
        minus_one_or_at_least(0),
        topic_name="retention.ms",
    ),
    ConfigDef(
        "log.segment.bytes",
        int,
        16777216,
        "A log rolls to a new segment when the next batch would take the active one past "
        "this. Retention deletes, and tiered storage copies, whole closed segments. Kafka's "
        "default is 1 GiB; logs here live in memory, so it is 16 MiB. Topic config: "
        "`segment.bytes`.",
        at_least(14),
        topic_name="segment.bytes",
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms",
        int,
        9223372036854775807,
        "How far before the broker's clock a record's create time may be (INVALID_TIMESTAMP "
        "beyond). Kafka's default: unlimited. Topic config: "
        "`message.timestamp.before.max.ms`.",
        at_least(0),
        topic_name="message.timestamp.before.max.ms",
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms",
        int,
        3600000,
        "How far after the broker's clock a record's create time may be (INVALID_TIMESTAMP "
        "beyond): one hour, Kafka 4's default. Topic config: "
        "`message.timestamp.after.max.ms`.",
        at_least(0),
        topic_name="message.timestamp.after.max.ms",
    ),
    ConfigDef(
        "log.retention.check.interval.ms",
        int,
        300000,
        "How often time-based retention (`retention.ms`) is applied to every log. "
        "Size-based retention of a log without tiered storage applies at every append.",
        at_least(1),
    ),
    ConfigDef(
        "log.local.retention.bytes",
        int,
        -2,
        "In a tiered topic, local bytes kept of segments already copied to the remote tier. "
        "-2: the value of `retention.bytes`. Topic config: `local.retention.bytes`.",
        lambda v: None if v >= -2 else "must be -2 (use retention.bytes), -1 or >= 0",
        topic_name="local.retention.bytes",
    ),
    ConfigDef(
        "log.local.retention.ms",
        int,
        -2,
        "In a tiered topic, how long copied segments stay local. -2: the value of "
        "`retention.ms`. Topic config: `local.retention.ms`.",
        lambda v: None if v >= -2 else "must be -2 (use retention.ms), -1 or >= 0",
        topic_name="local.retention.ms",
    ),
    ConfigDef(
        "remote.log.manager.task.interval.ms",
        int,
        30000,
        "How often closed segments of tiered topics are copied to the remote tier, and "
        "remote and local retention applied to them.",
        at_least(1),
    ),
    ConfigDef(
        "remote.fetch.max.wait.ms",
        int,
        500,
        "How long a fetch waits in the RemoteFetch purgatory for a remote read (KIP-1018). "
        "On expiry the read is cancelled and the partition answered empty; the client "
        "retries.",
        at_least(1),
        aliases=("fetch.remote.max.wait.ms",),
        dynamic=True,
    ),
    ConfigDef(
        "remote.log.reader.threads",
        int,
        10,
        "Remote reads that run at once (Kafka's remote reader thread pool).",
        at_least(1),
    ),
    ConfigDef(
        "remote.log.reader.max.pending.tasks",
        int,
        100,
        "Remote reads queued behind the running ones; a fetch finding the queue full gets "
        "an error for that partition at once.",
        at_least(1),
    ),
    ConfigDef(
        "remote.storage.latency.distribution",
        str,
        "fixed",
        "Latency model of the simulated remote store: `fixed` (every read takes "
        "`remote.storage.latency.ms`) or `lognormal` (median `remote.storage.latency.ms`, "
        "99th percentile `remote.storage.latency.p99.ms`).",
        choices=("fixed", "lognormal"),
        dynamic=True,
    ),
    ConfigDef(
        "remote.storage.latency.ms",
        float,
        20.0,
        "Latency of a read from the simulated remote store (the median when log-normal).",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "remote.storage.latency.p99.ms",
        float,
        100.0,
        "99th percentile of the log-normal remote read latency.",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "remote.storage.error.rate",
        float,
        0.0,
        "Probability that a read from the simulated remote store fails (the partition is "
        "answered UNKNOWN_SERVER_ERROR, as Kafka answers a RemoteStorageException).",
        between(0.0, 1.0),
        dynamic=True,
    ),
)

# Topic configs with no broker-wide default.
TOPIC_ONLY_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "remote.log.storage.enable",
        bool,
        False,
        "Tiered storage: copy closed segments to the remote tier and keep only "
        "`local.retention.*` of them locally; fetches below the local log start read from "
        "the remote tier (and wait in the RemoteFetch purgatory).",
        topic_name="remote.log.storage.enable",
    ),
)
