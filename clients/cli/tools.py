"""The code behind `purgatory topics|produce|consume`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import structlog
import uvloop

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.client_config import admin_client, file_properties
from purgatory.clients.cli.commands import DEFAULT_BOOTSTRAP
from purgatory.clients.cli.interrupts import Interrupts
from purgatory.clients.cli.output import err, print_json, print_table, table
from purgatory.clients.cli.properties import CONSUMER_PROPERTIES, client_properties
from purgatory.clients.cluster import UnknownTopicError
from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.consumer import Consumer
from purgatory.protocol.errors import ErrorCode, KafkaError, error_name


def _run(coro: object, what: str, bootstrap: str = DEFAULT_BOOTSTRAP) -> int:
    try:
        return int(uvloop.run(coro) or 0)  # type: ignore[arg-type]
    except UnknownTopicError as exc:
        err.print(f"[red]purgatory {what}: {exc}[/red]", soft_wrap=True)
        where = "" if bootstrap == DEFAULT_BOOTSTRAP else f" --bootstrap {bootstrap}"
        err.print(f"create it first: purgatory topics create {exc.topic}{where}", soft_wrap=True)
        return 1
    except BrokenPipeError:
        raise  # the reader of stdout is gone (`| head`): the shell's habit is a quiet exit
    except (KafkaError, ConnectionClosed, ValueError, OSError) as exc:
        err.print(f"[red]purgatory {what}: {exc}[/red]", soft_wrap=True)
        return 1


def topic_of(args: argparse.Namespace) -> str:
    """The topic, given as the positional argument or as ``--topic`` (Kafka's habit)."""
    positional, option = args.topic, args.topic_option
    if positional and option and positional != option:
        args.command_parser.error(f"two topics given: {positional!r} and --topic {option!r}")
    topic = positional or option
    if not topic:
        args.command_parser.error("a topic is needed: TOPIC or --topic TOPIC")
    return str(topic)


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's ``--replica-assignment``: ``0:1,1:2`` is partition 0 on brokers
    0 and 1, partition 1 on brokers 1 and 2."""
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--replica-assignment expects broker ids like 0:1,1:2,2:0, got {text!r}"
        ) from None


async def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    assignments = None
    if args.replica_assignment:
        described = await admin.describe_topics([args.topic])
        existing = sum(len(t.partitions) for t in described.topics if t.error_code == 0)
        given = parse_replica_assignment(args.replica_assignment)
        assignments = {args.topic: given[existing:]}
    [result] = await admin.create_partitions({args.topic: args.partitions}, assignments=assignments)
    if result.error_code != ErrorCode.NONE:
        raise KafkaError(result.error_code, result.error_message)
    print(f"topic {args.topic} now has {args.partitions} partition(s)")
    return 0


def topics_command(args: argparse.Namespace) -> int:
    if args.topics_command in ("create", "delete", "alter"):
        args.topic = topic_of(args)
    elif args.topics_command == "describe":
        args.topics = [*args.topics, *args.topic_option]
    return _run(_topics(args), f"topics {args.topics_command}")


async def _topics(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        if args.topics_command == "create":
            configs = {}
            for item in args.config:
                name, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"--config expects name=value, got {item!r}")
                configs[name.strip()] = value.strip()
            try:
                result = await admin.create_topic(
                    args.topic, args.partitions, args.replication_factor, configs
                )
            except KafkaError as exc:
                if args.if_not_exists and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return 0
                raise
            print(
                f"created topic {result.name} with {result.num_partitions} partition(s), "
                f"replication factor {result.replication_factor}"
            )
        elif args.topics_command == "delete":
            try:
                await admin.delete_topic(args.topic)
            except KafkaError as exc:
                if args.if_exists and exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    return 0
                raise
            print(f"deleted topic {args.topic}")
        elif args.topics_command == "alter":
            return await _alter(admin, args)
        elif args.topics_command == "list":
            names = await admin.list_topics()
            if args.json:
                print_json(names)
            else:
                for name in names:
                    print(name)
        else:
            response = await admin.describe_topics(args.topics or None)
            if args.json:
                print_json(
                    [
                        {
                            "name": t.name,
                            "topic_id": t.topic_id,
                            "error": error_name(t.error_code),
                            "configs": t.configs,
                            "partitions": [
                                {
                                    "partition": p.partition_index,
                                    "leader": p.leader_id,
                                    "leader_epoch": p.leader_epoch,
                                    "replicas": p.replica_nodes,
                                    "isr": p.isr_nodes,
                                }
                                for p in t.partitions
                            ],
                        }
                        for t in response.topics
                    ]
                )
                return 1 if any(t.error_code for t in response.topics) else 0
            rows: list[tuple[object, ...]] = []
            for t in response.topics:
                if t.error_code:
                    rows.append((t.name, None, None, None, None, error_name(t.error_code), ""))
                # As kafka-topics --describe: the configs that are not defaults (the
                # topic's own and those the broker's config sets), on its first row.
                shown = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
                rows += [
                    (
                        t.name,
                        p.partition_index,
                        p.leader_id,
                        ",".join(map(str, p.replica_nodes)),
                        ",".join(map(str, p.isr_nodes)),
                        "",
                        "" if i else shown,
                    )
                    for i, p in enumerate(t.partitions)
                ]
            title = f"cluster {response.cluster_id} (controller {response.controller_id})"
            columns = ("topic", "partition", "leader", "replicas", "isr", "error", "configs")
            print_table(table(title, columns, rows))
            return 1 if any(t.error_code for t in response.topics) else 0
    return 0


def produce_command(args: argparse.Namespace) -> int:
    from purgatory.clients.cli.console_producer import ConsoleProducer, producer_settings

    topic = topic_of(args)
    try:
        settings = producer_settings(args)
    except (ValueError, OSError) as exc:
        args.command_parser.error(str(exc))
    producer = ConsoleProducer(args, topic, settings)
    with Interrupts(producer.on_signal):
        return _run(producer.run(), "produce", args.bootstrap)


def consume_command(args: argparse.Namespace) -> int:
    args.topic = topic_of(args)
    if args.offset is not None and args.partition is None:
        args.command_parser.error("--offset needs --partition")
    try:
        args.consumer_kwargs = file_properties(
            "--consumer.config", args.command_config, CONSUMER_PROPERTIES, "consumer"
        ) | client_properties("--consumer-property", args.consumer_property, CONSUMER_PROPERTIES)
    except (ValueError, OSError) as exc:
        args.command_parser.error(str(exc))
    with Interrupts() as interrupts:
        return _run(_consume(args, interrupts), "consume", args.bootstrap)


REBALANCING = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)


def client_logging() -> None:
    """Library warnings (a partition without a leader, ...) go to stderr, once per change,
    never into the records printed on stdout."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def record_line(
    record_key: bytes | None, value: bytes | None, prefix: bytes, print_key: bool
) -> bytes:
    """One record as `purgatory consume` prints it: ``[prefix][key<TAB>]value``, a missing
    key or value as ``null`` (Kafka's console consumer prints them so)."""
    line = prefix
    if print_key:
        line += (b"null" if record_key is None else record_key) + b"\t"
    return line + (b"null" if value is None else value) + b"\n"


async def _consume(args: argparse.Namespace, interrupts: Interrupts) -> int:
    """Print records until --max-records, --timeout-ms or a signal: the first Ctrl-C ends
    after the poll under way (what it returned is printed, and committed with --group),
    a second gives up at once. The count is printed on stderr in every case."""
    client_logging()
    stop = asyncio.Event()
    main = asyncio.current_task()
    assert main is not None

    def on_signal(name: str, count: int) -> None:
        stop.set()
        if count > 1:
            main.cancel()

    interrupts.on_signal = on_signal
    if interrupts.count:  # before the loop ran
        stop.set()
    count = 0
    reading = False
    try:
        async with Consumer(
            args.bootstrap,
            group_id=args.group,
            auto_offset_reset="earliest" if args.from_beginning else "latest",
            queued_max_message_chunks=args.queued_max_message_chunks,
            fetch_message_max_bytes=args.fetch_message_max_bytes,
            **{
                **({"isolation_level": args.isolation_level} if args.isolation_level else {}),
                **args.consumer_kwargs,
            },
        ) as consumer:
            metrics = None
            if args.metrics_port is not None:
                from purgatory.clients.consumer_metrics import serve_metrics

                metrics = await serve_metrics(consumer, "127.0.0.1", args.metrics_port)
                err.print(f"metrics at http://127.0.0.1:{args.metrics_port}/metrics")
            await _start_reading(consumer, args)
            reading = True
            out = sys.stdout.buffer
            loop = asyncio.get_running_loop()
            last = loop.time()
            while not stop.is_set() and (args.max_records is None or count < args.max_records):
                remaining = None if args.max_records is None else args.max_records - count
                records = await consumer.poll(timeout_ms=500, max_records=remaining)
                for r in records:
                    prefix = f"{r.partition}:{r.offset}\t".encode() if args.print_offset else b""
                    out.write(record_line(r.key, r.value, prefix, args.print_key))
                out.flush()
                count += len(records)
                if records:
                    last = loop.time()
                    if args.group is not None:
                        await _commit(consumer)
                elif args.timeout_ms is not None and (loop.time() - last) * 1000 >= args.timeout_ms:
                    break
            if metrics is not None:
                await metrics.stop()
    except asyncio.CancelledError:
        if interrupts.count < 2:
            raise
    finally:
        if reading or interrupts.count:
            err.print(f"Processed a total of {count} messages")  # as kafka-console-consumer
    return 130 if interrupts.count else 0


async def _start_reading(consumer: Consumer, args: argparse.Namespace) -> None:
    """Assign, subscribe or seek as the options ask."""
    if args.partition is not None:
        await consumer.cluster.ensure_topics([args.topic], auto_create=False)
        count = len(consumer.cluster.partitions_for(args.topic) or [])
        if not 0 <= args.partition < count:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{args.topic} has {count} partition(s); there is no partition {args.partition}",
            )
        consumer.assign([(args.topic, args.partition)])
        if args.offset is not None:
            consumer.seek((args.topic, args.partition), args.offset)
    elif args.group is not None:
        consumer.subscribe([args.topic])  # the group shares the partitions out
    else:
        await consumer.assign_topics([args.topic])
    if args.from_beginning and args.offset is None and args.group is None:
        await consumer.seek_to_beginning()


async def _commit(consumer: Consumer) -> None:
    try:
        await consumer.commit()
    except KafkaError as exc:
        # Retriable: committed with the next records. A rebalance: the consumer rejoins
        # and commits before it gives partitions up.
        if not exc.retriable and exc.code not in REBALANCING:
            raise


def elect_leaders_command(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        args.command_parser.error("--partition needs --topic")
    return _run(_elect_leaders(args), "admin elect-leaders", args.bootstrap)


async def _elect_leaders(args: argparse.Namespace) -> int:
    from purgatory.protocol import messages as m

    kind = m.PREFERRED_ELECTION if args.election_type == "preferred" else m.UNCLEAN_ELECTION
    async with admin_client(args) as admin:
        partitions: list[tuple[str, int]] | None = None
        if args.topic is not None:
            if args.partition is not None:
                partitions = [(args.topic, args.partition)]
            else:
                meta = await admin.describe_topics([args.topic])
                topic = meta.topics[0]
                if topic.error_code:
                    raise KafkaError(topic.error_code, f"topic {args.topic!r}")
                partitions = [(args.topic, p.partition_index) for p in topic.partitions]
        results = await admin.elect_leaders(kind, partitions)
    rows = [
        {"topic": t, "partition": p, "error": error_name(code), "message": message}
        for (t, p), (code, message) in sorted(results.items())
    ]
    if args.json:
        print_json(rows)
    else:
        elected = [f"{r['topic']}-{r['partition']}" for r in rows if r["error"] == "NONE"]
        not_needed = [
            f"{r['topic']}-{r['partition']}" for r in rows if r["error"] == "ELECTION_NOT_NEEDED"
        ]
        if elected:
            print(f"Successfully completed leader election ({args.election_type}) for: "
                  + ", ".join(elected))  # fmt: skip
        if not_needed:
            print("Valid replica already elected for: " + ", ".join(not_needed))
        for r in rows:
            if r["error"] not in ("NONE", "ELECTION_NOT_NEEDED"):
                err.print(
                    f"[red]{r['topic']}-{r['partition']}: {r['error']}: {r['message']}[/red]",
                    soft_wrap=True,
                )
    # As kafka-leader-election: a partition that could not get the leader asked for fails it.
    failed = any(r["error"] not in ("NONE", "ELECTION_NOT_NEEDED") for r in rows)
    return 1 if failed else 0
