"""Kafka's LogConfig: every topic config of Kafka 4.x with its type, valid values and the
broker config it defaults from, and the parsing that refuses a bad value in Kafka's words
(``Invalid value X for configuration Y: ...``, ``Unknown topic config name: Y``).

Names, types, ranges and defaults are Kafka 4.3's (``LogConfig``'s ConfigDef and
``ServerTopicConfigSynonyms``). One deliberate difference: ``segment.bytes`` may be as
small as 14 bytes (logs live in memory; Kafka's floor is 1 MiB).
``remote.log.storage.enable``, this project's first name for ``remote.storage.enable``, is
still accepted and stored under Kafka's name.

A parsed value is an int, float, bool, str or (a LIST) a tuple of str; ``kafka_value``
writes it back as Kafka describes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from purgatory.broker.config.config_def import ConfigError

# Kafka's ConfigDef.Type, with the ConfigType number DescribeConfigs (v3+) answers.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = "BOOLEAN", "STRING", "INT", "LONG", "DOUBLE", "LIST"
CONFIG_TYPE_IDS = {BOOLEAN: 1, STRING: 2, INT: 3, LONG: 5, DOUBLE: 6, LIST: 7}
_BOUNDS = {INT: (-(2**31), 2**31 - 1), LONG: (-(2**63), 2**63 - 1)}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[dDfF]?")
LONG_MAX = 2**63 - 1

# The aliases a topic config is also accepted by (stored under the name they stand for).
ALIASES = {"remote.log.storage.enable": "remote.storage.enable"}


@dataclass(frozen=True)
class Range:
    """Kafka's ``Range.atLeast`` / ``between`` (and the compression levels' range that also
    takes -1)."""

    low: float | None = None
    high: float | None = None
    or_minus_one: bool = False

    def problem(self, value: Any) -> str | None:
        if self.or_minus_one:
            if value == -1 or (
                self.low is not None and self.high is not None and self.low <= value <= self.high
            ):
                return None
            return f"Value must be between {_num(self.low)} and {_num(self.high)} or equal to -1"
        if self.low is not None and value < self.low:
            return f"Value must be at least {_num(self.low)}"
        if self.high is not None and value > self.high:
            return f"Value must be no more than {_num(self.high)}"
        return None


@dataclass(frozen=True)
class OneOf:
    """Kafka's ``ValidString.in`` (for a LIST, ``ValidList.in``: each element)."""

    values: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if value in self.values:
            return None
        return f"String must be one of: {', '.join(self.values)}"


class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker,...``."""

    _ENTRY = re.compile(r"[0-9]+:[0-9]+")

    def __init__(self, name: str) -> None:
        self.name = name

    def problem(self, value: Any) -> str | None:
        if value == ("*",) or all(self._ENTRY.fullmatch(e) for e in value):
            return None
        return (
            f"{self.name} must be the literal '*' or a list of replicas in the following "
            "format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )


Validator = Range | OneOf | ThrottledReplicas

CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
GZIP_LEVEL = Range(1, 9, or_minus_one=True)
LZ4_LEVEL = Range(1, 17)
ZSTD_LEVEL = Range(-131072, 22)


@dataclass(frozen=True)
class TopicConfig:
    """One topic config: Kafka's type, its check, what it means here, and where its default
    comes from: ``broker`` (this broker's config of that name, Kafka's synonym) or, for a
    topic-only config, ``default``. ``effect`` is empty when the config takes effect, else
    why it does not (docs/configs.md says so)."""

    name: str
    type: str
    doc: str
    validator: Validator | None = None
    broker: str | None = None
    default: Any = None
    effect: str = ""

    @property
    def synonyms(self) -> tuple[tuple[str, int], ...]:
        """The broker configs it defaults from, Kafka's order (ServerTopicConfigSynonyms),
        each with the factor to milliseconds: the first one with a value gives it."""
        if self.broker is None:
            return ()
        return UNIT_SYNONYMS.get(self.broker, ((self.broker, 1),))


_NO_DISK = "no effect: logs live in memory"
_NO_THROTTLE = "stored and described; replication is not throttled"

TOPIC_CONFIG_DEFS: tuple[TopicConfig, ...] = (
    TopicConfig(
        "cleanup.policy",
        LIST,
        "`delete` (retention drops old segments), `compact` (keep the latest record of "
        "each key) or both, comma-separated; empty: neither.",
        OneOf(CLEANUP_POLICIES),
        broker="log.cleanup.policy",
        effect="`compact` topics are compacted by the log cleaner (closed segments only: the "
        "active one never is, so `segment.bytes` and `segment.ms` bound what stays dirty); "
        "every record produced to them needs a key (INVALID_RECORD, as in Kafka). "
        "Without `delete`, as in Kafka, retention never deletes its segments (the memory "
        "budget, `log.memory.max.bytes`, still may)",
    ),
    TopicConfig(
        "compression.type",
        STRING,
        "The codec batches are stored with: `producer` keeps the producer's; with a codec "
        "(`gzip`, `snappy`, `lz4`, `zstd`, or `uncompressed`: none) the leader recompresses "
        "every batch in another codec on append, as Kafka does.",
        OneOf(COMPRESSION_TYPES),
        broker="compression.type",
    ),
    TopicConfig(
        "compression.gzip.level",
        INT,
        "Level of gzip when `compression.type` is `gzip` (1-9, -1 the codec's default).",
        GZIP_LEVEL,
        broker="compression.gzip.level",
    ),
    TopicConfig(
        "compression.lz4.level",
        INT,
        "Level of lz4 when `compression.type` is `lz4` (1-17).",
        LZ4_LEVEL,
        broker="compression.lz4.level",
    ),
    TopicConfig(
        "compression.zstd.level",
        INT,
        "Level of zstd when `compression.type` is `zstd` (-131072 to 22).",
        ZSTD_LEVEL,
        broker="compression.zstd.level",
    ),
    TopicConfig(
        "delete.retention.ms",
        LONG,
        "How long a compacted topic keeps a tombstone (a null value) after cleaning.",
        Range(0),
        broker="log.cleaner.delete.retention.ms",
        effect="as in Kafka (KIP-534): the first cleaning that keeps a tombstone starts its "
        "horizon, a cleaning after it removes it; a log whose horizon passed is cleaned then "
        "even if nothing else was written",
    ),
    TopicConfig(
        "file.delete.delay.ms",
        LONG,
        "How long Kafka waits before deleting a segment's files.",
        Range(0),
        broker="log.segment.delete.delay.ms",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "flush.messages",
        LONG,
        "Records between two fsyncs of the log.",
        Range(1),
        broker="log.flush.interval.messages",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "flush.ms",
        LONG,
        "Milliseconds between two fsyncs of the log.",
        Range(0),
        broker="log.flush.interval.ms",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "follower.replication.throttled.replicas",
        LIST,
        "Replicas (`partition:broker,...`, or `*`) whose follower fetches are throttled.",
        ThrottledReplicas("follower.replication.throttled.replicas"),
        default=(),
        effect=_NO_THROTTLE,
    ),
    TopicConfig(
        "index.interval.bytes",
        INT,
        "Bytes between two entries of a segment's offset index.",
        Range(0),
        broker="log.index.interval.bytes",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "leader.replication.throttled.replicas",
        LIST,
        "Replicas (`partition:broker,...`, or `*`) whose leader side is throttled.",
        ThrottledReplicas("leader.replication.throttled.replicas"),
        default=(),
        effect=_NO_THROTTLE,
    ),
    TopicConfig(
        "local.retention.bytes",
        LONG,
        "In a tiered topic, local bytes kept of segments already copied to the remote "
        "tier. -2: the value of `retention.bytes`.",
        Range(-2),
        broker="log.local.retention.bytes",
    ),
    TopicConfig(
        "local.retention.ms",
        LONG,
        "In a tiered topic, how long copied segments stay local. -2: the value of `retention.ms`.",
        Range(-2),
        broker="log.local.retention.ms",
    ),
    TopicConfig(
        "max.compaction.lag.ms",
        LONG,
        "The longest a record may wait before a compacted log is cleaned past it.",
        Range(1),
        broker="log.cleaner.max.compaction.lag.ms",
        effect="as in Kafka (by the first dirty batch's timestamp)",
    ),
    TopicConfig(
        "max.message.bytes",
        INT,
        "Largest record batch accepted (MESSAGE_TOO_LARGE beyond).",
        Range(0),
        broker="message.max.bytes",
    ),
    TopicConfig(
        "message.timestamp.after.max.ms",
        LONG,
        "How far after the broker's clock a record's create time may be (INVALID_TIMESTAMP "
        "beyond); not checked with LogAppendTime.",
        Range(0),
        broker="log.message.timestamp.after.max.ms",
    ),
    TopicConfig(
        "message.timestamp.before.max.ms",
        LONG,
        "How far before the broker's clock a record's create time may be "
        "(INVALID_TIMESTAMP beyond); not checked with LogAppendTime.",
        Range(0),
        broker="log.message.timestamp.before.max.ms",
    ),
    TopicConfig(
        "message.timestamp.type",
        STRING,
        "`CreateTime`: records keep the producer's timestamps. `LogAppendTime`: the leader "
        "stamps each batch with its clock on append (the batch's timestamp type and max "
        "timestamp, which consumers read as every record's timestamp), and the produce "
        "response carries that time.",
        OneOf(TIMESTAMP_TYPES),
        broker="log.message.timestamp.type",
    ),
    TopicConfig(
        "min.cleanable.dirty.ratio",
        DOUBLE,
        "Share of a compacted log not yet cleaned past which the cleaner cleans it.",
        Range(0, 1),
        broker="log.cleaner.min.cleanable.ratio",
        effect="as in Kafka (strictly more than the ratio; the dirtiest log first)",
    ),
    TopicConfig(
        "min.compaction.lag.ms",
        LONG,
        "The least time a record stays uncompacted in a compacted log.",
        Range(0),
        broker="log.cleaner.min.compaction.lag.ms",
        effect="as in Kafka (by the segment's largest timestamp)",
    ),
    TopicConfig(
        "min.insync.replicas",
        INT,
        "In-sync replicas an acks=-1 produce needs: fewer and it is refused "
        "(NOT_ENOUGH_REPLICAS) before appending, or answered with "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank while it waited.",
        Range(1),
        broker="min.insync.replicas",
    ),
    TopicConfig(
        "preallocate",
        BOOLEAN,
        "Whether a new segment's file is allocated whole on disk.",
        broker="log.preallocate",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "remote.log.copy.disable",
        BOOLEAN,
        "A tiered topic's remote data becomes read-only: nothing more is copied.",
        default=False,
        effect="stored and described; a tiered topic keeps copying",
    ),
    TopicConfig(
        "remote.log.delete.on.disable",
        BOOLEAN,
        "Delete a topic's remote data when tiered storage is turned off for it.",
        default=False,
        effect="stored and described (tiered storage cannot be turned off: topic configs "
        "are set at creation)",
    ),
    TopicConfig(
        "remote.storage.enable",
        BOOLEAN,
        "Tiered storage: copy closed segments to the remote tier and keep only "
        "`local.retention.*` of them locally; fetches below the local log start read from "
        "the remote tier (and wait in the RemoteFetch purgatory). Also accepted as "
        "`remote.log.storage.enable`.",
        default=False,
    ),
    TopicConfig(
        "retention.bytes",
        LONG,
        "Bytes a partition log keeps (both tiers): its oldest whole segments are deleted "
        "while it keeps at least this much without them. -1: unlimited.",
        broker="log.retention.bytes",
    ),
    TopicConfig(
        "retention.ms",
        LONG,
        "Milliseconds a log keeps a segment after its newest record's timestamp. -1: unlimited.",
        Range(-1),
        broker="log.retention.ms",
    ),
    TopicConfig(
        "segment.bytes",
        INT,
        "A log rolls to a new segment when the next batch would take the active one past "
        "this. Retention deletes, and tiered storage copies, whole closed segments. At "
        "least 14 (Kafka: 1 MiB).",
        Range(14),
        broker="log.segment.bytes",
    ),
    TopicConfig(
        "segment.index.bytes",
        INT,
        "Size of a segment's offset index file.",
        Range(4),
        broker="log.index.size.max.bytes",
        effect=_NO_DISK,
    ),
    TopicConfig(
        "segment.jitter.ms",
        LONG,
        "Random jitter subtracted from `segment.ms`.",
        Range(0),
        broker="log.roll.jitter.ms",
        effect="stored and described; no jitter is subtracted",
    ),
    TopicConfig(
        "segment.ms",
        LONG,
        "Time after which a segment that is not full rolls: when a batch's timestamp is "
        "more than this past the active segment's first batch's (Kafka's rule).",
        Range(1),
        broker="log.roll.ms",
    ),
    TopicConfig(
        "unclean.leader.election.enable",
        BOOLEAN,
        "With no live in-sync replica, elect any live replica (and lose what only the lost "
        "in-sync replicas held).",
        broker="unclean.leader.election.enable",
    ),
)

TOPIC_CONFIGS: dict[str, TopicConfig] = {c.name: c for c in TOPIC_CONFIG_DEFS}

# Broker defaults Kafka also takes in other units (KafkaConfig's logRetentionTimeMillis,
# logRollTimeMillis, ...): the first one set wins.
_HOUR, _MINUTE = 3_600_000, 60_000
UNIT_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTE),
        ("log.retention.hours", _HOUR),
    ),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR)),
    "log.flush.interval.ms": (
        ("log.flush.interval.ms", 1),
        ("log.flush.scheduler.interval.ms", 1),
    ),
}


def broker_default(topic: TopicConfig, values: Mapping[str, Any]) -> Any:
    """The value a topic config takes from the broker's config ``values`` (its own default
    for a topic-only config): its first synonym that has one, in milliseconds; a negative
    retention is -1 (unlimited), as Kafka's logRetentionTimeMillis."""
    for name, factor in topic.synonyms:
        value = values.get(name)
        if value is not None:
            if factor == 1:
                return parse_value(topic.name, topic.type, value) if topic.type == LIST else value
            return -1 if value < 0 else value * factor
    return topic.default


def _num(value: float | None) -> str:
    return str(int(value)) if value is not None and value == int(value) else str(value)


def _invalid(name: str, raw: Any, message: str) -> ConfigError:
    return ConfigError(f"Invalid value {raw} for configuration {name}: {message}")


def parse_value(name: str, kind: str, raw: Any) -> Any:
    """A value of Kafka's type ``kind`` from its text, as Kafka's ConfigDef.parseType reads
    it (trimmed; booleans in any case; a LIST split on commas, each element trimmed,
    repeats dropped); raises ConfigError in Kafka's words."""
    if isinstance(raw, bool):
        raw = "true" if raw else "false"
    elif isinstance(raw, (list, tuple)):
        raw = ",".join(str(e) for e in raw)
    text = str(raw).strip()
    if kind in (INT, LONG):
        low, high = _BOUNDS[kind]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise _invalid(name, raw, f"Not a number of type {kind}")
        return int(text)
    if kind == DOUBLE:
        if not _DECIMAL.fullmatch(text):
            raise _invalid(name, raw, "Not a number of type DOUBLE")
        return float(text.rstrip("dDfF").replace("Infinity", "inf"))
    if kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return text.lower() == "true"
    if kind == LIST:
        if not text:
            return ()
        return tuple(dict.fromkeys(e.strip() for e in text.split(",")))
    return text


def check_value(config: TopicConfig, value: Any) -> None:
    """Kafka's validator of ``config`` over a parsed value; raises ConfigError."""
    validator = config.validator
    if validator is None:
        return
    if config.type == LIST and isinstance(validator, OneOf):
        for element in value:
            problem = validator.problem(element)
            if problem:
                raise _invalid(config.name, element, problem)
        return
    problem = validator.problem(value)
    if problem:
        shown = f"[{', '.join(value)}]" if config.type == LIST else kafka_value(value)
        raise _invalid(config.name, shown, problem)


def kafka_value(value: Any) -> str:
    """A config value as Kafka writes it: ``true``, ``compact,delete``, ``0.5``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def parse_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Topic configs by Kafka's name (an alias stored under the name it stands for), each
    parsed and checked alone; raises ConfigError in Kafka's words."""
    out: dict[str, Any] = {}
    for given, raw in configs.items():
        name = ALIASES.get(given, given)
        config = TOPIC_CONFIGS.get(name)
        if config is None:
            raise ConfigError(f"Unknown topic config name: {given}")
        value = parse_value(name, config.type, raw)
        check_value(config, value)
        out[name] = value
    return out


def check_topic_consistency(topic: Mapping[str, Any]) -> None:
    """Kafka's checks of a topic's configs together (``topic``: every topic config, the
    broker's defaults under the topic's own): the compaction lags in order, and a tiered
    topic's policy and local retention within the whole log's."""
    low, high = topic["min.compaction.lag.ms"], topic["max.compaction.lag.ms"]
    if low > high:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
    if not topic["remote.storage.enable"]:
        return
    if "compact" in topic["cleanup.policy"]:
        raise ConfigError(
            "Remote log storage only supports topics with cleanup.policy=delete or "
            "cleanup.policy being an empty list."
        )
    for kind in ("ms", "bytes"):
        local, total = topic[f"local.retention.{kind}"], topic[f"retention.{kind}"]
        name = f"local.retention.{kind}"
        if total < 0 or local == -2:  # unlimited, or the same as the whole log's
            continue
        if local == -1:
            raise _invalid(
                name, local, f"Value must not be -1 as retention.{kind} value is set as {total}."
            )
        if local > total:
            raise _invalid(
                name, local, f"Value must not be more than retention.{kind} property value: {total}"
            )
