"""Configs of the in-memory logs, their retention and the remote tier (Kafka's
ServerLogConfigs and RemoteLogManagerConfig)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purgatory.broker.config.config_def import (
    ConfigDef,
    ConfigError,
    at_least,
    between,
    minus_one_or_at_least,
)
from purgatory.broker.config.topic_configs import (
    COMPRESSION_TYPES,
    LIST,
    LONG_MAX,
    TIMESTAMP_TYPES,
    TOPIC_CONFIGS,
    check_value,
    parse_value,
)


def like_topic(topic_name: str) -> Callable[[Any], str | None]:
    """The check of the topic config ``topic_name``, for the broker config it defaults
    from (Kafka validates both with one ConfigDef)."""
    config = TOPIC_CONFIGS[topic_name]

    def check(value: Any) -> str | None:
        try:
            parsed = parse_value(topic_name, config.type, value) if config.type == LIST else value
            check_value(config, parsed)
        except ConfigError as exc:
            return str(exc).partition(": ")[2]
        return None

    return check


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
        None,
        "Milliseconds a log keeps a segment after its newest record's timestamp. -1: "
        "unlimited. Unset: `log.retention.minutes`, else `log.retention.hours` (7 days), as "
        "in Kafka. Topic config: `retention.ms`.",
        minus_one_or_at_least(0),
        topic_name="retention.ms",
    ),
    ConfigDef(
        "log.retention.minutes",
        int,
        None,
        "`log.retention.ms` in minutes, when that is unset.",
    ),
    ConfigDef(
        "log.retention.hours",
        int,
        168,
        "`log.retention.ms` in hours, when that and `log.retention.minutes` are unset.",
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
        like_topic("local.retention.bytes"),
        topic_name="local.retention.bytes",
    ),
    ConfigDef(
        "log.local.retention.ms",
        int,
        -2,
        "In a tiered topic, how long copied segments stay local. -2: the value of "
        "`retention.ms`. Topic config: `local.retention.ms`.",
        like_topic("local.retention.ms"),
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

# The broker defaults of topic configs that only matter to Kafka's disk logs, its cleaner
# and its codecs (accepted, stored and described; docs/configs.md says what they do here).
TOPIC_DEFAULT_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "log.cleanup.policy",
        str,
        "delete",
        "Default cleanup policy of topics: `delete`, `compact` or `compact,delete`. "
        "`compact` topics are compacted by the log cleaner (`log.cleaner.*`). Topic config: "
        "`cleanup.policy`.",
        like_topic("cleanup.policy"),
        topic_name="cleanup.policy",
    ),
    ConfigDef(
        "compression.type",
        str,
        "producer",
        "Default codec of topics' stored batches: `producer` keeps the producer's; a codec "
        "(`uncompressed`: none) makes the leader recompress batches in another. Topic "
        "config: `compression.type`.",
        choices=COMPRESSION_TYPES,
        topic_name="compression.type",
    ),
    ConfigDef(
        "compression.gzip.level",
        int,
        -1,
        "Default gzip level (1-9, -1 the codec's default). Topic config: `compression.gzip.level`.",
        like_topic("compression.gzip.level"),
        topic_name="compression.gzip.level",
    ),
    ConfigDef(
        "compression.lz4.level",
        int,
        9,
        "Default lz4 level (1-17). Topic config: `compression.lz4.level`.",
        like_topic("compression.lz4.level"),
        topic_name="compression.lz4.level",
    ),
    ConfigDef(
        "compression.zstd.level",
        int,
        3,
        "Default zstd level (-131072 to 22). Topic config: `compression.zstd.level`.",
        like_topic("compression.zstd.level"),
        topic_name="compression.zstd.level",
    ),
    ConfigDef(
        "log.message.timestamp.type",
        str,
        "CreateTime",
        "Default timestamp type of topics: `CreateTime` or `LogAppendTime` (the leader "
        "stamps each batch on append). Topic config: `message.timestamp.type`.",
        choices=TIMESTAMP_TYPES,
        topic_name="message.timestamp.type",
    ),
    ConfigDef(
        "log.cleaner.enable",
        bool,
        True,
        "Whether the log cleaner compacts topics whose `cleanup.policy` has `compact` "
        "(broker/log/cleaner/).",
    ),
    ConfigDef(
        "log.cleaner.backoff.ms",
        int,
        15000,
        "How long the log cleaner waits before looking again when no log needs cleaning.",
        at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "log.cleaner.dedupe.buffer.size",
        int,
        134217728,
        "Memory of the cleaner's offset map, as Kafka counts it (24 bytes a key, 90% full): "
        "a cleaning maps at most this / 24 * 0.9 keys and ends at the segment that fills it.",
        at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "log.cleaner.delete.retention.ms",
        int,
        86400000,
        "Default time a compacted topic keeps tombstones. Topic config: `delete.retention.ms`.",
        at_least(0),
        topic_name="delete.retention.ms",
    ),
    ConfigDef(
        "log.cleaner.min.compaction.lag.ms",
        int,
        0,
        "Default least time a record stays uncompacted. Topic config: `min.compaction.lag.ms`.",
        at_least(0),
        topic_name="min.compaction.lag.ms",
    ),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms",
        int,
        LONG_MAX,
        "Default longest time a record waits to be compacted. Topic "
        "config: `max.compaction.lag.ms`.",
        at_least(1),
        topic_name="max.compaction.lag.ms",
    ),
    ConfigDef(
        "log.cleaner.min.cleanable.ratio",
        float,
        0.5,
        "Default dirty ratio past which a compacted log is cleaned. Topic "
        "config: `min.cleanable.dirty.ratio`.",
        between(0.0, 1.0),
        topic_name="min.cleanable.dirty.ratio",
    ),
    ConfigDef(
        "log.roll.ms",
        int,
        None,
        "Default time after which a segment that is not full rolls (by record timestamps, "
        "as Kafka). Unset: `log.roll.hours`. Topic config: `segment.ms`.",
        at_least(1),
        topic_name="segment.ms",
    ),
    ConfigDef(
        "log.roll.hours",
        int,
        168,
        "`log.roll.ms` in hours, when that is unset.",
        at_least(1),
    ),
    ConfigDef(
        "log.roll.jitter.ms",
        int,
        None,
        "Default jitter of `log.roll.ms` (no effect here). Unset: `log.roll.jitter.hours`. "
        "Topic config: `segment.jitter.ms`.",
        at_least(0),
        topic_name="segment.jitter.ms",
    ),
    ConfigDef(
        "log.roll.jitter.hours",
        int,
        0,
        "`log.roll.jitter.ms` in hours, when that is unset.",
        at_least(0),
    ),
    ConfigDef(
        "log.index.size.max.bytes",
        int,
        10485760,
        "Default size of a segment's offset index (no effect: no index files). Topic "
        "config: `segment.index.bytes`.",
        at_least(4),
        topic_name="segment.index.bytes",
    ),
    ConfigDef(
        "log.index.interval.bytes",
        int,
        4096,
        "Default bytes between offset index entries (no effect: no index files). Topic "
        "config: `index.interval.bytes`.",
        at_least(0),
        topic_name="index.interval.bytes",
    ),
    ConfigDef(
        "log.flush.interval.messages",
        int,
        LONG_MAX,
        "Default records between fsyncs (no effect: logs live in memory). Topic config: "
        "`flush.messages`.",
        at_least(1),
        topic_name="flush.messages",
    ),
    ConfigDef(
        "log.flush.interval.ms",
        int,
        None,
        "Default milliseconds between fsyncs (no effect: logs live in memory). Unset: "
        "`log.flush.scheduler.interval.ms`. Topic config: `flush.ms`.",
        at_least(0),
        topic_name="flush.ms",
    ),
    ConfigDef(
        "log.flush.scheduler.interval.ms",
        int,
        LONG_MAX,
        "How often Kafka checks whether a log needs flushing (no effect here); "
        "`log.flush.interval.ms` when that is unset.",
    ),
    ConfigDef(
        "log.segment.delete.delay.ms",
        int,
        60000,
        "Default wait before a deleted segment's files go (no effect: no files). Topic "
        "config: `file.delete.delay.ms`.",
        at_least(0),
        topic_name="file.delete.delay.ms",
    ),
    ConfigDef(
        "log.preallocate",
        bool,
        False,
        "Default of preallocating segment files (no effect: no files). Topic config: "
        "`preallocate`.",
        topic_name="preallocate",
    ),
)
