"""ConfigurationControlManager: AlterConfigs (33) and IncrementalAlterConfigs (44) on the
controller (Kafka's ConfigurationControlManager with its ControllerConfigurationValidator).

A request is checked against the controller's image and turned into ConfigRecords, one per
config whose value changes; nothing changes anywhere until the quorum commits them, and
every broker applies them when it replays them (``replay`` in the metadata image). Each
resource succeeds or fails whole, as in Kafka:

- a topic must exist (UNKNOWN_TOPIC_OR_PARTITION); its configs after the change are
  checked as CreateTopics checks them (INVALID_CONFIG in Kafka's words, the broker's
  defaults under the topic's own for the checks of configs together);
- a broker resource is one broker (its id) or the cluster-wide default (""); only the
  configs Kafka changes dynamically are taken (INVALID_REQUEST, "Cannot update these
  configs dynamically: Set(...)", as Kafka's DynamicBrokerConfig answers);
- a group resource is one group (its id; "" is refused): its configs after the change are
  checked as Kafka's GroupConfig.validate checks them, against the broker's bounds
  (INVALID_CONFIG);
- APPEND and SUBTRACT work on LIST configs only, on the current value (else the default);
- AlterConfigs (``incremental`` False) replaces the resource's whole set: every config not
  named goes back to its default.

``validate_only`` checks everything and writes nothing.
"""

from __future__ import annotations

from typing import Any

from purgatory.broker.config.broker_config import (
    BrokerConfig,
    check_consistency,
    coerce,
    is_dynamic,
    validate_topic_configs,
)
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.definitions import BY_NAME
from purgatory.broker.config.group_config import validate_group_configs
from purgatory.broker.config.topic_configs import (
    ALIASES,
    LIST,
    TOPIC_CONFIGS,
    kafka_value,
    parse_value,
)
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
)
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode

_OPERATIONS = {
    m.CONFIG_SET: "SET",
    m.CONFIG_DELETE: "DELETE",
    m.CONFIG_APPEND: "APPEND",
    m.CONFIG_SUBTRACT: "SUBTRACT",
}


class ConfigRefused(Exception):
    """A resource's change refused: Kafka's error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def broker_config_name(name: str) -> str:
    """The canonical name of a broker config that may change dynamically; raises
    ConfigRefused for one that may not (or that does not exist)."""
    definition = BY_NAME.get(name)
    if definition is None or not is_dynamic(definition.name):
        raise ConfigRefused(
            ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({name})"
        )
    return definition.name


class ConfigurationControlManager:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def alter(
        self, image: MetadataImage, request: m.IncrementalAlterConfigsRequest, incremental: bool
    ) -> tuple[m.IncrementalAlterConfigsResponse, list[ConfigRecord]]:
        """The answer to an AlterConfigs (``incremental`` False) or IncrementalAlterConfigs
        request and the records that make its changes (none when ``validate_only``)."""
        responses: list[m.AlterConfigsResourceResponse] = []
        records: list[ConfigRecord] = []
        for resource in request.resources:
            code: int = ErrorCode.NONE
            message: str | None = None
            try:
                changes = self._resource_changes(image, resource, incremental)
            except ConfigRefused as exc:
                code, message = exc.code, exc.message
            else:
                if not request.validate_only:
                    records.extend(
                        ConfigRecord(resource.resource_type, resource.resource_name, k, v)
                        for k, v in changes.items()
                    )
            responses.append(
                m.AlterConfigsResourceResponse(
                    code, message, resource.resource_type, resource.resource_name
                )
            )
        return m.IncrementalAlterConfigsResponse(responses), records

    def _resource_changes(
        self, image: MetadataImage, resource: m.AlterConfigsResource, incremental: bool
    ) -> dict[str, str | None]:
        """The configs of ``resource`` whose value changes (None: removed)."""
        names = [c.name for c in resource.configs]
        if len(set(names)) != len(names):
            raise ConfigRefused(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        if resource.resource_type == TOPIC_RESOURCE:
            topic = image.topics.get(resource.resource_name)
            if topic is None:
                raise ConfigRefused(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"The topic '{resource.resource_name}' does not exist.",
                )
            current = dict(topic.configs)
            after = self._topic_configs(current, resource.configs, incremental)
        elif resource.resource_type == BROKER_RESOURCE:
            name = resource.resource_name
            if name and not name.isdigit():
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid broker name '{name}': a broker id, or empty for the "
                    "cluster-wide default",
                )
            current = dict(image.broker_configs.get(name, {}))
            after = self._broker_configs(current, resource.configs, incremental)
        elif resource.resource_type == GROUP_RESOURCE:
            if not resource.resource_name:
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
                )
            current = dict(image.group_configs.get(resource.resource_name, {}))
            after = self._group_configs(current, resource.configs, incremental)
        else:
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST,
                f"Unsupported resource type {resource.resource_type}: topics "
                f"({TOPIC_RESOURCE}), brokers ({BROKER_RESOURCE}) and groups "
                f"({GROUP_RESOURCE}) take config changes",
            )
        changes: dict[str, str | None] = {k: None for k in current if k not in after}
        changes.update({k: v for k, v in after.items() if current.get(k) != v})
        return changes

    # -- topics ------------------------------------------------------------------------------

    def _topic_configs(
        self, current: dict[str, str], alterations: list[m.AlterableConfig], incremental: bool
    ) -> dict[str, str]:
        """A topic's configs after ``alterations``, checked, as Kafka writes values."""
        nulls = [a.name for a in alterations if a.value is None and _sets(a, incremental)]
        if nulls:  # (INVALID_CONFIG from CreateTopics; here Kafka answers INVALID_REQUEST)
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST,
                f"Null value not supported for topic configs: {','.join(nulls)}",
            )
        after: dict[str, Any] = dict(current) if incremental else {}
        defaults = self.config.topic_defaults()
        for alteration in alterations:
            name = ALIASES.get(alteration.name, alteration.name)
            config = TOPIC_CONFIGS.get(name)
            if config is None:
                raise ConfigRefused(
                    ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {alteration.name}"
                )
            if not incremental:
                after[name] = alteration.value
                continue
            try:
                value = self._incremental(
                    alteration, name, config.type, after.get(name), defaults[name]
                )
            except ConfigError as exc:
                raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if value is None:
                after.pop(name, None)
            else:
                after[name] = value
        try:
            parsed = validate_topic_configs(after, defaults)
        except ConfigError as exc:
            raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return {k: kafka_value(v) for k, v in parsed.items()}

    @staticmethod
    def _incremental(
        alteration: m.AlterableConfig, name: str, kind: str, current: Any, default: Any
    ) -> Any:
        """A config's value after one incremental operation (None: removed)."""
        operation = alteration.config_operation
        if operation == m.CONFIG_SET:
            return alteration.value
        if operation == m.CONFIG_DELETE:
            return None
        if operation not in (m.CONFIG_APPEND, m.CONFIG_SUBTRACT):
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation} for {name}"
            )
        if kind != LIST:
            raise ConfigRefused(
                ErrorCode.INVALID_CONFIG,
                f"Can't {_OPERATIONS[operation]} to key {name} because its type is not LIST.",
            )
        base = parse_value(name, LIST, default if current is None else current)
        given = parse_value(name, LIST, alteration.value or "")
        if operation == m.CONFIG_APPEND:
            return ",".join([*base, *(v for v in given if v not in base)])
        return ",".join(v for v in base if v not in given)

    # -- brokers -----------------------------------------------------------------------------

    def _broker_configs(
        self, current: dict[str, str], alterations: list[m.AlterableConfig], incremental: bool
    ) -> dict[str, str]:
        """A broker resource's dynamic configs after ``alterations``, checked."""
        after: dict[str, str] = dict(current) if incremental else {}
        parsed: dict[str, Any] = {}
        for alteration in alterations:
            name = broker_config_name(alteration.name)
            operation = alteration.config_operation if incremental else m.CONFIG_SET
            if operation == m.CONFIG_DELETE:
                after.pop(name, None)
                continue
            if operation != m.CONFIG_SET:
                raise ConfigRefused(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {_OPERATIONS.get(operation, operation)} to key {name} because its "
                    "type is not LIST.",
                )
            if alteration.value is None:
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
                )
            try:
                value = coerce(BY_NAME[name], alteration.value, source="a dynamic change")
            except ConfigError as exc:
                raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
            after[name] = kafka_value(value)
            parsed[name] = value
        try:  # against the controller's own static configs (Kafka's broker checks its own)
            check_consistency({**self.config.values, **parsed})
        except ConfigError as exc:
            raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return after

    # -- groups ------------------------------------------------------------------------------

    def _group_configs(
        self, current: dict[str, str], alterations: list[m.AlterableConfig], incremental: bool
    ) -> dict[str, str]:
        """A group's configs after ``alterations``, checked as Kafka's GroupConfig.validate
        checks them (none of them is a LIST: APPEND and SUBTRACT are refused)."""
        nulls = [a.name for a in alterations if a.value is None and _sets(a, incremental)]
        if nulls:  # (the broker's ConfigAdminManager.preprocess, before forwarding)
            raise ConfigRefused(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
            )
        after: dict[str, str] = dict(current) if incremental else {}
        for alteration in alterations:
            operation = alteration.config_operation if incremental else m.CONFIG_SET
            if operation == m.CONFIG_DELETE:
                after.pop(alteration.name, None)
            elif operation == m.CONFIG_SET and alteration.value is not None:
                after[alteration.name] = alteration.value
            elif operation in (m.CONFIG_APPEND, m.CONFIG_SUBTRACT):
                raise ConfigRefused(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {_OPERATIONS[operation]} to key {alteration.name} because its "
                    "type is not LIST.",
                )
            else:
                raise ConfigRefused(
                    ErrorCode.INVALID_REQUEST,
                    f"Unknown config operation {operation} for {alteration.name}",
                )
        try:
            validate_group_configs(after, self.config.values)
        except ConfigError as exc:
            raise ConfigRefused(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return after


def _sets(alteration: m.AlterableConfig, incremental: bool) -> bool:
    return not incremental or alteration.config_operation == m.CONFIG_SET
