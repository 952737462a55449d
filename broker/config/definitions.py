"""Every broker and topic config: Kafka's name, type, default, meaning and check (Kafka's
ConfigDef). docs/configs.md lists every entry here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from purgatory.broker.config.addresses import parse_host_port, parse_members

ENV_PREFIX = "PURGATORY_"


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key and what is wrong."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: type
    default: Any
    doc: str
    validate: Callable[[Any], str | None] | None = None  # returns a complaint, or None
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    dynamic: bool = False
    topic_name: str | None = None  # the topic-level config this broker config defaults
    sensitive: bool = False  # never shown (Kafka's PASSWORD type: described as null)


def _at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be >= {n}"


def _minus_one_or_at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v == -1 or v >= n else f"must be -1 (unlimited) or >= {n}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def _parses(parse: Callable[[str], Any]) -> Callable[[Any], str | None]:
    """A check that ``parse`` accepts the value (its ValueError is the complaint)."""

    def check(value: Any) -> str | None:
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None

    return check


def parse_per_ip_overrides(value: str) -> dict[str, int]:
    """``host:count,...`` (Kafka's max.connections.per.ip.overrides) as {host: count}."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"expected host:count, got {item!r}")
        out[host.strip("[]")] = int(count)
    return out


_host_port = _parses(parse_host_port)


DEFINITIONS: tuple[ConfigDef, ...] = (
    ConfigDef("broker.id", int, 0, "This broker's id; unique in the cluster.", _at_least(0)),
    ConfigDef(
        "listeners",
        str,
        "PLAINTEXT://127.0.0.1:9092",
        "Address the broker binds for clients and other brokers (`host:port`, optionally "
        "prefixed with `PLAINTEXT://`). The one port speaks both our protocol and Kafka's (a "
        "connection's first request tells them apart). Port 0 picks a free port.",
        _host_port,
    ),
    ConfigDef(
        "advertised.listeners",
        str,
        "",
        "Address given to clients in Metadata when this broker is not in `cluster.members`; "
        "empty: the bound address.",
        lambda v: None if v == "" else _host_port(v),
    ),
    ConfigDef(
        "admin.listener",
        str,
        "127.0.0.1:9644",
        "Address of the admin HTTP server (/metrics, /healthz, /v1/state). Port 0 picks a "
        "free port.",
        _host_port,
    ),
    ConfigDef(
        "admin.token",
        str,
        "",
        "Bearer token the admin HTTP API requires for changes (PUT, POST, DELETE: configs, "
        "faults, leader moves); reads stay open. Empty: none on a loopback `admin.listener`, "
        "one generated at start and printed once on stderr otherwise.",
        sensitive=True,
    ),
    ConfigDef(
        "cluster.members",
        str,
        "",
        "Static membership, `id@host:port,...` (the format of Kafka's "
        "`controller.quorum.voters`); every broker gets the same list. Empty: a "
        "single-broker cluster of this broker alone. The lowest id is the controller.",
        _parses(parse_members),
    ),
    ConfigDef("cluster.id", str, "purgatory", "Cluster id reported in Metadata."),
    ConfigDef(
        "socket.request.max.bytes",
        int,
        104857600,
        "Largest request frame accepted; a larger length prefix closes the connection "
        "before any of its body is buffered.",
        _at_least(64),
    ),
    ConfigDef(
        "queued.max.requests",
        int,
        500,
        "Requests one connection may have in flight before the broker stops reading from "
        "it (back-pressure instead of unbounded memory).",
        _at_least(1),
    ),
    ConfigDef(
        "max.connections",
        int,
        2147483647,
        "Connections the broker may have open. At the limit it stops accepting until one "
        "closes: new connections wait in the accept queue (as Kafka's acceptor does; one "
        "port serves clients and brokers here, so brokers' connections count too). Logged "
        "at most once a minute; purgatory_acceptor_blocked_seconds_total counts the time.",
        _at_least(0),
    ),
    ConfigDef(
        "socket.listen.backlog.size",
        int,
        1024,
        "Connections the kernel may hold accepted but not yet taken by the broker (the "
        "listen backlog; capped by net.core.somaxconn). Kafka's default is 50, for an "
        "acceptor thread that does nothing else; one event loop here accepts between "
        "requests, so a burst of connections needs more room (with 50, 10,000 connections "
        "opened 500 at a time lose SYNs and wait seconds for a retransmission).",
        _at_least(1),
    ),
    ConfigDef(
        "max.connections.per.ip",
        int,
        2147483647,
        "Connections one IP address may have open; one more is closed at once (logged once "
        "per address, counted in purgatory_connections_refused_total).",
        _at_least(0),
    ),
    ConfigDef(
        "max.connections.per.ip.overrides",
        str,
        "",
        "Per-address exceptions to max.connections.per.ip: `host-or-ip:count,...`.",
        _parses(parse_per_ip_overrides),
    ),
    ConfigDef(
        "connections.max.idle.ms",
        int,
        600000,
        "A connection with no request for this long and nothing in flight is closed.",
        _at_least(1),
    ),
    ConfigDef(
        "message.max.bytes",
        int,
        1048588,
        "Largest record batch accepted (MESSAGE_TOO_LARGE beyond). Topic config: "
        "`max.message.bytes`.",
        _at_least(64),
        topic_name="max.message.bytes",
    ),
    ConfigDef(
        "log.retention.bytes",
        int,
        268435456,
        "Bytes a partition log keeps (both tiers): its oldest whole segments are deleted "
        "while it keeps at least this much without them. Kafka's "
        "default is -1 (unlimited, on disk); logs here live in memory, so the default is "
        "256 MiB per partition. -1: unlimited. Topic config: `retention.bytes`.",
        _minus_one_or_at_least(0),
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
        _minus_one_or_at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "log.retention.ms",
        int,
        604800000,
        "Milliseconds a log keeps a segment after its newest record's timestamp (7 days). "
        "-1: unlimited. Topic config: `retention.ms`.",
        _minus_one_or_at_least(0),
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
        _at_least(14),
        topic_name="segment.bytes",
    ),
    ConfigDef(
        "log.retention.check.interval.ms",
        int,
        300000,
        "How often time-based retention (`retention.ms`) is applied to every log. "
        "Size-based retention of a log without tiered storage applies at every append.",
        _at_least(1),
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
        _at_least(1),
    ),
    ConfigDef(
        "remote.fetch.max.wait.ms",
        int,
        500,
        "How long a fetch waits in the RemoteFetch purgatory for a remote read (KIP-1018). "
        "On expiry the read is cancelled and the partition answered empty; the client "
        "retries.",
        _at_least(1),
        aliases=("fetch.remote.max.wait.ms",),
        dynamic=True,
    ),
    ConfigDef(
        "remote.log.reader.threads",
        int,
        10,
        "Remote reads that run at once (Kafka's remote reader thread pool).",
        _at_least(1),
    ),
    ConfigDef(
        "remote.log.reader.max.pending.tasks",
        int,
        100,
        "Remote reads queued behind the running ones; a fetch finding the queue full gets "
        "an error for that partition at once.",
        _at_least(1),
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
        lambda v: None if v >= 0 else "must be >= 0",
        dynamic=True,
    ),
    ConfigDef(
        "remote.storage.latency.p99.ms",
        float,
        100.0,
        "99th percentile of the log-normal remote read latency.",
        lambda v: None if v >= 0 else "must be >= 0",
        dynamic=True,
    ),
    ConfigDef(
        "remote.storage.error.rate",
        float,
        0.0,
        "Probability that a read from the simulated remote store fails (the partition is "
        "answered UNKNOWN_SERVER_ERROR, as Kafka answers a RemoteStorageException).",
        _between(0.0, 1.0),
        dynamic=True,
    ),
    ConfigDef(
        "auto.create.topics.enable",
        bool,
        True,
        "Create a topic when a client asks for metadata of (or produces to) an unknown one.",
        dynamic=True,
    ),
    ConfigDef(
        "num.partitions",
        int,
        1,
        "Partitions of an auto-created topic, and the default "
        "for CreateTopics with num_partitions -1.",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "default.replication.factor",
        int,
        1,
        "Replication factor of auto-created topics and the default for CreateTopics.",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "min.insync.replicas",
        int,
        1,
        "In-sync replicas an acks=-1 produce needs: fewer and it is refused "
        "(NOT_ENOUGH_REPLICAS) before appending, or answered with "
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank while it waited. Also a topic config.",
        _at_least(1),
        topic_name="min.insync.replicas",
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        bool,
        False,
        "When no in-sync replica of a partition is live, let the controller elect any live "
        "replica; records only the lost in-sync replicas held are then lost, as in Kafka. "
        "Off: the partition stays offline until an in-sync replica returns. Also a topic "
        "config.",
        dynamic=True,
        topic_name="unclean.leader.election.enable",
    ),
    ConfigDef(
        "auto.leader.rebalance.enable",
        bool,
        True,
        "Every leader.imbalance.check.interval.seconds, move the leadership of partitions "
        "whose preferred (first) replica is a live in-sync replica back to it.",
        dynamic=True,
    ),
    ConfigDef(
        "leader.imbalance.check.interval.seconds",
        int,
        300,
        "How often the controller checks for leadership away from preferred replicas.",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "controlled.shutdown.enable",
        bool,
        True,
        "On SIGTERM or Ctrl-C, ask the controller to move this broker's leaderships to other "
        "in-sync replicas before stopping, so clients see NOT_LEADER_OR_FOLLOWER instead of "
        "a dead leader for a session timeout.",
    ),
    ConfigDef(
        "controlled.shutdown.max.retries",
        int,
        3,
        "Attempts of a controlled shutdown whose controller could not be reached or answered "
        "an error, before the broker stops anyway.",
        _at_least(0),
    ),
    ConfigDef(
        "controlled.shutdown.retry.backoff.ms",
        int,
        5000,
        "Wait between controlled shutdown attempts.",
        _at_least(0),
    ),
    ConfigDef(
        "replica.lag.time.max.ms",
        int,
        30000,
        "A follower that has not caught up to the leader's log end for this long leaves the "
        "ISR; the leader checks every half of it.",
        _at_least(10),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.wait.max.ms",
        int,
        500,
        "`max_wait_ms` of a follower's fetches (they long-poll the leader).",
        _at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.min.bytes",
        int,
        1,
        "`min_bytes` of a follower's fetches.",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.max.bytes",
        int,
        1048576,
        "Bytes a follower asks for per partition in one fetch (the first batch always comes).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.response.max.bytes",
        int,
        10485760,
        "Bytes a follower asks for in one fetch, over all partitions.",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "replica.fetch.backoff.ms",
        int,
        1000,
        "How long a follower leaves out a partition the leader answered with an error "
        "(the others keep fetching), or pauses its fetcher after a failed fetch.",
        _at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "broker.session.timeout.ms",
        int,
        9000,
        "A broker that has not re-registered with the controller for this long is fenced: "
        "it leaves the ISR of its partitions and those it led get a new leader (a clean "
        "election). A controller unreachable for this long is replaced by the lowest live "
        "broker.",
        _at_least(10),
    ),
    ConfigDef(
        "metadata.push.timeout.ms",
        int,
        5000,
        "How long the controller waits for a broker to apply a metadata update before it "
        "considers the broker gone (it re-sends the full picture when the broker registers).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "broker.registration.backoff.ms",
        int,
        200,
        "Pause between a broker's attempts to register with the controller.",
        _at_least(1),
    ),
    ConfigDef(
        "broker.heartbeat.interval.ms",
        int,
        2000,
        "How often a broker re-registers with the controller (Kafka's broker heartbeat); "
        "a controller that lost track of it pushes it the full picture again.",
        _at_least(1),
    ),
    ConfigDef(
        "offsets.topic.num.partitions",
        int,
        50,
        "Partitions of the internal `__consumer_offsets` topic (created on first use). The "
        "coordinator of group G is the leader of partition hash(G) mod this.",
        _at_least(1),
    ),
    ConfigDef(
        "offsets.topic.replication.factor",
        int,
        3,
        "Replication factor of `__consumer_offsets`. Kafka refuses to create the topic "
        "while fewer brokers exist; here a cluster with fewer members uses all of them "
        "(so a single broker works without changing it).",
        _at_least(1),
    ),
    ConfigDef(
        "offsets.commit.timeout.ms",
        int,
        5000,
        "How long a commit (or a group's assignment) waits for every in-sync replica of its "
        "`__consumer_offsets` partition; then it fails with COORDINATOR_NOT_AVAILABLE.",
        _at_least(1),
    ),
    ConfigDef(
        "offsets.retention.minutes",
        int,
        10080,
        "The committed offsets of a group are deleted this long after the group became "
        "empty (a group that only commits: after its last commit).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "offsets.retention.check.interval.ms",
        int,
        600000,
        "How often each coordinator looks for offsets to expire.",
        _at_least(1),
    ),
    ConfigDef(
        "offset.metadata.max.bytes",
        int,
        4096,
        "Longest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond).",
        _at_least(0),
    ),
    ConfigDef(
        "group.initial.rebalance.delay.ms",
        int,
        3000,
        "How long the first rebalance of an empty group waits for more members to join "
        "(each new member extends it by this much, up to the rebalance timeout).",
        _at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "group.min.session.timeout.ms",
        int,
        6000,
        "Shortest session timeout a member may ask for (INVALID_SESSION_TIMEOUT below).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "group.max.session.timeout.ms",
        int,
        1800000,
        "Longest session timeout a member may ask for (INVALID_SESSION_TIMEOUT above).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "group.max.size",
        int,
        2147483647,
        "Most members one group may have (GROUP_MAX_SIZE_REACHED beyond).",
        _at_least(1),
        dynamic=True,
    ),
    ConfigDef(
        "fetch.purgatory.purge.interval.requests",
        int,
        1000,
        "With `purgatory.watcher.removal=purge`: purge the Fetch purgatory's watcher lists "
        "when the estimated number of completed-but-watched fetches exceeds this.",
        _at_least(1),
    ),
    ConfigDef(
        "producer.purgatory.purge.interval.requests",
        int,
        1000,
        "The same for the Produce purgatory (acks=-1 produces waiting for replicas).",
        _at_least(1),
    ),
    ConfigDef(
        "purgatory.watcher.removal",
        str,
        "eager",
        "How completed operations leave watcher lists. `eager`: at once, from every key "
        "(exact PurgatorySize, no purge scans); `purge`: Kafka's way, lazily, plus a purge "
        "of all lists driven by the `*.purgatory.purge.interval.requests` estimate.",
        choices=("eager", "purge"),
    ),
    ConfigDef(
        "log.level",
        str,
        "INFO",
        "Least severe log level written.",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        dynamic=True,
    ),
    ConfigDef(
        "log.format",
        str,
        "json",
        "`json`: one JSON event per line (structlog); `console`: coloured, for terminals.",
        choices=("json", "console"),
    ),
)

BY_NAME: dict[str, ConfigDef] = {}
for _d in DEFINITIONS:
    BY_NAME[_d.name] = _d
    for _alias in _d.aliases:
        BY_NAME[_alias] = _d

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

# Topic-level configs (CreateTopics `configs`, `purgatory topics create --config`).
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.topic_name: d for d in (*DEFINITIONS, *TOPIC_ONLY_CONFIGS) if d.topic_name
}
