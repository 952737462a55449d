"""GroupConfig's validation (Kafka's GroupConfig.validate) and a group's values over the
broker's, as pure functions of a group's configs and the broker's."""

from __future__ import annotations

import pytest

from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.group_config import (
    by_duration_ms,
    group_config_values,
    validate_group_configs,
)

BROKER = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 10000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
}


def test_a_groups_own_values_stand_over_the_brokers() -> None:
    values = group_config_values({"consumer.session.timeout.ms": "20000"}, BROKER)
    assert values["consumer.session.timeout.ms"] == "20000"
    assert values["consumer.heartbeat.interval.ms"] == "5000"
    assert values["share.session.timeout.ms"] == "45000"  # group.share.*'s default
    assert values["share.auto.offset.reset"] == "latest"
    assert values["share.isolation.level"] == "read_uncommitted"


def test_bounds_come_from_the_brokers_configs() -> None:
    validate_group_configs({"consumer.session.timeout.ms": "10000"}, BROKER)
    with pytest.raises(ConfigError, match=r"must be greater than or equal to group\.consumer\.min"):
        validate_group_configs({"consumer.session.timeout.ms": "9999"}, BROKER)
    with pytest.raises(ConfigError, match=r"must be less than or equal to group\.consumer\.max"):
        validate_group_configs({"consumer.session.timeout.ms": "60001"}, BROKER)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"nope": "1"}, "Unknown group config name: nope"),
        (
            {"consumer.session.timeout.ms": "abc"},
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number "
            "of type INT",
        ),
        (
            {"share.record.lock.duration.ms": "999"},
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must "
            "be at least 1000",
        ),
        (
            {"share.record.lock.duration.ms": "14999"},
            "share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        (
            {"consumer.session.timeout.ms": "12000", "consumer.heartbeat.interval.ms": "12000"},
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        ),
        ({"share.isolation.level": "x"}, "String must be one of: read_committed, read_uncommitted"),
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "by_duration:<PnDTnHnMn.nS>"),
    ],
)
def test_invalid_configs_are_refused_with_kafkas_message(
    configs: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        validate_group_configs(configs, BROKER)
    assert message in str(refused.value)


def test_share_auto_offset_reset_by_duration_reads_iso_8601_durations() -> None:
    assert by_duration_ms("by_duration:PT1H") == 3_600_000
    assert by_duration_ms("by_duration:P1DT2H3M4.5S") == 93_784_500
    assert by_duration_ms("by_duration:PT") is None
    assert by_duration_ms("latest") is None
    validate_group_configs({"share.auto.offset.reset": "by_duration:P1D"}, BROKER)
    validate_group_configs({"share.auto.offset.reset": "earliest"}, BROKER)
