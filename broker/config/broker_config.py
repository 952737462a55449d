"""BrokerConfig: a broker's resolved configuration, from defaults < TOML file < environment
(``PURGATORY_<NAME_WITH_UNDERSCORES>``) < ``--set name=value`` (Kafka's KafkaConfig).
Unknown names and bad values fail at start with a message naming the key."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from purgatory.broker.config.addresses import parse_host_port, parse_members
from purgatory.broker.config.config_def import ConfigDef, ConfigError
from purgatory.broker.config.definitions import (
    BY_NAME,
    DEFINITIONS,
    ENV_PREFIX,
    LISTENER_SCOPED,
    NOT_CONFIGS,
    TOPIC_CONFIGS,
)
from purgatory.broker.config.listeners import ListenerConfig, listener_config
from purgatory.broker.config.quorum_configs import parse_roles
from purgatory.broker.config.security_configs import (
    JAAS_CONFIG,
    LISTENER_PREFIX,
    split_listener_config,
)
from purgatory.broker.config.topic_configs import (
    broker_default,
    check_topic_consistency,
    kafka_value,
    parse_topic_configs,
)

# The names of every config by the type of its value, so that ``config[name]`` is typed
# and a misspelt name fails mypy (tests/unit/test_config.py holds these to DEFINITIONS).
IntConfig = Literal[
    "broker.id",
    "socket.request.max.bytes",
    "leader.imbalance.check.interval.seconds",
    "queued.max.requests",
    "max.connections",
    "socket.listen.backlog.size",
    "max.connections.per.ip",
    "connections.max.idle.ms",
    "quota.window.num",
    "quota.window.size.seconds",
    "connections.max.reauth.ms",
    "sasl.server.max.receive.size",
    "connection.failed.authentication.delay.ms",
    "message.max.bytes",
    "log.retention.bytes",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.memory.max.bytes",
    "log.segment.bytes",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "log.retention.check.interval.ms",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "remote.log.manager.task.interval.ms",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.roll.ms",
    "log.roll.hours",
    "log.roll.jitter.ms",
    "log.roll.jitter.hours",
    "log.index.size.max.bytes",
    "log.index.interval.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms",
    "log.segment.delete.delay.ms",
    "remote.fetch.max.wait.ms",
    "remote.log.reader.threads",
    "remote.log.reader.max.pending.tasks",
    "num.partitions",
    "default.replication.factor",
    "max.broker.partitions",
    "min.insync.replicas",
    "replica.lag.time.max.ms",
    "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.backoff.ms",
    "replica.socket.timeout.ms",
    "broker.session.timeout.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "broker.registration.backoff.ms",
    "broker.heartbeat.interval.ms",
    "fetch.purgatory.purge.interval.requests",
    "producer.purgatory.purge.interval.requests",
    "delete.records.purgatory.purge.interval.requests",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.commit.timeout.ms",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "group.consumer.session.timeout.ms",
    "group.consumer.min.session.timeout.ms",
    "group.consumer.max.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.size",
    "group.share.session.timeout.ms",
    "group.share.min.session.timeout.ms",
    "group.share.max.session.timeout.ms",
    "group.share.heartbeat.interval.ms",
    "group.share.min.heartbeat.interval.ms",
    "group.share.max.heartbeat.interval.ms",
    "group.share.max.size",
    "group.share.record.lock.duration.ms",
    "group.share.min.record.lock.duration.ms",
    "group.share.max.record.lock.duration.ms",
    "group.share.delivery.count.limit",
    "group.share.partition.max.record.locks",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.state.log.segment.bytes",
    "transaction.max.timeout.ms",
    "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.segment.bytes",
    "share.coordinator.write.timeout.ms",
    "share.coordinator.load.buffer.size",
]
FloatConfig = Literal[
    "remote.storage.latency.ms",
    "remote.storage.latency.p99.ms",
    "remote.storage.error.rate",
    "log.cleaner.min.cleanable.ratio",
]
BoolConfig = Literal[
    "auto.create.topics.enable",
    "unclean.leader.election.enable",
    "auto.leader.rebalance.enable",
    "controlled.shutdown.enable",
    "log.preallocate",
    "log.cleaner.enable",
    "allow.everyone.if.no.acl.found",
]
StrConfig = Literal[
    "listeners",
    "listener.security.protocol.map",
    "advertised.listeners",
    "inter.broker.listener.name",
    "controller.listener.names",
    "admin.listener",
    "admin.token",
    "cluster.secret",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol",
    "authorizer.class.name",
    "super.users",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
    "max.connections.per.ip.overrides",
    "cluster.members",
    "cluster.id",
    "process.roles",
    "controller.quorum.voters",
    "metadata.log.dir",
    "bootstrap.scram.credentials",
    "remote.storage.latency.distribution",
    "log.cleanup.policy",
    "compression.type",
    "log.message.timestamp.type",
    "purgatory.watcher.removal",
    "log.level",
    "group.coordinator.rebalance.protocols",
    "group.consumer.assignors",
    "group.consumer.migration.policy",
    "log.format",
]


def coerce(definition: ConfigDef, raw: Any, *, source: str) -> Any:
    """Turn a raw value (TOML value or string) into the config's type, or raise ConfigError."""
    name = definition.name
    kind = definition.type
    value: Any
    try:
        if kind is bool:
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.lower() in ("true", "false"):
                value = raw.lower() == "true"
            else:
                raise ValueError(f"expected true or false, got {raw!r}")
        elif kind is int:
            if isinstance(raw, bool) or not isinstance(raw, (int, str)):
                raise ValueError(f"expected an integer, got {raw!r}")
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"expected an integer, got {raw!r}") from None
        elif kind is float:
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ValueError(f"expected a number, got {raw!r}") from None
        else:
            if not isinstance(raw, str):
                raise ValueError(f"expected a string, got {raw!r}")
            value = raw
    except ValueError as exc:
        raise ConfigError(f"config {name!r} (from {source}): {exc}") from None
    if definition.choices and value not in definition.choices:
        raise ConfigError(
            f"config {name!r} (from {source}): {value!r} is not one of "
            f"{', '.join(definition.choices)}"
        )
    if definition.validate is not None:
        complaint = definition.validate(value)
        if complaint:
            raise ConfigError(f"config {name!r} (from {source}): {value!r} {complaint}")
    return value


class StaticConfigError(ConfigError):
    """A config that only takes effect at start cannot be changed while running."""


def check_consistency(values: Mapping[str, Any]) -> None:
    """Settings that fight each other; raise ConfigError naming them."""
    if values["broker.heartbeat.interval.ms"] >= values["broker.session.timeout.ms"]:
        raise ConfigError(
            "broker.heartbeat.interval.ms must be below broker.session.timeout.ms, or a "
            "broker would be declared dead between two of its own heartbeats"
        )
    if values["replica.fetch.wait.max.ms"] >= values["replica.lag.time.max.ms"]:
        raise ConfigError(
            "replica.fetch.wait.max.ms must be below replica.lag.time.max.ms (as in Kafka): "
            "an idle follower long-polls that long, and would keep leaving the ISR"
        )
    if (
        values["remote.storage.latency.distribution"] == "lognormal"
        and values["remote.storage.latency.p99.ms"] < values["remote.storage.latency.ms"]
    ):
        raise ConfigError(
            "remote.storage.latency.p99.ms must be at least remote.storage.latency.ms (the "
            "median) for a log-normal latency"
        )
    _check_local_retention(values)
    members = parse_members(values["cluster.members"])
    voters = parse_members(values["controller.quorum.voters"])
    if members and set(voters) - set(members):
        raise ConfigError(
            f"controller.quorum.voters names {sorted(set(voters) - set(members))}, which "
            "cluster.members does not: every voter must be a member"
        )
    roles = parse_roles(values["process.roles"])
    node, quorum = values["broker.id"], voters or members
    if roles and quorum and ("controller" in roles) != (node in quorum):
        raise ConfigError(
            f"process.roles {values['process.roles']!r} does not match the quorum: node "
            f"{node} is {'' if node in quorum else 'not '}a voter "
            f"({'controller.quorum.voters' if voters else 'cluster.members'}), and a node is "
            "a controller exactly when it is a voter"
        )
    try:
        BrokerConfig(dict(values)).listener_config()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if values["controller.quorum.election.timeout.ms"] >= values["broker.session.timeout.ms"]:
        raise ConfigError(
            "controller.quorum.election.timeout.ms must be below broker.session.timeout.ms, "
            "or brokers would be fenced before a new controller could be elected"
        )


# The broker configs a topic config defaults from: all of them change at run time, as
# Kafka's DynamicLogConfig reconfigures them.
TOPIC_DEFAULT_CONFIGS = frozenset(n for t in TOPIC_CONFIGS.values() for n, _ in t.synonyms)


def is_dynamic(name: str) -> bool:
    """May the broker config ``name`` (canonical) change while the broker runs: one
    defined dynamic, or one a topic config defaults from (Kafka's DynamicBrokerConfig)."""
    definition = BY_NAME.get(name)
    return definition is not None and (definition.dynamic or name in TOPIC_DEFAULT_CONFIGS)


@dataclass
class BrokerConfig:
    """The resolved configuration of one broker: every name in DEFINITIONS has a value.
    Dynamic configs can change while the broker runs (``set_dynamic``)."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)  # the latest dynamic changes
    # The dynamic configs from the metadata log, by canonical name and value as set: this
    # broker's own (DYNAMIC_BROKER_CONFIG) and the cluster-wide default
    # (DYNAMIC_DEFAULT_BROKER_CONFIG); and what the static configs said before them.
    dynamic_broker: dict[str, str] = field(default_factory=dict)
    dynamic_default: dict[str, str] = field(default_factory=dict)
    static_values: dict[str, Any] = field(default_factory=dict)
    static_sources: dict[str, str] = field(default_factory=dict)
    # Security configs scoped to one listener (``listener.name.<listener>.<config>``), by
    # listener name, then canonical config name (``<mechanism>.sasl.jaas.config`` too).
    listener_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply_dynamic(
        self,
        default: Mapping[str, str],
        own: Mapping[str, str],
        *,
        at: str,
        refused: list[tuple[str, str]] | None = None,
    ) -> list[tuple[str, Any, Any]]:
        """Take the dynamic configs of the metadata log (Kafka's DynamicBrokerConfig): each
        config's value is this broker's own, else the cluster-wide ``default``, else the
        static one. Returns (name, old, new) of each value that changed. A value that
        fights this broker's static configs is not taken (the previous one stays); it is
        added to ``refused`` as (name, why)."""
        names = {*self.dynamic_broker, *self.dynamic_default, *own, *default}
        for name in names:
            if name not in self.static_values:
                self.static_values[name] = self.values[name]
                if name in self.sources:
                    self.static_sources[name] = self.sources[name]
        self.dynamic_broker, self.dynamic_default = dict(own), dict(default)
        changed = []
        for name in sorted(names):
            definition = BY_NAME[name]
            source: str | None
            if name in own or name in default:
                source = "dynamic" if name in own else "dynamic_default"
                raw = own[name] if name in own else default[name]
                try:
                    value = coerce(definition, raw, source="a dynamic change")
                    check_consistency({**self.values, name: value})
                except ConfigError as exc:
                    if refused is not None:
                        refused.append((name, str(exc)))
                    continue
            else:
                value, source = self.static_values[name], self.static_sources.get(name)
            old = self.values[name]
            self.values[name] = value
            if source is None:
                self.sources.pop(name, None)
            else:
                self.sources[name] = source
            if old != value:
                changed.append((name, old, value))
                self.changes.append({"name": name, "old": old, "new": value, "at": at})
        del self.changes[:-100]
        return changed

    def check_dynamic(self, name: str, raw: Any) -> tuple[str, Any]:
        """The canonical name and parsed value of a dynamic change, changing nothing.
        Raises ConfigError (unknown name, bad value) or StaticConfigError."""
        definition = BY_NAME.get(name)
        if definition is None:
            raise ConfigError(f"unknown config {name!r}{_suggest(name)}")
        if not is_dynamic(definition.name):
            raise StaticConfigError(
                f"config {definition.name!r} is read at start only; set it with --set, "
                f"PURGATORY_{definition.name.upper().replace('.', '_')} or the config file and restart"
            )
        return definition.name, coerce(definition, raw, source="a dynamic change")

    def set_dynamic(self, name: str, raw: Any, *, at: str) -> tuple[Any, Any]:
        """Change a dynamic config now, on this broker only (unit tests; a running broker
        changes configs through the controller, ``apply_dynamic``); return (old, new).
        Raises ConfigError (unknown name, bad value, or one that fights another setting)
        or StaticConfigError."""
        canonical, value = self.check_dynamic(name, raw)
        definition = BY_NAME[canonical]
        candidate = {**self.values, definition.name: value}
        check_consistency(candidate)
        old = self.values[definition.name]
        self.values[definition.name] = value
        self.sources[definition.name] = "dynamic"
        self.changes.append({"name": definition.name, "old": old, "new": value, "at": at})
        del self.changes[:-100]
        return old, value

    @overload
    def __getitem__(self, name: IntConfig) -> int: ...

    @overload
    def __getitem__(self, name: FloatConfig) -> float: ...

    @overload
    def __getitem__(self, name: BoolConfig) -> bool: ...

    @overload
    def __getitem__(self, name: StrConfig) -> str: ...

    def __getitem__(self, name: str) -> Any:
        return self.values[BY_NAME[name].name]

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    def members(self) -> dict[int, tuple[str, int]]:
        return parse_members(self.values["cluster.members"])

    def voters(self) -> frozenset[int]:
        """The metadata quorum's voters: ``controller.quorum.voters``, else every member
        (else this node alone)."""
        voters = parse_members(self.values["controller.quorum.voters"]) or self.members()
        return frozenset(voters) or frozenset({self.broker_id})

    def process_roles(self) -> tuple[str, ...]:
        """``process.roles``, else both for a voter and ``broker`` for anyone else."""
        roles = parse_roles(self.values["process.roles"])
        if roles:
            return roles
        return ("broker", "controller") if self.broker_id in self.voters() else ("broker",)

    def listener_config(self) -> ListenerConfig:
        """The named listeners, checked against each other (ValueError says what to fix)."""
        return listener_config(self.values, self.process_roles())

    def member_address_problem(
        self, listeners: str = "listeners", members: str = "cluster.members"
    ) -> str | None:
        """Why this node's listeners and its own ``cluster.members`` entry disagree, if
        they do: the other nodes reach it at that entry's port, which must be the port of
        the listener the members' addresses are of (its controller listener, else its
        inter-broker listener), or nothing answers them there. ``listeners`` and
        ``members``: what the message calls the two settings (--port, --cluster). Port 0
        is checked once bound (``Broker.start``); without ``listeners`` a member listens
        at its entry."""
        entry = self.members().get(self.broker_id)
        if entry is None or self.sources.get("listeners") is None:
            return None
        try:
            facing = self.listener_config().broker_facing
        except ValueError:
            return None  # listeners that fight each other: check_consistency says how
        if facing.port in (0, entry[1]):
            return None
        return (
            f"{listeners} puts node {self.broker_id}'s {facing.name} listener on port "
            f"{facing.port}, but {members} gives node {self.broker_id} the address "
            f"{entry[0]}:{entry[1]}, where the other nodes reach it (a member's address is "
            "its controller listener's, controller.listener.names, else its inter-broker "
            "listener's): give both the same port"
        )

    def listener_values(self, listener: str) -> dict[str, Any]:
        """The configs as one listener sees them: each listener-scoped config's
        ``listener.name.<listener>.`` value, else the broker's; and the JAAS configs of
        its mechanisms (``<mechanism>.sasl.jaas.config``), which only a listener sets."""
        return {**self.values, **self.listener_overrides.get(listener, {})}

    def admin_listener(self) -> tuple[str, int]:
        return parse_host_port(self.values["admin.listener"])

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config's value on a topic that does not set it: its broker config's
        (Kafka's synonym), or its own default."""
        return {name: broker_default(topic, self.values) for name, topic in TOPIC_CONFIGS.items()}

    def topic_defaults_set(self) -> dict[str, str]:
        """The topic configs whose broker default this broker's config sets (not Kafka's
        default), as Kafka writes the values: with a topic's own, what kafka-topics
        --describe lists (every config whose source is not DEFAULT_CONFIG)."""
        set_here = [
            name
            for name, topic in TOPIC_CONFIGS.items()
            if any(self.sources.get(synonym) for synonym, _ in topic.synonyms)
        ]
        if not set_here:
            return {}
        defaults = self.topic_defaults()
        return {name: kafka_value(defaults[name]) for name in set_here}

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "name": d.name,
                "value": None if d.sensitive else self.values[d.name],
                "default": None if d.sensitive else d.default,
                "source": self.sources.get(d.name, "default"),
                "dynamic": d.dynamic,
                "doc": d.doc,
            }
            for d in DEFINITIONS
        ]


def load_config(
    *,
    file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> BrokerConfig:
    """Resolve defaults < TOML file < environment < overrides, validating every value.

    The TOML file may use dotted names as keys (``"log.retention.bytes" = 1024``) or nested
    tables (``[log.retention] bytes = 1024``); both mean the same.
    """
    config = BrokerConfig({d.name: d.default for d in DEFINITIONS})
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if file is not None:
        path = Path(file)
        try:
            with path.open("rb") as handle:
                layers.append((f"file {path}", _flatten(tomllib.load(handle))))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    env = os.environ if environ is None else environ
    from_env = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) and key not in NOT_CONFIGS:
            from_env[key[len(ENV_PREFIX) :].lower().replace("_", ".")] = (key, value)
    if from_env:
        layers.append(("environment", {k: v for k, (_, v) in from_env.items()}))
    if overrides:
        layers.append(("--set", dict(overrides)))
    for source, layer in layers:
        for name, raw in layer.items():
            if name.lower().startswith(LISTENER_PREFIX):
                _listener_override(config, name, raw, source)
                continue
            definition = BY_NAME.get(name)
            if definition is None:
                where = (
                    f"environment variable {from_env[name][0]}"
                    if source == "environment"
                    else source
                )
                raise ConfigError(f"unknown config {name!r} (from {where}){_suggest(name)}")
            config.values[definition.name] = coerce(definition, raw, source=source)
            config.sources[definition.name] = source
    return config


def _listener_override(config: BrokerConfig, name: str, raw: Any, source: str) -> None:
    """Take ``listener.name.<listener>.<config>`` (checked against ``listeners`` by
    check_consistency, once every layer is read)."""
    try:
        listener, scoped = split_listener_config(name, LISTENER_SCOPED)
    except ValueError as exc:
        raise ConfigError(f"config {exc} (from {source})") from None
    if scoped.endswith(JAAS_CONFIG):
        if not isinstance(raw, str):
            raise ConfigError(f"config {name!r} (from {source}): expected a string, got {raw!r}")
        value = raw
    else:
        value = coerce(BY_NAME[scoped], raw, source=source)
    config.listener_overrides.setdefault(listener, {})[scoped] = value
    config.sources[f"{LISTENER_PREFIX}{listener.lower()}.{scoped}"] = source


def parse_assignments(items: list[str]) -> dict[str, str]:
    """Parse repeated ``name=value`` arguments."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set/--config expects name=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def validate_topic_configs(
    configs: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Parse and check topic-level configs (Kafka's names and aliases); raise ConfigError in
    Kafka's words for a bad or unknown one, or (given the broker's ``defaults``, from
    ``topic_defaults``) for settings that fight each other."""
    out = parse_topic_configs(configs)
    if defaults is not None:
        check_topic_consistency({**defaults, **out})
    return out


def _check_local_retention(values: Mapping[str, Any]) -> None:
    """The broker defaults of local retention may not exceed the whole log's."""
    retention = {
        "bytes": values["log.retention.bytes"],
        "ms": broker_default(TOPIC_CONFIGS["retention.ms"], values),
    }
    for kind, total in retention.items():
        local = values[f"log.local.retention.{kind}"]
        if local >= 0 and (total != -1 and local > total):
            raise ConfigError(
                f"log.local.retention.{kind} ({local}) must not exceed log.retention.{kind} "
                f"({total})"
            )
        if local == -1 and total != -1:
            raise ConfigError(
                f"log.local.retention.{kind} is -1 (unlimited) but log.retention.{kind} is {total}"
            )


def _suggest(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(BY_NAME), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out
