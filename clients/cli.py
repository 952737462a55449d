"""The code behind `purgatory topics|produce|consume`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import uvloop
from rich.console import Console
from rich.table import Table

from clients.admin import AdminClient
from clients.connection import ConnectionClosed
from clients.consumer import Consumer
from clients.producer import Producer
from protocol.errors import ErrorCode, KafkaError, error_name

err = Console(stderr=True)


def _run(coro: object, what: str) -> int:
    try:
        return int(uvloop.run(coro) or 0)  # type: ignore[arg-type]
    except (KafkaError, ConnectionClosed, ValueError) as exc:
        err.print(f"[red]purgatory {what}: {exc}[/red]")
        return 1


def topics_command(args: argparse.Namespace) -> int:
    return _run(_topics(args), f"topics {args.topics_command}")


async def _topics(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap) as admin:
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
        elif args.topics_command == "list":
            for name in await admin.list_topics():
                print(name)
        else:
            response = await admin.describe_topics(args.topics or None)
            if args.json:
                print(
                    json.dumps(
                        [
                            {
                                "name": t.name,
                                "topic_id": t.topic_id,
                                "error": error_name(t.error_code),
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
                        ],
                        indent=2,
                    )
                )
                return 1 if any(t.error_code for t in response.topics) else 0
            table = Table(
                title=f"cluster {response.cluster_id} (controller {response.controller_id})"
            )
            for column in ("topic", "partition", "leader", "replicas", "isr", "error"):
                table.add_column(column)
            for t in response.topics:
                if t.error_code:
                    table.add_row(t.name, "-", "-", "-", "-", error_name(t.error_code))
                for p in t.partitions:
                    table.add_row(
                        t.name,
                        str(p.partition_index),
                        str(p.leader_id),
                        ",".join(map(str, p.replica_nodes)),
                        ",".join(map(str, p.isr_nodes)),
                        "",
                    )
            Console().print(table)
            return 1 if any(t.error_code for t in response.topics) else 0
    return 0


def produce_command(args: argparse.Namespace) -> int:
    return _run(_produce(args), "produce")


async def _produce(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sent = 0
    skipped = 0
    failed = 0
    async with Producer(args.bootstrap, acks=args.acks, linger_ms=args.linger_ms) as producer:
        futures = []
        while line := await reader.readline():
            text = line.rstrip(b"\r\n")
            key = None
            if args.key_separator is not None:
                sep = args.key_separator.encode()
                if sep not in text:
                    skipped += 1
                    err.print(
                        f"[yellow]a line has no key separator {args.key_separator!r}; skipped[/yellow]"
                    )
                    continue
                key, text = text.split(sep, 1)
            futures.append(await producer.send(args.topic, text, key, partition=args.partition))
            sent += 1
        await producer.flush()
        for future in futures:
            if future.exception() is not None:
                failed += 1
                if failed <= 5:
                    err.print(f"[red]{future.exception()}[/red]")
    err.print(
        f"produced {sent - failed} of {sent} record(s)"
        + (f", skipped {skipped} line(s)" if skipped else "")
    )
    return 1 if failed or skipped else 0


def consume_command(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        err.print("[red]purgatory consume: --offset needs --partition[/red]")
        return 2
    return _run(_consume(args), "consume")


async def _consume(args: argparse.Namespace) -> int:
    reset = "earliest" if args.from_beginning else "latest"
    async with Consumer(
        args.bootstrap,
        group_id=args.group,
        auto_offset_reset=reset,
        queued_max_message_chunks=args.queued_max_message_chunks,
        fetch_message_max_bytes=args.fetch_message_max_bytes,
    ) as consumer:
        metrics = None
        if args.metrics_port is not None:
            from clients.consumer_metrics import serve_metrics

            metrics = await serve_metrics(consumer, "127.0.0.1", args.metrics_port)
            err.print(f"metrics at http://127.0.0.1:{args.metrics_port}/metrics")
        if args.partition is not None:
            await consumer.cluster.ensure_topics([args.topic], auto_create=False)
            consumer.assign([(args.topic, args.partition)])
            if args.offset is not None:
                consumer.seek((args.topic, args.partition), args.offset)
        else:
            await consumer.assign_topics([args.topic])
        if args.from_beginning and args.offset is None and args.group is None:
            await consumer.seek_to_beginning()
        count = 0
        out = sys.stdout.buffer
        loop = asyncio.get_running_loop()
        last = loop.time()
        while args.max_records is None or count < args.max_records:
            remaining = None if args.max_records is None else args.max_records - count
            records = await consumer.poll(timeout_ms=500, max_records=remaining)
            for r in records:
                prefix = f"{r.partition}:{r.offset}\t".encode() if args.print_offset else b""
                if args.print_key:
                    prefix += (r.key or b"") + b"\t"
                out.write(prefix + (r.value or b"") + b"\n")
            out.flush()
            count += len(records)
            if records:
                last = loop.time()
                if args.group is not None:
                    await consumer.commit()
            elif args.timeout_ms is not None and (loop.time() - last) * 1000 >= args.timeout_ms:
                break
        if metrics is not None:
            await metrics.cleanup()
        err.print(f"consumed {count} record(s)")
    return 0


def consumer_groups_command(args: argparse.Namespace) -> int:
    return _run(_describe_group(args), "consumer-groups")


async def _describe_group(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap) as admin:
        topics = args.topic or await admin.list_topics()
        await admin.cluster.ensure_topics(topics, auto_create=False)
        tps = [
            (t, p.partition_index) for t in topics for p in admin.cluster.partitions_for(t) or []
        ]
        committed = await admin.group_offsets(args.group, tps) if tps else {}
        shown = tps if args.topic else [tp for tp in tps if tp in committed]
        ends = await admin.log_end_offsets(shown) if shown else {}
    rows = []
    for tp in shown:
        offset, owner = committed.get(tp, (None, None))
        rows.append(
            {
                "group": args.group,
                "topic": tp[0],
                "partition": tp[1],
                "offset": offset,
                "log_end_offset": ends[tp],
                "lag": None if offset is None else max(ends[tp] - offset, 0),
                "owner": owner,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        err.print(
            f"group {args.group!r} has no committed offsets"
            + (f" for {', '.join(args.topic)}" if args.topic else "")
        )
        return 0
    table = Table(title=f"consumer group {args.group}")
    for column in ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["group"],
            r["topic"],
            str(r["partition"]),
            "-" if r["offset"] is None else str(r["offset"]),
            str(r["log_end_offset"]),
            "-" if r["lag"] is None else str(r["lag"]),
            r["owner"] or "-",
        )
    Console().print(table)
    return 0
