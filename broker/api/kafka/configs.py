"""The Kafka listener's DescribeConfigs: a topic's configs and this broker's, as Kafka
describes them (value, source, synonyms, type, documentation).

A topic config set when the topic was created is a DYNAMIC_TOPIC_CONFIG; one left unset
follows the broker config it defaults from (``log.retention.bytes`` for
``retention.bytes``), whose source is where the broker got it: a dynamic change, the
config file, environment or ``--set`` (STATIC_BROKER_CONFIG), or the default. With
``include_synonyms`` each entry lists that chain, most specific first, as Kafka does.
Broker configs are described by the broker itself; another broker's id is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result
from purgatory.broker.config.broker_config import validate_topic_configs
from purgatory.broker.config.config_def import ConfigDef
from purgatory.broker.config.definitions import DEFINITIONS, TOPIC_CONFIGS
from purgatory.broker.config.log_configs import TOPIC_ONLY_CONFIGS
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

# ConfigResource types.
TOPIC = 2
BROKER = 4

# Kafka's ConfigSource numbers.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's ConfigType numbers.
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE = 1, 2, 3, 5, 6


class ConfigEntry:
    """One described config: its value and where it came from, with its synonyms."""

    __slots__ = ("definition", "name", "read_only", "synonyms", "value")

    def __init__(
        self,
        name: str,
        definition: ConfigDef,
        synonyms: list[tuple[str, str, int]],
        read_only: bool,
    ) -> None:
        self.name = name
        self.definition = definition
        self.synonyms = synonyms  # (name, value, source), most specific first
        self.value = synonyms[0][1]
        self.read_only = read_only


def kafka_value(value: Any) -> str:
    """A config value as Kafka writes it (``true``, not ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_type(definition: ConfigDef) -> int:
    if definition.type is bool:
        return _BOOLEAN
    if definition.type is float:
        return _DOUBLE
    if definition.type is int:
        return _LONG if definition.name.endswith((".ms", ".bytes")) else _INT
    return _STRING


class ConfigApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs}

    def handle_describe_configs(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.resources))
        results: list[tuple[Any, int, str | None, list[ConfigEntry]]] = []
        for resource in request.resources:
            described = self._describe(resource.resource_type, resource.resource_name)
            if isinstance(described, tuple):
                results.append((resource, *described, []))
            else:
                keys = resource.configuration_keys
                entries = [e for e in described if keys is None or e.name in keys]
                results.append((resource, ErrorCode.NONE, None, entries))
        return describe_configs_response(
            version,
            results,
            synonyms=getattr(request, "include_synonyms", False),  # from v1
            documentation=getattr(request, "include_documentation", False),  # from v3
        )

    def _describe(self, resource_type: int, name: str) -> list[ConfigEntry] | tuple[int, str]:
        if resource_type == TOPIC:
            return self.topic_configs(name)
        if resource_type == BROKER:
            own = str(self.broker.broker_id)
            if name == "":
                return []  # cluster-wide dynamic defaults: this cluster has none
            if name != own:
                return (
                    ErrorCode.INVALID_REQUEST,
                    f"broker {own} describes its own configs; ask broker {name} for its own",
                )
            return self.broker_configs()
        return (
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource_type} is not served; ask for topics ({TOPIC}) "
            f"or brokers ({BROKER})",
        )

    def _broker_synonyms(self, definition: ConfigDef) -> list[tuple[str, str, int]]:
        config = self.broker.config
        source = config.sources.get(definition.name, "default")
        default = (definition.name, kafka_value(definition.default), DEFAULT_CONFIG)
        if source == "default":
            return [default]
        kind = DYNAMIC_BROKER_CONFIG if source == "dynamic" else STATIC_BROKER_CONFIG
        return [(definition.name, kafka_value(config.values[definition.name]), kind), default]

    def broker_configs(self) -> list[ConfigEntry]:
        return [
            ConfigEntry(d.name, d, self._broker_synonyms(d), read_only=not d.dynamic)
            for d in DEFINITIONS
        ]

    def topic_configs(self, topic: str) -> list[ConfigEntry] | tuple[int, str]:
        state = self.broker.metadata.topics.get(topic)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        return self.topic_entries(state.configs)

    def topic_entries(self, configs: dict[str, Any]) -> list[ConfigEntry]:
        """Every topic config of a topic created with ``configs`` (valid ones), described."""
        overrides = validate_topic_configs(configs)
        entries = []
        for name, definition in sorted(TOPIC_CONFIGS.items()):
            synonyms = []
            if name in overrides:
                synonyms.append((name, kafka_value(overrides[name]), DYNAMIC_TOPIC_CONFIG))
            if definition in TOPIC_ONLY_CONFIGS:
                synonyms.append((name, kafka_value(definition.default), DEFAULT_CONFIG))
            else:  # the broker config it defaults from
                synonyms.extend(self._broker_synonyms(definition))
            entries.append(ConfigEntry(name, definition, synonyms, read_only=False))
        return entries


def describe_configs_response(
    version: int,
    results: list[tuple[Any, int, str | None, list[ConfigEntry]]],
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> Any:
    """A DescribeConfigs response: (resource asked, error code, message, entries) each."""
    schema = response_module(ApiKey.DESCRIBE_CONFIGS, version)
    return build(
        schema.DescribeConfigsResponse,
        throttle_time=0,
        results=[
            build(
                schema.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_entry(schema, e, synonyms, documentation) for e in entries],
            )
            for resource, code, message, entries in results
        ],
    )


def entry_fields(entry: ConfigEntry) -> dict[str, Any]:
    """The fields a config has in every answer that describes one (DescribeConfigs,
    CreateTopics from v5)."""
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.synonyms[0][2],
        "is_sensitive": False,
    }


def _entry(schema: Any, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    return build(
        schema.DescribeConfigsResourceResult,
        **entry_fields(entry),
        synonyms=[
            build(schema.DescribeConfigsSynonym, name=n, value=v, source=s)
            for n, v, s in (entry.synonyms if synonyms else ())
        ],
        config_type=_config_type(entry.definition),
        documentation=entry.definition.doc if documentation else None,
    )
