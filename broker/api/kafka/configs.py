"""The Kafka listener's config APIs: DescribeConfigs (32), a topic's configs and this
broker's as Kafka describes them (value, source, synonyms, type, documentation); and
AlterConfigs (33) and IncrementalAlterConfigs (44), which the active controller serves
(forwarded there, ``ConfigurationControlManager``).

A topic config set when the topic was created is a DYNAMIC_TOPIC_CONFIG; one left unset
follows the broker config it defaults from (``log.retention.bytes`` for
``retention.bytes``), whose source is where the broker got it: a dynamic change, the
config file, environment or ``--set`` (STATIC_BROKER_CONFIG), or the default. A broker's
dynamic configs come from the metadata log: its own (DYNAMIC_BROKER_CONFIG) over the
cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG, the resource named "") over its static
ones. With
``include_synonyms`` each entry lists that chain, most specific first, as Kafka does.
Broker configs are described by the broker itself; another broker's id is refused.
A group's configs (GROUP, KIP-848 and KIP-932's GroupConfig) are every group config, its own
value a GROUP_CONFIG over the broker config it defaults from (``consumer.session.timeout.ms``
over ``group.consumer.session.timeout.ms``), as Kafka's ConfigHelper describes them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result
from purgatory.broker.config.broker_config import is_dynamic, validate_topic_configs
from purgatory.broker.config.config_def import ConfigDef
from purgatory.broker.config.definitions import BY_NAME, DEFINITIONS
from purgatory.broker.config.group_config import GROUP_CONFIGS, default_value
from purgatory.broker.config.topic_configs import (
    BOOLEAN,
    CONFIG_TYPE_IDS,
    DOUBLE,
    INT,
    LONG,
    STRING,
    TOPIC_CONFIGS,
    TopicConfig,
    kafka_value,
)
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

# ConfigResource types.
TOPIC = 2
BROKER = 4
GROUP = 32

# Kafka's ConfigSource numbers.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
GROUP_CONFIG = 8


class ConfigEntry:
    """One described config: its value, where it came from (Kafka's ConfigSource), its
    synonyms (name, value, source; most specific first), Kafka's type and documentation."""

    __slots__ = ("doc", "name", "read_only", "sensitive", "source", "synonyms", "type_id", "value")

    def __init__(
        self,
        name: str,
        value: str | None,
        synonyms: list[tuple[str, str | None, int]],
        *,
        read_only: bool,
        type_id: int,
        doc: str,
        sensitive: bool = False,
    ) -> None:
        self.name = name
        self.value = None if sensitive else value
        self.synonyms = synonyms
        self.source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        self.read_only = read_only
        self.type_id = type_id
        self.doc = doc
        self.sensitive = sensitive


def _broker_type_id(definition: ConfigDef) -> int:
    """Kafka's ConfigType of a broker config (a topic config's synonym has its type)."""
    topic = TOPIC_CONFIGS.get(definition.topic_name or "")
    if topic is not None:
        return CONFIG_TYPE_IDS[topic.type]
    if definition.type is bool:
        return CONFIG_TYPE_IDS[BOOLEAN]
    if definition.type is float:
        return CONFIG_TYPE_IDS[DOUBLE]
    if definition.type is int:
        return CONFIG_TYPE_IDS[LONG if definition.name.endswith((".ms", ".bytes")) else INT]
    return CONFIG_TYPE_IDS[STRING]


def _topic_doc(topic: TopicConfig) -> str:
    return f"{topic.doc} Here: {topic.effect}." if topic.effect else topic.doc


class ConfigApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
            ApiKey.ALTER_CONFIGS: self.handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
        }

    def handle_alter_configs(self, request: Any, version: int) -> Result:
        refused = authz.alter_configs_refusals(self.broker.auth, request.resources)
        return self._alter(ApiKey.ALTER_CONFIGS, request, version, refused)

    def handle_incremental_alter_configs(self, request: Any, version: int) -> Result:
        refused = authz.alter_configs_refusals(self.broker.auth, request.resources)
        return self._alter(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, version, refused)

    async def _alter(
        self, key: ApiKey, request: Any, version: int, refused: authz.ConfigRefusals
    ) -> Any:
        """Either config change, forwarded to the controller in our protocol's one shape
        (AlterConfigs' entries have no operation: each is a SET); ``refused``: resources
        the principal may not ALTER_CONFIGS, answered here."""
        check_topic_count(len(request.resources))
        incremental = key == ApiKey.INCREMENTAL_ALTER_CONFIGS
        asked = m.IncrementalAlterConfigsRequest(
            [
                m.AlterConfigsResource(
                    r.resource_type,
                    r.resource_name,
                    [
                        m.AlterableConfig(
                            c.name, c.config_operation if incremental else m.CONFIG_SET, c.value
                        )
                        for c in r.configs
                    ],
                )
                for r in request.resources
            ],
            request.validate_only,
        )
        forward = functools.partial(self.broker.forwarding.alter_configs, incremental=incremental)
        done = await authz.alter_configs(forward, asked, refused)
        return alter_configs_response(
            key,
            version,
            [(r, r.error_code, r.error_message) for r in done.responses],
        )

    def handle_describe_configs(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.resources))
        results: list[tuple[Any, int, str | None, list[ConfigEntry]]] = []
        refusals: list[
            tuple[Any, int, str | None, list[ConfigEntry]]
        ] = []  # (Kafka: DESCRIBE_CONFIGS on the topic or the cluster, answered last)
        auth = self.broker.auth
        for resource in request.resources:
            refused = authz.config_refusal(
                auth, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            if refused is not None:
                refusals.append((resource, *refused, []))
                continue
            described = self._describe(resource.resource_type, resource.resource_name)
            if isinstance(described, tuple):
                results.append((resource, *described, []))
            else:
                keys = resource.configuration_keys  # none (null or empty): every config
                entries = [e for e in described if not keys or e.name in keys]
                results.append((resource, ErrorCode.NONE, None, entries))
        return describe_configs_response(
            version,
            results + refusals,
            synonyms=getattr(request, "include_synonyms", False),  # from v1
            documentation=getattr(request, "include_documentation", False),  # from v3
        )

    def _describe(self, resource_type: int, name: str) -> list[ConfigEntry] | tuple[int, str]:
        if resource_type == TOPIC:
            return self.topic_configs(name)
        if resource_type == BROKER:
            own = str(self.broker.broker_id)
            if name == "":
                return self.default_broker_configs()
            if name != own:
                return (
                    ErrorCode.INVALID_REQUEST,
                    f"broker {own} describes its own configs; ask broker {name} for its own",
                )
            return self.broker_configs()
        if resource_type == GROUP:
            if not name:
                return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            return self.group_configs(name)
        return (
            ErrorCode.INVALID_REQUEST,
            f"resource type {resource_type} is not served; ask for topics ({TOPIC}), "
            f"brokers ({BROKER}) or groups ({GROUP})",
        )

    def _broker_synonyms(self, *names: str) -> list[tuple[str, str | None, int]]:
        """Where the value of broker configs ``names`` (Kafka's synonyms of one config, in
        its order, the config itself first) comes from, most specific first, as Kafka's
        ConfigHelper lists them: the dynamic changes, then the static configs, then the
        defaults (a config whose default is null, like ``log.retention.ms``, has none);
        and, as Kafka drops them, none before the first entry of ``names[0]`` itself (so
        ``retention.ms`` left to ``log.retention.hours`` lists no synonym at all)."""
        config = self.broker.config
        chain: dict[int, list[tuple[str, str | None, int]]] = {
            DYNAMIC_BROKER_CONFIG: [],
            DYNAMIC_DEFAULT_BROKER_CONFIG: [],
            STATIC_BROKER_CONFIG: [],
            DEFAULT_CONFIG: [],
        }
        for name in names:
            definition = BY_NAME[name]
            hide = definition.sensitive
            layers = (
                (DYNAMIC_BROKER_CONFIG, config.dynamic_broker),
                (DYNAMIC_DEFAULT_BROKER_CONFIG, config.dynamic_default),
            )
            for kind, values in layers:
                if name in values:
                    chain[kind].append((name, None if hide else values[name], kind))
            static = config.static_values if name in config.static_values else config.values
            source = (
                config.static_sources if name in config.static_values else config.sources
            ).get(name)
            if source == "dynamic" and name not in config.dynamic_broker:  # set_dynamic's
                chain[DYNAMIC_BROKER_CONFIG].append(
                    (
                        name,
                        None if hide else kafka_value(config.values[name]),
                        DYNAMIC_BROKER_CONFIG,
                    )
                )
            elif source is not None and source not in ("dynamic", "dynamic_default"):
                value = None if hide else kafka_value(static[name])
                chain[STATIC_BROKER_CONFIG].append((name, value, STATIC_BROKER_CONFIG))
            if definition.default is not None:
                default = None if hide else kafka_value(definition.default)
                chain[DEFAULT_CONFIG].append((name, default, DEFAULT_CONFIG))
        ordered = [
            *chain[DYNAMIC_BROKER_CONFIG],
            *chain[DYNAMIC_DEFAULT_BROKER_CONFIG],
            *chain[STATIC_BROKER_CONFIG],
            *chain[DEFAULT_CONFIG],
        ]
        first = next((i for i, (name, _, _) in enumerate(ordered) if name == names[0]), None)
        return [] if first is None else ordered[first:]

    def broker_configs(self) -> list[ConfigEntry]:
        entries = []
        for d in DEFINITIONS:
            synonyms = self._broker_synonyms(d.name)
            value = self.broker.config.values[d.name]
            entries.append(
                ConfigEntry(
                    d.name,
                    None if value is None else kafka_value(value),
                    synonyms,
                    read_only=not is_dynamic(d.name),
                    type_id=_broker_type_id(d),
                    doc=d.doc,
                    sensitive=d.sensitive,
                )
            )
        return entries

    def default_broker_configs(self) -> list[ConfigEntry]:
        """The cluster-wide default broker resource: the dynamic defaults set, as Kafka
        describes it (each DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        entries = []
        for name, value in sorted(self.broker.config.dynamic_default.items()):
            d = BY_NAME[name]
            shown = None if d.sensitive else value
            entries.append(
                ConfigEntry(
                    name,
                    shown,
                    [(name, shown, DYNAMIC_DEFAULT_BROKER_CONFIG)],
                    read_only=False,
                    type_id=_broker_type_id(d),
                    doc=d.doc,
                    sensitive=d.sensitive,
                )
            )
        return entries

    def group_configs(self, group_id: str) -> list[ConfigEntry]:
        """Every group config of ``group_id`` as Kafka's ConfigHelper describes it: the
        group's own value (GROUP_CONFIG) first, then the broker config it defaults from
        (its synonyms), or, for one no broker config stands behind
        (``share.auto.offset.reset``), its default under its own name."""
        own = self.broker.metadata.image.group_configs.get(group_id, {})
        values = self.broker.config.values
        entries = []
        for name, definition in sorted(GROUP_CONFIGS.items()):
            value = own.get(name, default_value(definition, values))
            if definition.type == "INT":
                value = str(int(value))
            synonyms: list[tuple[str, str | None, int]] = []
            if name in own:
                synonyms.append((name, value, GROUP_CONFIG))
            if definition.broker in BY_NAME:
                synonyms.extend(self._broker_synonyms(definition.broker))
            elif definition.broker is not None:  # (a broker config not defined here yet)
                synonyms.append(
                    (
                        definition.broker,
                        value if name not in own else default_value(definition, values),
                        DEFAULT_CONFIG,
                    )
                )
            else:
                synonyms.append((name, default_value(definition, values), DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(
                    name,
                    value,
                    synonyms,
                    read_only=False,
                    type_id=CONFIG_TYPE_IDS[INT if definition.type == "INT" else STRING],
                    doc=definition.doc,
                )
            )
        return entries

    def topic_configs(self, topic: str) -> list[ConfigEntry] | tuple[int, str]:
        state = self.broker.metadata.topics.get(topic)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
        return self.topic_entries(state.configs)

    def topic_entries(self, configs: dict[str, Any]) -> list[ConfigEntry]:
        """Every topic config of a topic created with ``configs`` (valid ones), described as
        Kafka's ConfigHelper does: the topic's own value (DYNAMIC_TOPIC_CONFIG), then the
        broker config it defaults from; a topic-only config left unset has no synonym."""
        overrides = validate_topic_configs(configs)
        defaults = self.broker.config.topic_defaults()
        entries = []
        for name, topic in sorted(TOPIC_CONFIGS.items()):
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append((name, kafka_value(overrides[name]), DYNAMIC_TOPIC_CONFIG))
            synonyms.extend(self._broker_synonyms(*(n for n, _ in topic.synonyms)))
            value = overrides[name] if name in overrides else defaults[name]
            entries.append(
                ConfigEntry(
                    name,
                    kafka_value(value),
                    synonyms,
                    read_only=False,
                    type_id=CONFIG_TYPE_IDS[topic.type],
                    doc=_topic_doc(topic),
                )
            )
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
        "config_source": entry.source,
        "is_sensitive": entry.sensitive,
    }


def _entry(schema: Any, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    return build(
        schema.DescribeConfigsResourceResult,
        **entry_fields(entry),
        synonyms=[
            build(schema.DescribeConfigsSynonym, name=n, value=v, source=s)
            for n, v, s in (entry.synonyms if synonyms else ())
        ],
        config_type=entry.type_id,
        documentation=entry.doc if documentation else None,
    )


def alter_configs_response(
    key: ApiKey, version: int, results: list[tuple[Any, int, str | None]]
) -> Any:
    """An AlterConfigs or IncrementalAlterConfigs response: (resource asked, error code,
    message) each."""
    schema = response_module(key, version)
    top = (
        schema.AlterConfigsResponse
        if key == ApiKey.ALTER_CONFIGS
        else schema.IncrementalAlterConfigsResponse
    )
    return build(
        top,
        throttle_time=0,
        responses=[
            build(
                schema.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource, code, message in results
        ],
    )
