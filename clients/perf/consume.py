"""`purgatory perf consume`: read N records from the beginning of a topic with the Consumer."""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from typing import Any

from purgatory.clients.cli.interrupts import Interrupts
from purgatory.clients.connection import ConnectionClosed
from purgatory.clients.consumer import Consumer
from purgatory.clients.perf.progress import progress_of
from purgatory.clients.perf.running import run_benchmark
from purgatory.protocol.errors import KafkaError


class _Counter:
    done = 0


async def consume_load(args: argparse.Namespace, interrupts: Interrupts) -> dict[str, Any]:
    """Read up to --num-records; a signal ends the run after the poll under way, a second
    one at once (CancelledError)."""
    task = asyncio.current_task()
    assert task is not None

    def on_signal(name: str, count: int) -> None:
        if count > 1:
            task.cancel()

    interrupts.on_signal = on_signal
    counter = _Counter()
    async with Consumer(
        args.bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=args.fetch_max_bytes
    ) as consumer:
        await consumer.assign_topics([args.topic])
        await consumer.seek_to_beginning()
        records = 0
        record_bytes = 0
        fetches = 0
        start = time.perf_counter()
        last = start
        async with progress_of(counter, args.num_records, 1, enabled=not args.json):
            while records < args.num_records and not interrupts.count:
                batch = await consumer.poll(timeout_ms=500, max_records=args.num_records - records)
                fetches += 1
                now = time.perf_counter()
                if batch:
                    last = now
                    records += len(batch)
                    record_bytes += sum(len(r.value or b"") + len(r.key or b"") for r in batch)
                    counter.done = records
                elif (now - last) * 1000 > args.timeout_ms:
                    break
        elapsed = max(time.perf_counter() - start, 1e-9)
    return {
        "benchmark": "consume",
        "topic": args.topic,
        "records": records,
        "polls": fetches,
        "elapsed_s": round(elapsed, 3),
        "records_per_sec": round(records / elapsed, 1),
        "mb_per_sec": round(record_bytes / elapsed / 1e6, 3),
        "complete": records >= args.num_records,
    }


def main(args: argparse.Namespace) -> int:
    summary = run_benchmark(
        "perf consume",
        functools.partial(consume_load, args),
        failures=(KafkaError, ConnectionClosed, ValueError),
        given_up="given up (a second signal)",
        as_json=args.json,
    )
    if isinstance(summary, int):
        return summary
    if summary["interrupted"]:
        return 130
    return 0 if summary["complete"] else 1
