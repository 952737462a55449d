"""`purgatory topics|produce|consume|consumer-groups|share-groups|delete-records|leader-election|configs` and `purgatory perf
produce|consume|echo` (declarations)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from purgatory.clients.cli.properties import CONSUMER_PROPERTIES, PRODUCER_PROPERTIES
from purgatory.common.lazy_command import lazy

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_ADMIN = "http://127.0.0.1:9644"
DEFAULT_CONTROL = "http://127.0.0.1:9640"

# Addresses the commands take from the environment when the flag is not given, so a shell
# that exports them need not repeat --bootstrap, --admin or --control. They are not broker
# configs (broker/config/definitions.py's NOT_CONFIGS): a broker started beside them
# ignores them.
BOOTSTRAP_ENV = "PURGATORY_BOOTSTRAP"
ADMIN_ENV = "PURGATORY_ADMIN"
CONTROL_ENV = "PURGATORY_CONTROL"


def _from_environment(variable: str, fallback: str) -> str:
    return os.environ.get(variable) or fallback


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        default=_from_environment(BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP),
        metavar="HOST:PORT[,...]",
        help=f"brokers to start from (default: ${BOOTSTRAP_ENV} if set, else "
        f"{DEFAULT_BOOTSTRAP}; the flag wins)",
    )


def _command_config(p: argparse.ArgumentParser, *aliases: str, what: str = "client") -> None:
    """Kafka's tools' properties file of client configs (security.protocol, sasl.*, ssl.*,
    ...): ``--command-config``, and the console tools' ``--producer.config`` or
    ``--consumer.config``."""
    p.add_argument(
        "--command-config",
        *aliases,
        dest="command_config",
        metavar="FILE",
        help=f"a properties file of {what} configs by Kafka's names, e.g. "
        "security.protocol=SASL_SSL, sasl.mechanism, sasl.jaas.config, ssl.ca.location "
        "(docs/configs.md, client section)",
    )


def _admin(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--admin",
        default=_from_environment(ADMIN_ENV, DEFAULT_ADMIN),
        metavar="URL",
        help=f"the broker's admin URL (default: ${ADMIN_ENV} if set, else {DEFAULT_ADMIN}; "
        "the flag wins)",
    )


def _json(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument(
        "--json", action="store_true", help=f"print {what} as one JSON document on stdout"
    )


def _topic(p: argparse.ArgumentParser) -> None:
    """The topic as a positional argument or, as Kafka's console tools take it, --topic."""
    p.add_argument("topic", nargs="?", help="the topic (or --topic NAME)")
    p.add_argument("--topic", dest="topic_option", metavar="NAME", help=argparse.SUPPRESS)


def add_commands(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create, alter, delete, list and describe topics")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    create = tsub.add_parser("create", help="create a topic")
    _topic(create)
    create.add_argument(
        "--partitions", type=int, default=-1, help="default: the broker's num.partitions"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="default: the broker's default.replication.factor",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="topic config, Kafka's names and values, e.g. cleanup.policy=compact "
        "(repeatable); docs/configs.md lists them",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="no error if the topic exists already"
    )
    _bootstrap(create)
    _command_config(create)
    lst = tsub.add_parser("list", help="list topic names")
    _json(lst, "the names")
    _bootstrap(lst)
    _command_config(lst)
    delete = tsub.add_parser(
        "delete",
        help="delete a topic and its records on every broker",
        description="Delete a topic (DeleteTopics): every broker drops its partitions and "
        "records; waiting produce and fetch requests are answered "
        "UNKNOWN_TOPIC_OR_PARTITION.",
    )
    _topic(delete)
    delete.add_argument("--if-exists", action="store_true", help="no error if it does not exist")
    _bootstrap(delete)
    _command_config(delete)
    alter = tsub.add_parser(
        "alter",
        help="add partitions to a topic",
        description="Add partitions to a topic (CreatePartitions), as kafka-topics.sh "
        "--alter does. Partitions are never removed: keys would move and offsets vanish.",
    )
    _topic(alter)
    alter.add_argument(
        "--partitions", type=int, required=True, help="the new total number of partitions"
    )
    alter.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="replicas of every partition, as kafka-topics.sh takes them (partitions "
        "separated by ',', a partition's brokers by ':'); the existing partitions' entries "
        "are skipped. Default: the controller places the new ones",
    )
    _bootstrap(alter)
    _command_config(alter)
    describe = tsub.add_parser(
        "describe", help="partitions, leaders, replicas and the configs topics set"
    )
    describe.add_argument("topics", nargs="*", help="default: all topics")
    describe.add_argument(
        "--topic", dest="topic_option", action="append", default=[], help=argparse.SUPPRESS
    )
    _json(describe, "every topic with its partitions")
    _bootstrap(describe)
    _command_config(describe)
    topics.set_defaults(func=lazy("purgatory.clients.cli.tools", "topics_command"))

    produce = sub.add_parser(
        "produce",
        help="produce one record per line of standard input",
        description="One record per line of standard input (a file, a pipe or a terminal). "
        "Every line is acknowledged or reported on stderr with its line number. Exit "
        "status: 0 all delivered, 1 some not, 130 pending records given up by a second "
        "Ctrl-C. The first Ctrl-C stops reading and waits for pending records.",
    )
    _topic(produce)
    produce.add_argument(
        "--key-separator",
        help="split each line into key and value at this string (default: no key)",
    )
    produce.add_argument(
        "--acks",
        "--request-required-acks",
        choices=("all", "-1", "0", "1"),
        help="acks: replicas that must have a record before it is acknowledged; all and -1 "
        "are the in-sync replicas (default: -1, as kafka-console-producer's "
        "--request-required-acks)",
    )
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument("--linger-ms", type=int, help="linger.ms (default 5)")
    produce.add_argument(
        "--timeout-ms",
        type=int,
        help="delivery.timeout.ms: how long a record may take to be acknowledged, retries "
        "included, before it is reported as not delivered (default 30000)",
    )
    produce.add_argument(
        "--max-request-size",
        type=int,
        help="max.request.size: the largest record sent, in bytes (default 1048576); the "
        "broker's message.max.bytes may refuse smaller ones",
    )
    produce.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a producer config by Kafka's name, e.g. batch.size=65536 (repeatable); a flag "
        "for the same config (--acks, --linger-ms, ...) wins over it, as in "
        "kafka-console-producer. Names: " + ", ".join(PRODUCER_PROPERTIES),
    )
    produce.add_argument(
        "--crlf",
        action="store_true",
        help="lines end with \\r\\n: drop the \\r (by default it is part of the value)",
    )
    _bootstrap(produce)
    _command_config(produce, "--producer.config", what="producer")
    produce.set_defaults(func=lazy("purgatory.clients.cli.tools", "produce_command"))

    consume = sub.add_parser("consume", help="print record values, one per line")
    _topic(consume)
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed one (default: only "
        "records produced from now on)",
    )
    consume.add_argument("--partition", type=int, help="read only this partition")
    consume.add_argument("--offset", type=int, help="start at this offset (needs --partition)")
    consume.add_argument(
        "--max-records",
        "--max-messages",  # kafka-console-consumer's name
        type=int,
        help="exit after this many records",
    )
    consume.add_argument(
        "--timeout-ms",
        type=int,
        help="exit when no record arrived for this long (default: wait forever)",
    )
    consume.add_argument("--group", help="commit positions for this group and resume from them")
    consume.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        help="read_committed: only committed transactions' records, up to the last stable "
        "offset (default read_uncommitted: every record, as kafka-console-consumer)",
    )
    consume.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a consumer config by Kafka's name, e.g. session.timeout.ms=10000 "
        "(repeatable). Names: " + ", ".join(CONSUMER_PROPERTIES),
    )
    consume.add_argument(
        "--print-key",
        action="store_true",
        help="print key<TAB>value; a record without a key prints null, as Kafka's console "
        "consumer does",
    )
    consume.add_argument("--print-offset", action="store_true", help="prefix partition:offset<TAB>")
    consume.add_argument(
        "--queued-max-message-chunks",
        type=int,
        default=2,
        help="chunks the fetcher may queue ahead of the application (default 2)",
    )
    consume.add_argument(
        "--fetch-message-max-bytes",
        type=int,
        default=1048576,
        help="bytes per partition per fetch, i.e. per chunk (default 1 MiB)",
    )
    consume.add_argument(
        "--metrics-port",
        type=int,
        help="serve this consumer's lag and fetch metrics at :PORT/metrics",
    )
    _bootstrap(consume)
    _command_config(consume, "--consumer.config", what="consumer")
    consume.set_defaults(func=lazy("purgatory.clients.cli.tools", "consume_command"))

    groups = sub.add_parser(
        "consumer-groups",
        help="list, describe, reset or delete consumer groups (kafka-consumer-groups.sh)",
        description="--list: every group and its state. --describe --group G: per "
        "partition, the committed offset, the log end offset, the lag between them and "
        "the member that holds it (--members: per member, its partitions). "
        "--reset-offsets --group G --topic T: move an empty group's offsets (a dry run "
        "unless --execute). --delete --group G: an empty group and its offsets.",
    )
    action = groups.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true", help="every group of the cluster")
    action.add_argument(
        "--describe", action="store_true", help="a group's offsets and lag per partition"
    )
    action.add_argument(
        "--reset-offsets",
        action="store_true",
        help="move an empty group's committed offsets (a dry run unless --execute)",
    )
    action.add_argument(
        "--delete", action="store_true", help="delete an empty group and its offsets"
    )
    groups.add_argument("--group", help="the group (all but --list)")
    groups.add_argument(
        "--topic",
        action="append",
        default=[],
        help="only these topics (repeatable); --reset-offsets needs them",
    )
    groups.add_argument("--members", action="store_true", help="with --describe: per member")
    groups.add_argument(
        "--state", action="append", default=[], help="with --list: only groups in this state"
    )
    groups.add_argument(
        "--type",
        action="append",
        default=[],
        choices=["classic", "consumer"],
        help="with --list: only groups of this type (consumer: KIP-848's protocol)",
    )
    target = groups.add_mutually_exclusive_group()
    target.add_argument(
        "--to-earliest", action="store_true", help="with --reset-offsets: each log's start"
    )
    target.add_argument(
        "--to-latest", action="store_true", help="with --reset-offsets: each log's end"
    )
    target.add_argument(
        "--to-offset",
        type=int,
        metavar="OFFSET",
        help="with --reset-offsets: this offset (kept within each log)",
    )
    target.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="with --reset-offsets: the committed offset plus N (negative: back)",
    )
    groups.add_argument(
        "--execute", action="store_true", help="with --reset-offsets: commit the new offsets"
    )
    _json(groups, "the rows")
    _bootstrap(groups)
    _command_config(groups)
    groups.set_defaults(
        func=lazy("purgatory.clients.cli.consumer_groups", "consumer_groups_command")
    )

    shares = sub.add_parser(
        "share-groups",
        help="list, describe or delete share groups (kafka-share-groups.sh)",
        description="--list: every share group (--state: with its state; --state "
        "stable,empty: only those). --describe --group G: per member, its consumer id, "
        "host, client id and assigned partitions (--members: the rows alone; --state: the "
        "group's coordinator, state and member count). --delete --group G: an empty share "
        "group.",
    )
    share_action = shares.add_mutually_exclusive_group()
    share_action.add_argument("--list", action="store_true", help="every share group")
    share_action.add_argument(
        "--describe", action="store_true", help="a share group's members and assignments"
    )
    share_action.add_argument("--delete", action="store_true", help="delete an empty share group")
    shares.add_argument("--group", help="the share group (all but --list)")
    shares.add_argument("--members", action="store_true", help="with --describe: per member")
    shares.add_argument(
        "--state",
        nargs="?",
        const="",
        action="append",
        metavar="STATES",
        help="with --describe: the group's state; with --list: each group's state, or "
        "only groups in these states (Empty, Stable, Dead; comma-separated)",
    )
    shares.add_argument(
        "--verbose", action="store_true", help="with --describe --state: the group epoch too"
    )
    _json(shares, "the rows")
    _bootstrap(shares)
    _command_config(shares)
    shares.set_defaults(func=lazy("purgatory.clients.cli.share_groups", "share_groups_command"))

    records = sub.add_parser(
        "delete-records",
        help="delete every record below an offset of some partitions (kafka-delete-records.sh)",
        description="Each partition's log then starts at its offset (-1: the high "
        "watermark), on every replica; consumers from the earliest start there. The "
        'offset file is Kafka\'s: {"partitions": [{"topic": "t", "partition": 0, '
        '"offset": 4}], "version": 1}. Exits 1 if any partition failed.',
    )
    records.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help="the partitions and the offset to delete up to, in Kafka's JSON format",
    )
    records.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="how long the leaders wait for every replica's log start (default 30000)",
    )
    _json(records, "each partition's low watermark or error")
    _bootstrap(records)
    _command_config(records)
    records.set_defaults(
        func=lazy("purgatory.clients.cli.delete_records", "delete_records_command")
    )

    election = sub.add_parser(
        "leader-election",
        help="elect preferred or unclean leaders of some partitions (kafka-leader-election.sh)",
        description="PREFERRED moves each partition's leadership to its first replica when "
        "that is a live in-sync replica; UNCLEAN gives a partition without a leader one, "
        "any live replica when no in-sync replica is (what only the lost in-sync replicas "
        "held is gone, as in Kafka). One of --topic with --partition, "
        '--all-topic-partitions, --path-to-json-file (Kafka\'s: {"partitions": '
        '[{"topic": "t", "partition": 0}]}). Exits 1 if any partition could not be elected.',
    )
    election.add_argument(
        "--election-type",
        required=True,
        metavar="PREFERRED|UNCLEAN",
        help="preferred: move leadership to the first replica; unclean: elect any live "
        "replica for a partition that has no leader (case does not matter)",
    )
    election.add_argument("--topic", metavar="NAME", help="the topic of --partition")
    election.add_argument("--partition", type=int, metavar="N", help="a partition of --topic")
    election.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="every partition (those that need no election are not listed, as in Kafka)",
    )
    election.add_argument(
        "--path-to-json-file", metavar="FILE", help="the partitions, in Kafka's JSON format"
    )
    election.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="how long to wait for the brokers to hold the new leaders (default 30000)",
    )
    _json(election, "each partition's outcome")
    _bootstrap(election)
    _command_config(election)
    election.set_defaults(
        func=lazy("purgatory.clients.cli.leader_election", "leader_election_command")
    )

    configs = sub.add_parser(
        "configs",
        help="describe or change topic and broker configs, SCRAM users and client quotas "
        "(kafka-configs.sh)",
        description="--alter changes a topic's configs, a broker's dynamic ones "
        "(--entity-name ID) or the cluster-wide default of every broker (--entity-default), "
        "through the controller, as IncrementalAlterConfigs: --add-config k=v[,k=v] (a list "
        "value in brackets: cleanup.policy=[compact,delete]) sets, --delete-config k[,k] "
        "puts back the default. --describe lists a topic's own configs. --entity-type users: "
        "SCRAM credentials, --add-config 'SCRAM-SHA-512=[iterations=8192,password=SECRET]' "
        "(the password salted here, never sent), --delete-config SCRAM-SHA-512, --describe "
        "(every user without --entity-name). Quotas of --entity-type users or clients (with "
        "--entity-name or --entity-default; --client C or --client-defaults beside a user): "
        "--add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152', "
        "--delete-config producer_byte_rate, --describe. Refused values are reported in "
        "Kafka's words; exits 1 then.",
    )
    mode = configs.add_mutually_exclusive_group()
    mode.add_argument("--describe", action="store_true", help="list the configs set")
    mode.add_argument("--alter", action="store_true", help="change configs")
    configs.add_argument(
        "--entity-type",
        required=True,
        metavar="topics|brokers|groups|users|clients",
        help="what to describe or change",
    )
    configs.add_argument(
        "--entity-name",
        metavar="NAME",
        help="the topic, the broker id, the group, the user or the client id",
    )
    configs.add_argument(
        "--entity-default",
        action="store_true",
        help="with --entity-type brokers: the cluster-wide default of every broker; with "
        "users or clients: the default user's or client id's quotas",
    )
    configs.add_argument(
        "--client",
        metavar="CLIENT_ID",
        help="with --entity-type users: that user's client's quotas",
    )
    configs.add_argument(
        "--client-defaults",
        action="store_true",
        help="with --entity-type users: the quotas of each client of the user",
    )
    configs.add_argument("--add-config", metavar="K=V[,K=V]", help="configs to set")
    configs.add_argument("--delete-config", metavar="K[,K]", help="configs to remove")
    _json(configs, "the outcome or the configs")
    _bootstrap(configs)
    _command_config(configs)
    configs.set_defaults(func=lazy("purgatory.clients.cli.configs", "configs_command"))

    acls = sub.add_parser(
        "acls",
        help="add, list and remove ACLs (kafka-acls.sh)",
        description="With the broker's authorizer (authorizer.class.name), ACLs decide what "
        "each principal may do. --add --allow-principal User:alice --operation Read --topic T "
        "allows (--deny-principal denies), --list shows the ACLs of the resources named (every "
        "ACL without one), --remove removes (asking first, or --force). --producer and "
        "--consumer add what a producer (Write, Describe, Create on the topics; Write and "
        "Describe on --transactional-id; IdempotentWrite on --cluster with --idempotent) or "
        "a consumer (Read, Describe on the topics, Read on --group) needs. Exits 1 on an "
        "error (SECURITY_DISABLED: the brokers have no authorizer).",
    )
    acl_mode = acls.add_mutually_exclusive_group(required=True)
    acl_mode.add_argument("--add", action="store_true", help="add ACLs")
    acl_mode.add_argument("--remove", action="store_true", help="remove ACLs")
    acl_mode.add_argument("--list", action="store_true", help="list ACLs")
    acls.add_argument("--topic", action="append", metavar="TOPIC", help="a topic (* for all)")
    acls.add_argument("--group", action="append", metavar="GROUP", help="a consumer group")
    acls.add_argument(
        "--transactional-id", action="append", metavar="ID", help="a transactional id"
    )
    acls.add_argument("--cluster", action="store_true", help="the cluster")
    acls.add_argument(
        "--resource-pattern-type",
        default="literal",
        metavar="literal|prefixed|any|match",
        help="how names match resources (default literal; any and match with --list and --remove)",
    )
    acls.add_argument(
        "--allow-principal", action="append", metavar="TYPE:NAME", help="allowed, repeatable"
    )
    acls.add_argument(
        "--deny-principal", action="append", metavar="TYPE:NAME", help="denied, repeatable"
    )
    acls.add_argument("--allow-host", action="append", metavar="HOST", help="default *")
    acls.add_argument("--deny-host", action="append", metavar="HOST", help="default *")
    acls.add_argument(
        "--operation",
        action="append",
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (default All); repeatable",
    )
    acls.add_argument("--principal", metavar="TYPE:NAME", help="with --list: this principal's")
    acls.add_argument("--producer", action="store_true", help="a producer's ACLs")
    acls.add_argument("--consumer", action="store_true", help="a consumer's ACLs")
    acls.add_argument(
        "--idempotent", action="store_true", help="with --producer --cluster: IdempotentWrite"
    )
    acls.add_argument("--force", action="store_true", help="with --remove: do not ask")
    _bootstrap(acls)
    _command_config(acls)
    acls.set_defaults(func=lazy("purgatory.clients.cli.acls", "acls_command"))


def add_admin_commands(sub: Any) -> None:
    admin = sub.add_parser(
        "admin",
        help="a broker's admin API (configs, faults, leader elections), a cluster's brokers",
    )
    asub = admin.add_subparsers(dest="admin_command", metavar="AREA", required=True)
    config = asub.add_parser("config", help="list configs, or change a dynamic one at run time")
    csub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    get = csub.add_parser("get", help="every config (or one) with value, default, source")
    get.add_argument("name", nargs="?", help="only this config (default: every config)")
    _json(get, "the configs")
    setter = csub.add_parser("set", help="change a dynamic config on that broker now")
    setter.add_argument("name", help="a dynamic config, e.g. replica.lag.time.max.ms")
    setter.add_argument("value", help="its new value")
    _json(setter, "the name, old and new value")
    for parser in (get, setter):
        _admin(parser)
        _token(parser)
    config.set_defaults(func=lazy("purgatory.clients.cli.admin_http", "config_command"))
    fault = asub.add_parser("fault", help="inject faults into a broker (latency, errors, ...)")
    fsub = fault.add_subparsers(dest="fault_command", metavar="ACTION", required=True)
    add = fsub.add_parser(
        "add",
        help="add a named fault",
        description="Examples: `fault add slow --kind latency --delay-ms 50 --jitter-ms 10`; "
        "`fault add flaky --kind error --api Produce --error-code NOT_LEADER_OR_FOLLOWER "
        "--probability 0.1`; `fault add freeze --kind pause --duration-ms 2000`; "
        "`fault add cut --kind disconnect --peers 1`.",
    )
    add.add_argument("name", help="the fault's name, to remove it by")
    add.add_argument(
        "--kind",
        required=True,
        choices=("latency", "error", "pause", "disconnect", "partition", "drop"),
        help="partition: cut this broker off from --peers (both ways); drop: lose what "
        "--peers send it (one way)",
    )
    add.add_argument("--delay-ms", type=float, help="latency: delay of received bytes")
    add.add_argument("--jitter-ms", type=float, help="latency: +/- uniform jitter")
    add.add_argument(
        "--peers",
        nargs="+",
        help="latency/disconnect: only these brokers (ids) or client ids, default all; "
        "partition/drop: the brokers (ids) cut off",
    )
    add.add_argument("--api", help="error: the API to fail (Produce, Fetch, Metadata, ...)")
    add.add_argument("--error-code", help="error: Kafka error name or number")
    add.add_argument("--times", type=int, help="error: fail this many requests, then stop")
    add.add_argument("--probability", type=float, help="error: fail each request with this")
    add.add_argument("--duration-ms", type=int, help="remove the fault after this long")
    fsub.add_parser("list", help="the faults in force")
    rm = fsub.add_parser("rm", aliases=["remove"], help="remove a fault by name")
    rm.add_argument("name", help="the fault to remove")
    fsub.add_parser("reset", help="remove every fault")
    for parser in dict.fromkeys(fsub.choices.values()):
        _admin(parser)
        _token(parser)
        _json(parser, "the broker's answer")
    fault.set_defaults(func=lazy("purgatory.clients.cli.admin_http", "fault_command"))

    elect = asub.add_parser(
        "elect-leaders",
        help="move leadership to preferred replicas, or elect a leader for offline partitions",
        description="Kafka's kafka-leader-election: --election-type preferred moves each "
        "partition's leadership to its first (preferred) replica if that is a live in-sync "
        "replica; unclean elects any live replica for a partition that has no leader (it "
        "may lose acknowledged records). Partitions: --all-topic-partitions, or --topic "
        "(with --partition).",
    )
    elect.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=("preferred", "unclean"),
        help="preferred: back to the first replica; unclean: any live replica of a "
        "partition without a leader",
    )
    target = elect.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    target.add_argument("--topic", help="one topic (every partition, or --partition)")
    elect.add_argument("--partition", type=int, help="one partition of --topic")
    _json(elect, "each partition's outcome")
    _bootstrap(elect)
    _command_config(elect)
    elect.set_defaults(func=lazy("purgatory.clients.cli.tools", "elect_leaders_command"))

    quorum = asub.add_parser(
        "quorum",
        help="the metadata quorum: its leader (the active controller), epoch, voters' lag",
        description="Kafka's kafka-metadata-quorum describe: the quorum's leader (the active "
        "controller), its epoch and high watermark, and how far each voter and observer "
        "lags (--replication). Any broker answers: it asks the leader.",
    )
    quorum.add_argument(
        "--replication", action="store_true", help="one row per replica: log end, lag, last fetch"
    )
    _json(quorum, "the status (and --replication rows)")
    _bootstrap(quorum)
    _command_config(quorum)
    quorum.set_defaults(func=lazy("purgatory.clients.cli.quorum", "quorum_command"))

    broker = asub.add_parser(
        "broker",
        help="stop, kill, pause or restart one broker of a `purgatory cluster`",
        description="Steer the brokers of a running `purgatory cluster` through its control "
        "endpoint. stop: SIGTERM, a controlled shutdown (leaderships move first); kill: "
        "SIGKILL, as a crash; pause/resume: SIGSTOP/SIGCONT, a frozen process; start, "
        "restart: a new process (its in-memory logs start empty), answered once healthy.",
    )
    broker.add_argument(
        "action",
        choices=("list", "start", "stop", "kill", "pause", "resume", "restart"),
        help="what to do (list: every broker and its state)",
    )
    broker.add_argument("id", nargs="?", type=int, help="the broker (all but list)")
    broker.add_argument(
        "--control",
        default=_from_environment(CONTROL_ENV, DEFAULT_CONTROL),
        metavar="URL",
        help="the cluster's control URL, as `purgatory cluster` prints it (default: "
        f"${CONTROL_ENV} if set, else {DEFAULT_CONTROL}; the flag wins)",
    )
    _json(broker, "the brokers")
    _token(broker)
    broker.set_defaults(func=lazy("purgatory.clients.cli.admin_http", "broker_command"))


def _token(parser: Any) -> None:
    parser.add_argument(
        "--token",
        default=None,
        help="the broker's admin.token, which changes need when its admin API listens "
        "beyond loopback (default: $PURGATORY_ADMIN_TOKEN)",
    )


def add_perf_commands(sub: Any) -> None:
    produce = sub.add_parser(
        "produce",
        help="produce load into a running cluster, like kafka-producer-perf-test",
        description="Pipelined produce requests into a running cluster (--bootstrap, "
        "default 127.0.0.1:9092, e.g. `make run`), to the topic --topic (default `perf`, "
        "created with --partitions if missing). --echo also runs a framed echo server "
        "(a process of its own) as the ceiling to compare with, the two taking turns.",
    )
    produce.add_argument(
        "--topic", default="perf", help="topic to write to; created if missing (default perf)"
    )
    produce.add_argument(
        "--num-records", type=int, default=100000, help="records to produce in all"
    )
    produce.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    produce.add_argument("--batch-size", type=int, default=1, help="records per produce request")
    produce.add_argument(
        "--acks",
        default="1",
        choices=("all", "-1", "0", "1"),
        help="acks of every produce request (default 1: the leader's log, so the broker's "
        "rate is not the replicas')",
    )
    produce.add_argument(
        "--throughput", type=float, default=-1, help="records/s limit; -1 for none"
    )
    produce.add_argument(
        "--max-in-flight", type=int, default=64, help="requests pipelined on the connection"
    )
    produce.add_argument("--partitions", type=int, default=1, help="partitions of a created topic")
    produce.add_argument("--duration", type=float, help="stop after this many seconds")
    produce.add_argument(
        "--echo",
        action="store_true",
        help="also run the framed echo server+client with the same requests and "
        "print the broker's rate as a fraction of it",
    )
    produce.add_argument(
        "--rounds",
        type=int,
        help="with --echo: turns the broker and the echo server take, each round "
        "num-records/rounds, so a machine whose speed drifts meets both alike "
        "(default 5)",
    )
    produce.add_argument("--json", action="store_true", help="print only the JSON summary")
    _bootstrap(produce)
    produce.set_defaults(func=lazy("purgatory.clients.perf.produce", "main"))

    consume = sub.add_parser("consume", help="consume load, like kafka-consumer-perf-test")
    consume.add_argument("--topic", default="perf", help="topic to read from the beginning")
    consume.add_argument(
        "--num-records", type=int, default=100000, help="stop after this many records"
    )
    consume.add_argument(
        "--fetch-max-bytes",
        type=int,
        default=1048576,
        help="max.partition.fetch.bytes of each fetch",
    )
    consume.add_argument(
        "--timeout-ms", type=int, default=10000, help="give up when no record arrives for this long"
    )
    consume.add_argument("--json", action="store_true", help="print only the JSON summary")
    _bootstrap(consume)
    consume.set_defaults(func=lazy("purgatory.clients.perf.consume", "main"))

    mock = sub.add_parser(
        "kafka-mock",
        help="confluent-kafka against librdkafka's mock cluster and against Purgatory, "
        "side by side: produce throughput and end-to-end latency",
    )
    mock.add_argument(
        "--num-records", type=int, default=200000, help="records of the throughput run"
    )
    mock.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    mock.add_argument("--rate", type=int, default=200, help="records/s of the latency run")
    mock.add_argument("--seconds", type=float, default=5.0, help="length of the latency run")
    mock.add_argument(
        "--target", choices=("both", "mock", "purgatory"), default="both", help="what to measure"
    )
    mock.add_argument(
        "--bootstrap",
        default=None,
        help="a running Purgatory cluster to measure (default: start 3 local brokers)",
    )
    mock.add_argument("--json", action="store_true", help="one line of JSON")
    mock.set_defaults(func=lazy("purgatory.experiments.kafka_mock", "main"))

    kprod = sub.add_parser(
        "kafka-produce",
        help="the Kafka listener's produce path: pipelined Produce v9 requests to one broker "
        "process (requests/s, broker CPU per request) beside the framed echo ceiling",
    )
    kprod.add_argument("--num-requests", type=int, default=30000, help="Produce requests sent")
    kprod.add_argument(
        "--records-per-batch", type=int, default=1, help="records in each request's batch"
    )
    kprod.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    kprod.add_argument(
        "--max-in-flight", type=int, default=32, help="requests pipelined on the connection"
    )
    kprod.add_argument("--json", action="store_true", help="one line of JSON")
    kprod.set_defaults(func=lazy("purgatory.experiments.kafka_produce", "main"))

    rebalance = sub.add_parser(
        "rebalance",
        help="a consumer group of N members forming and rebalancing after a leave: our "
        "client and confluent-kafka on Purgatory, confluent-kafka on librdkafka's mock",
    )
    rebalance.add_argument(
        "--members",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[10, 100, 1000],
        help="group sizes, comma separated (default 10,100,1000)",
    )
    rebalance.add_argument(
        "--clients", default="ours,confluent", help="ours and/or confluent (default both)"
    )
    rebalance.add_argument("--no-mock", action="store_true", help="skip librdkafka's mock cluster")
    rebalance.add_argument(
        "--confluent-max-members",
        type=int,
        default=100,
        help="larger groups are not run with confluent-kafka (default 100: 1000 librdkafka "
        "instances, about 4 threads each, did not settle on 2 cores, on either broker)",
    )
    rebalance.add_argument(
        "--partitions",
        type=int,
        default=4,
        help="partitions of the topic with --no-mock (else the mock's auto-created count)",
    )
    rebalance.add_argument(
        "--initial-delay-ms",
        type=int,
        default=3000,
        help="Purgatory's group.initial.rebalance.delay.ms (default 3000, as Kafka and the mock)",
    )
    rebalance.add_argument(
        "--session-timeout-ms", type=int, default=10000, help="every member's session.timeout.ms"
    )
    rebalance.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=500,
        help="every member's heartbeat.interval.ms",
    )
    rebalance.add_argument(
        "--quiet-ms",
        type=int,
        default=1000,
        help="a generation is final when no assignment changes for this long (default 1000)",
    )
    rebalance.add_argument(
        "--timeout", type=float, default=120.0, help="seconds a group may take to settle"
    )
    rebalance.add_argument("--json", action="store_true", help="one line of JSON")
    rebalance.set_defaults(func=lazy("purgatory.experiments.rebalance", "main"))

    cross = sub.add_parser(
        "cross-protocol",
        help="what one log serving both protocols costs: each consumer reading its own "
        "protocol's records and the other's, side by side",
    )
    cross.add_argument("--num-records", type=int, default=200000, help="records of each protocol")
    cross.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    cross.add_argument(
        "--bootstrap",
        default=None,
        help="a running Purgatory cluster to measure (default: start one local broker)",
    )
    cross.add_argument("--json", action="store_true", help="one line of JSON")
    cross.set_defaults(func=lazy("purgatory.experiments.cross_protocol", "main"))

    echo = sub.add_parser(
        "echo", help="bare framed echo server+client: the ceiling of any broker here"
    )
    echo.add_argument("--num-requests", type=int, default=200000, help="requests sent in all")
    echo.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    echo.add_argument("--batch-size", type=int, default=1, help="records per request")
    echo.add_argument(
        "--max-in-flight", type=int, default=64, help="requests pipelined on the connection"
    )
    echo.add_argument(
        "--server",
        choices=("protocol", "streams"),
        default="protocol",
        help="asyncio Protocol (as the broker) or asyncio streams, to compare",
    )
    echo.add_argument("--json", action="store_true", help="print only the JSON summary")
    echo.set_defaults(func=lazy("purgatory.clients.perf.echo", "main"))
