"""Kafka's topic configs (broker/config/topic_configs.py): every name of Kafka 4.x is
accepted with Kafka's types and ranges, and a bad value is refused in Kafka's words (the
messages below are what Kafka 4.3.1's LogConfig.validate answers for the same input)."""

from __future__ import annotations

import pytest

from purgatory.broker.config.broker_config import load_config, validate_topic_configs
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.topic_configs import TOPIC_CONFIGS, kafka_value
from tests.support import STREAMS_CHANGELOG

KAFKA_4_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}  # fmt: skip


def test_the_catalog_is_kafka_4s_topic_configs() -> None:
    assert set(TOPIC_CONFIGS) == KAFKA_4_TOPIC_CONFIGS


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "1.5", "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "99999999999999999999", "Invalid value 99999999999999999999 for configuration retention.ms: Not a number of type LONG"),
        ("cleanup.policy", "foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"),
        ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("message.timestamp.type", "logappendtime", "Invalid value logappendtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "x", "Invalid value x for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
        ("unclean.leader.election.enable", "yes", "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false"),
        ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
        ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
        ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
        ("max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"),
        ("leader.replication.throttled.replicas", "x", "Invalid value [x] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("max.compaction.lag.ms", "0", "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"),
        ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ("foo.bar", "1", "Unknown topic config name: foo.bar"),
        # Removed in Kafka 4: refused as Kafka 4 refuses them.
        ("message.timestamp.difference.max.ms", "1", "Unknown topic config name: message.timestamp.difference.max.ms"),
        ("message.downconversion.enable", "true", "Unknown topic config name: message.downconversion.enable"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_in_kafkas_words(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs({name: value})
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("name", "value", "described"),
    [
        ("retention.ms", " 100 ", "100"),
        ("retention.bytes", "-5", "-5"),  # Kafka has no range on it
        ("cleanup.policy", "compact, delete", "compact,delete"),
        ("cleanup.policy", "delete,compact,delete", "delete,compact"),
        ("cleanup.policy", "", ""),
        ("unclean.leader.election.enable", "TRUE", "true"),
        ("leader.replication.throttled.replicas", "*", "*"),
        ("leader.replication.throttled.replicas", "0:1,1:2", "0:1,1:2"),
        ("min.cleanable.dirty.ratio", "0.1", "0.1"),
        ("compression.type", "zstd", "zstd"),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ],
)
def test_a_good_value_is_stored_as_kafka_describes_it(
    name: str, value: str, described: str
) -> None:
    assert kafka_value(validate_topic_configs({name: value})[name]) == described


def test_the_compaction_lags_must_be_in_order() -> None:
    defaults = load_config(environ={}).topic_defaults()
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs(
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, defaults
        )
    assert str(caught.value) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"}, defaults)


def test_a_tiered_topic_may_not_be_compacted() -> None:
    defaults = load_config(environ={}).topic_defaults()
    with pytest.raises(ConfigError, match=r"^Remote log storage only supports topics with cleanup"):
        validate_topic_configs(
            {"remote.storage.enable": "true", "cleanup.policy": "compact"}, defaults
        )


def test_kafka_streams_changelog_and_repartition_configs_are_accepted() -> None:
    defaults = load_config(environ={}).topic_defaults()
    changelog = dict(STREAMS_CHANGELOG)
    repartition = {
        "cleanup.policy": "delete",
        "segment.bytes": "52428800",
        "retention.ms": "-1",
        "message.timestamp.type": "CreateTime",
    }
    assert validate_topic_configs(changelog, defaults)["cleanup.policy"] == ("compact",)
    assert validate_topic_configs(repartition, defaults)["retention.ms"] == -1


def test_a_broker_default_is_checked_as_its_topic_config_is() -> None:
    config = load_config(environ={}, overrides={"log.cleanup.policy": "compact,delete"})
    assert config.topic_defaults()["cleanup.policy"] == ("compact", "delete")
    with pytest.raises(ConfigError, match="String must be one of: compact, delete"):
        load_config(environ={}, overrides={"log.cleanup.policy": "shred"})


def test_the_topic_configs_a_broker_sets_are_the_ones_kafka_topics_lists() -> None:
    assert load_config(environ={}).topic_defaults_set() == {}
    config = load_config(
        environ={}, overrides={"log.cleanup.policy": "compact", "min.insync.replicas": "2"}
    )
    assert config.topic_defaults_set() == {"cleanup.policy": "compact", "min.insync.replicas": "2"}


@pytest.mark.parametrize(
    ("overrides", "retention_ms"),
    [
        ({}, 604800000),  # log.retention.hours=168, Kafka's default
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.hours": "-5"}, -1),  # negative: unlimited, as Kafka reads it
    ],
)
def test_retention_ms_defaults_from_the_first_of_kafkas_unit_synonyms_set(
    overrides: dict[str, str], retention_ms: int
) -> None:
    config = load_config(environ={}, overrides=overrides)
    assert config.topic_defaults()["retention.ms"] == retention_ms


def test_segment_ms_defaults_from_log_roll_hours() -> None:
    assert load_config(environ={}).topic_defaults()["segment.ms"] == 604800000
    config = load_config(environ={}, overrides={"log.roll.hours": "2"})
    assert config.topic_defaults()["segment.ms"] == 7_200_000
    assert config.topic_defaults_set() == {"segment.ms": "7200000"}
