"""A group's own configs (Kafka's GroupConfig, KIP-848 and KIP-932): the settings one consumer
or share group overrides over the broker's group.consumer.* and group.share.* configs, set
through IncrementalAlterConfigs on a GROUP resource (type 32) and held in the metadata log.

``validate_group_configs`` checks a group's configs as Kafka's GroupConfig.validate does,
with Kafka's messages: every name known ("Unknown group config name: ..."), every value
parsed, then each within the broker's bounds (``consumer.session.timeout.ms`` between
``group.consumer.min.session.timeout.ms`` and ``group.consumer.max.session.timeout.ms``),
then each session timeout above its heartbeat interval. ``group_config_values`` is what a
group runs with: its own values over the broker's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.definitions import BY_NAME


class GroupConfigDef(NamedTuple):
    """One group config: Kafka's type (INT or STRING), the broker config it defaults from
    (None: ``default``), its parse check and the broker configs bounding it."""

    name: str
    type: str  # "INT" or "STRING", Kafka's ConfigDef.Type
    broker: str | None  # the broker config whose value is its default
    default: str | None  # its default when no broker config stands behind it
    at_least: int | None  # GroupConfig's own atLeast (a parse error below it)
    bounds: tuple[str, str] | None  # (min, max) broker configs
    doc: str


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "consumer.session.timeout.ms",
            "INT",
            "group.consumer.session.timeout.ms",
            None,
            1,
            ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            "INT",
            "group.consumer.heartbeat.interval.ms",
            None,
            1,
            (
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
            "The heartbeat interval given to the members of a consumer group.",
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            "INT",
            "group.share.session.timeout.ms",
            None,
            1,
            ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
            "The timeout to detect client failures when using the share group protocol.",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            "INT",
            "group.share.heartbeat.interval.ms",
            None,
            1,
            ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
            "The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            "INT",
            "group.share.record.lock.duration.ms",
            None,
            1000,
            (
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
            "The record acquisition lock duration in milliseconds for share groups.",
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            "STRING",
            None,
            "latest",
            None,
            None,
            "The strategy to initialize the share-partition start offset: `latest` (the "
            "high watermark), `earliest` (the log start) or `by_duration:<ISO-8601 duration>` "
            "(the first record no older than that).",
        ),
        GroupConfigDef(
            "share.isolation.level",
            "STRING",
            None,
            "read_uncommitted",
            None,
            None,
            "Controls how to read records written transactionally: `read_committed` or "
            "`read_uncommitted`.",
        ),
    )
}

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# java.time.Duration.parse's format: PnDTnHnMn.nS, each part optional, at least one given.
_DURATION = re.compile(
    r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?", re.IGNORECASE
)
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
# Kafka's defaults of the broker configs behind group configs, for a broker config this
# broker does not define (yet).
_KAFKA_DEFAULTS = {
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
}


def broker_value(broker: Mapping[str, Any], name: str) -> Any:
    """Broker config ``name``'s value in ``broker``, else its default."""
    if name in broker:
        return broker[name]
    definition = BY_NAME.get(name)
    return definition.default if definition is not None else _KAFKA_DEFAULTS[name]


def by_duration_ms(value: str) -> int | None:
    """The milliseconds of ``share.auto.offset.reset``'s ``by_duration:<duration>``; None
    for ``latest``, ``earliest`` or a value that is not a duration."""
    if not value.startswith("by_duration:"):
        return None
    text = value[len("by_duration:") :]
    match = _DURATION.fullmatch(text)
    if match is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds, fraction = (g or "0" for g in match.groups())
    total = ((int(days) * 24 + int(hours)) * 60 + int(minutes)) * 60 + int(seconds)
    return total * 1000 + int(fraction.ljust(9, "0")[:3])


def _parse(definition: GroupConfigDef, value: str) -> Any:
    """A value parsed as Kafka's ConfigDef.parse does, with its messages."""
    name = definition.name
    if definition.type == "INT":
        text = value.strip()
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not _INT_MIN <= number <= _INT_MAX:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: Not a number of type INT"
            )
        if definition.at_least is not None and number < definition.at_least:
            raise ConfigError(
                f"Invalid value {number} for configuration {name}: Value must be at least "
                f"{definition.at_least}"
            )
        return number
    text = value.strip()
    if name == "share.isolation.level" and text not in ISOLATION_LEVELS:
        raise ConfigError(
            f"Invalid value {text} for configuration {name}: String must be one of: "
            f"{', '.join(ISOLATION_LEVELS)}"
        )
    if name == "share.auto.offset.reset" and (
        text not in ("latest", "earliest") and by_duration_ms(text) is None
    ):
        raise ConfigError(
            f"Invalid value {text} for configuration {name}: Invalid value `{text}` for "
            f"configuration {name}. The value must be either 'earliest', 'latest' or of the "
            "format 'by_duration:<PnDTnHnMn.nS>'."
        )
    return text


def default_value(definition: GroupConfigDef, broker: Mapping[str, Any]) -> str:
    """A group config's value when the group does not set it: the broker config's in
    ``broker``, else that config's default."""
    if definition.broker is not None:
        return str(broker_value(broker, definition.broker))
    assert definition.default is not None
    return definition.default


def validate_group_configs(configs: Mapping[str, str], broker: Mapping[str, Any]) -> None:
    """Raises ConfigError, with Kafka's message, unless ``configs`` (a group's own, after a
    change) are valid against the broker's configs ``broker`` (name -> value)."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    values: dict[str, Any] = {}
    for name, definition in GROUP_CONFIGS.items():
        given = configs.get(name)
        text = default_value(definition, broker) if given is None else given
        values[name] = _parse(definition, text)
    for name in (
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.record.lock.duration.ms",
    ):
        low, high = GROUP_CONFIGS[name].bounds or ("", "")
        if values[name] < int(broker_value(broker, low)):
            raise ConfigError(f"{name} must be greater than or equal to {low}")
        if values[name] > int(broker_value(broker, high)):
            raise ConfigError(f"{name} must be less than or equal to {high}")
    for kind in ("consumer", "share"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if values[session] <= values[heartbeat]:
            raise ConfigError(f"{session} must be greater than {heartbeat}")


def group_config_values(overrides: Mapping[str, str], broker: Mapping[str, Any]) -> dict[str, str]:
    """Every group config's value for a group whose own configs are ``overrides``."""
    return {
        name: overrides.get(name, default_value(definition, broker))
        for name, definition in GROUP_CONFIGS.items()
    }
