"""`purgatory perf log-cleaner`: the log cleaner's effect and its event-loop stalls.

Builds one compacted in-memory log of ``--updates`` records over ``--keys`` keys (Kafka v2
batches of ``--batch`` records, ``--codec``, ``--value-bytes`` values, ``--segment-bytes``
segments), cleans it once as the broker does (a slice per step), and reports records and
bytes before and after, the number of slices and the wall and CPU time of each (the longest is
the longest stall the cleaner puts on the event loop; CPU time leaves out a loaded
machine's waits) and of the whole cleaning.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from purgatory.broker.log.cleaner.cleaner import Cleaning
from purgatory.broker.log.cleaner.cleaner_manager import cleanable_range
from purgatory.broker.log.log import Log, LogConfig
from purgatory.protocol import kafka_records
from purgatory.protocol.records import validate_batch

_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_log(args: argparse.Namespace) -> Log:
    log = Log(LogConfig(segment_bytes=args.segment_bytes, compact=True))
    codec = _CODECS[args.codec]
    now = int(time.time() * 1000)
    value = b"v" * args.value_bytes
    for start in range(0, args.updates, args.batch):
        records = [
            (now, b"key-%d" % (i % args.keys), value, ()) for i in range(start, start + args.batch)
        ]
        batch = kafka_records.encode(records)
        if codec:
            batch = kafka_records.with_records(_with_codec(batch, codec), _plain_records(batch))
        log.append(batch, validate_batch(batch), 0)
    return log


def _with_codec(batch: bytes, codec: int) -> bytes:
    out = bytearray(batch)
    out[22] = (out[22] & ~kafka_records.CODEC_MASK & 0xFF) | codec
    return bytes(out)


def _plain_records(batch: bytes) -> list[bytes]:
    return [entry[3] for entry in kafka_records.record_entries(batch)]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    log = build_log(args)
    records_before, bytes_before = _count(log), log.size_bytes
    _, end = cleanable_range(log, log.log_end_offset, int(time.time() * 1000))
    cleaning = Cleaning(log, end, int(time.time() * 1000), {}, slice_records=args.slice_records)
    slices: list[float] = []
    cpu: list[float] = []
    steps = cleaning.slices()
    started = time.perf_counter()
    done = False
    while not done:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            next(steps)
        except StopIteration:
            done = True
        slices.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    total = time.perf_counter() - started
    slices.sort()
    cpu.sort()
    stats = cleaning.stats
    return {
        "updates": args.updates,
        "keys": args.keys,
        "batch_records": args.batch,
        "codec": args.codec,
        "segment_bytes": args.segment_bytes,
        "slice_records": args.slice_records,
        "records_before": records_before,
        "records_after": _count(log),
        "bytes_before": bytes_before,
        "bytes_after": log.size_bytes,
        "segments_after": len(log.segments),
        "records_read": stats.records_read + stats.map_records,
        "slices": len(slices),
        "slice_ms_p50": round(slices[len(slices) // 2] * 1000, 3),
        "slice_ms_p99": round(slices[min(len(slices) - 1, int(len(slices) * 0.99))] * 1000, 3),
        "slice_ms_max": round(slices[-1] * 1000, 3),
        "slice_cpu_ms_p50": round(cpu[len(cpu) // 2] * 1000, 3),
        "slice_cpu_ms_p99": round(cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))] * 1000, 3),
        "slice_cpu_ms_max": round(cpu[-1] * 1000, 3),
        "clean_ms": round(total * 1000, 1),
        "us_per_record": round(total * 1e6 / max(1, stats.records_read + stats.map_records), 2),
    }


def _count(log: Log) -> int:
    return sum(int.from_bytes(b[57:61], "big") for segment in log.segments for b in segment.batches)


def main(args: argparse.Namespace) -> int:
    result = measure(args)
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name:>16}  {value}")
    return 0
