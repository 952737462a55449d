"""The broker's own configs: identity, listeners, the socket server's limits, the purgatory
and logging (Kafka's ServerConfigs and SocketServerConfigs)."""

from __future__ import annotations

from purgatory.broker.config.addresses import parse_members
from purgatory.broker.config.config_def import ConfigDef, at_least, host_port, parses
from purgatory.broker.config.listeners import (
    DEFAULT_PROTOCOL_MAP,
    parse_listeners,
    parse_protocol_map,
)


def parse_per_ip_overrides(value: str) -> dict[str, int]:
    """``host:count,...`` (Kafka's max.connections.per.ip.overrides) as {host: count}."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"expected host:count, got {item!r}")
        out[host.strip("[]")] = int(count)
    return out


SERVER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "broker.id",
        int,
        0,
        "This node's id; unique in the cluster. Also accepted as `node.id`.",
        at_least(0),
        aliases=("node.id",),
    ),
    ConfigDef(
        "listeners",
        str,
        "PLAINTEXT://127.0.0.1:9092",
        "Listeners the broker binds, `NAME://host:port,...` (a bare `host:port` is "
        "`PLAINTEXT`). Each speaks both our protocol and Kafka's (a connection's first request "
        "tells them apart) and plays one role: the one named by `inter.broker.listener.name` "
        "serves clients and, to brokers proving `cluster.secret`, the inter-broker APIs; "
        "those in `controller.listener.names` serve brokers only (the metadata quorum); any "
        "other serves clients only. Port 0 picks a free port.",
        parses(parse_listeners),
    ),
    ConfigDef(
        "listener.security.protocol.map",
        str,
        DEFAULT_PROTOCOL_MAP,
        "Each listener name's security protocol, `NAME:PROTOCOL,...`. Only PLAINTEXT is "
        "served so far; with this default a controller listener is PLAINTEXT, as in Kafka.",
        parses(parse_protocol_map),
    ),
    ConfigDef(
        "advertised.listeners",
        str,
        "",
        "The address clients (and brokers) are given for each listener, "
        "`NAME://host:port,...`: Metadata and FindCoordinator answer with the addresses of "
        "the listener the request came in on. A listener not named here is advertised at "
        "its bound address (a wildcard host as this machine's name); the inter-broker "
        "listener of a `cluster.members` node, when it is the one the members' addresses "
        "point at, at its member address. Controller listeners are never advertised.",
        parses(parse_listeners),
    ),
    ConfigDef(
        "inter.broker.listener.name",
        str,
        "",
        "The listener brokers replicate over (follower fetches, ControlledShutdown). Empty: "
        "the only listener that is not a controller listener, else `PLAINTEXT`.",
    ),
    ConfigDef(
        "controller.listener.names",
        str,
        "",
        "Listeners that serve the metadata quorum (votes, the metadata log, registrations, "
        "heartbeats) to brokers proving `cluster.secret`, and nothing else. The "
        "`cluster.members` (or `controller.quorum.voters`) address of a controller is then "
        "its controller listener's. Empty: the inter-broker listener serves the quorum too.",
    ),
    ConfigDef(
        "admin.listener",
        str,
        "127.0.0.1:9644",
        "Address of the admin HTTP server (/metrics, /healthz, /v1/state). Port 0 picks a "
        "free port.",
        host_port,
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
        "Every node of the cluster, `id@host:port,...` (the format of Kafka's "
        "`controller.quorum.voters`); every node gets the same list. Unless "
        "`controller.quorum.voters` says otherwise, every member is a voter of the "
        "metadata quorum. A node's own entry is where the others reach it: the port of its "
        "controller listener (`controller.listener.names`), else of its inter-broker "
        "listener; a broker whose `listeners` (or `--port`) say another port refuses to "
        "start, naming both. Empty: a single-node cluster of this broker alone.",
        parses(parse_members),
    ),
    ConfigDef("cluster.id", str, "purgatory", "Cluster id reported in Metadata."),
    ConfigDef(
        "cluster.secret",
        str,
        "",
        "The secret every broker of the cluster holds: a broker proves it (HMAC challenge "
        "and response, never sending it) before another serves it the inter-broker and "
        "controller APIs (Vote, BrokerHeartbeat, AlterPartition, ..., follower fetches); "
        "anyone else gets CLUSTER_AUTHORIZATION_FAILED. Required when `cluster.members` "
        "has more than one node; `purgatory cluster` and `purgatory.testing.Cluster` "
        "generate one. Also read from PURGATORY_CLUSTER_SECRET.",
        sensitive=True,
    ),
    ConfigDef(
        "socket.request.max.bytes",
        int,
        104857600,
        "Largest request frame accepted; a larger length prefix closes the connection "
        "before any of its body is buffered.",
        at_least(64),
    ),
    ConfigDef(
        "queued.max.requests",
        int,
        500,
        "Requests one connection may have in flight before the broker stops reading from "
        "it (back-pressure instead of unbounded memory).",
        at_least(1),
    ),
    ConfigDef(
        "max.connections",
        int,
        2147483647,
        "Connections the broker may have open. At the limit a new connection is closed at "
        "once (Kafka's acceptor leaves it waiting in the accept queue instead; closed, a "
        "client knows at once and retries after its reconnect backoff), except on a "
        "listener only brokers use (a controller listener, or the inter-broker listener "
        "beside client listeners, as KIP-402 protects it); brokers' connections leave the "
        "count once they prove cluster.secret (at most 8 per broker id). Logged at most once "
        'a minute; counted in purgatory_connections_refused_total{reason="max_connections"}.',
        at_least(0),
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
        at_least(1),
    ),
    ConfigDef(
        "max.connections.per.ip",
        int,
        2147483647,
        "Connections one IP address may have open; one more is closed at once (logged once "
        'per address, counted in purgatory_connections_refused_total{reason="per_ip"}).',
        at_least(0),
    ),
    ConfigDef(
        "max.connections.per.ip.overrides",
        str,
        "",
        "Per-address exceptions to max.connections.per.ip: `host-or-ip:count,...`.",
        parses(parse_per_ip_overrides),
    ),
    ConfigDef(
        "connections.max.idle.ms",
        int,
        600000,
        "A connection with no request for this long and nothing in flight is closed.",
        at_least(1),
    ),
    ConfigDef(
        "quota.window.num",
        int,
        11,
        "The number of samples to retain in memory for client quotas (the produce and "
        "fetch byte rates are measured over this many windows).",
        at_least(1),
    ),
    ConfigDef(
        "quota.window.size.seconds",
        int,
        1,
        "The time span of each sample for client quotas.",
        at_least(1),
    ),
    ConfigDef(
        "message.max.bytes",
        int,
        1048588,
        "Largest record batch accepted (MESSAGE_TOO_LARGE beyond). Topic config: "
        "`max.message.bytes`.",
        at_least(64),
        topic_name="max.message.bytes",
    ),
    ConfigDef(
        "fetch.purgatory.purge.interval.requests",
        int,
        1000,
        "With `purgatory.watcher.removal=purge`: purge the Fetch purgatory's watcher lists "
        "when the estimated number of completed-but-watched fetches exceeds this.",
        at_least(1),
    ),
    ConfigDef(
        "producer.purgatory.purge.interval.requests",
        int,
        1000,
        "The same for the Produce purgatory (acks=-1 produces waiting for replicas).",
        at_least(1),
    ),
    ConfigDef(
        "delete.records.purgatory.purge.interval.requests",
        int,
        1,
        "The same for the DeleteRecords purgatory (deletions waiting for the replicas' log "
        "starts).",
        at_least(1),
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
