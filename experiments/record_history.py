"""What happened to every record a load sent, checked against the log read back: Kafka's
promise is that each acknowledged record is there, at the offset it was acknowledged at,
once (the leader-failover scenario's history and its verdict)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from purgatory.clients import AdminClient, Consumer

Log = dict[int, list[tuple[int, bytes]]]  # partition -> (offset, value) as read back


@dataclass
class Outcome:
    """One record's history: acknowledged at ``offset`` or failed with ``error``."""

    topic: str
    partition: int
    producer: int
    seq: int
    sent_ts: float
    ts: float  # when the outcome arrived
    offset: int = -1
    error: str | None = None

    @property
    def value(self) -> bytes:
        return f"{self.topic}/{self.producer}/{self.seq}".encode()


async def read_back(bootstrap: str, topic: str, partitions: int) -> Log:
    """Every record of ``topic`` up to each partition's high watermark: (offset, value)."""
    tps = [(topic, p) for p in range(partitions)]
    async with AdminClient(bootstrap) as admin:
        ends = await admin.log_end_offsets(tps)
    got: Log = {p: [] for p in range(partitions)}
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign(tps)
        deadline = time.monotonic() + 60
        while any((got[p][-1][0] + 1 if got[p] else 0) < ends[(topic, p)] for p in got):
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not read {topic} back to its high watermarks {ends}")
            for record in await c.poll(timeout_ms=500):
                if record.offset < ends[(topic, record.partition)]:
                    got[record.partition].append((record.offset, record.value or b""))
    return got


def check(outcomes: list[Outcome], log: Log) -> tuple[dict[str, Any], list[Outcome]]:
    """Each acknowledged record at its offset exactly once, in send order per producer and
    partition: the figures of what was lost, duplicated or failed, and the lost records
    (acknowledged, but not at their offset: gone, or replaced)."""
    at = {(p, offset): value for p, records in log.items() for offset, value in records}
    copies = Counter(value for records in log.values() for _, value in records)
    acked = [o for o in outcomes if o.error is None]
    lost = [o for o in acked if at.get((o.partition, o.offset)) != o.value]
    last: dict[tuple[int, int], int] = {}
    out_of_order = 0
    for o in sorted(acked, key=lambda o: (o.producer, o.partition, o.seq)):
        if o.offset <= last.get((o.producer, o.partition), -1):
            out_of_order += 1
        last[(o.producer, o.partition)] = o.offset
    failed = [o for o in outcomes if o.error is not None]
    figures = {
        "acked": len(acked),
        "failed": len(failed),
        "failed_but_written": sum(1 for o in failed if copies[o.value]),
        "errors": dict(Counter((o.error or "").split(":")[0] for o in failed)),
        "lost": len(lost),
        "lost_by_partition": dict(Counter(str(o.partition) for o in lost)),
        # Lost records whose offset now holds another record: the offset was reused.
        "offsets_reused": sum(1 for o in lost if (o.partition, o.offset) in at),
        "lost_sample": [
            {"partition": o.partition, "offset": o.offset, "value": o.value.decode()}
            for o in lost[:5]
        ],
        "duplicates": sum(n - 1 for n in copies.values() if n > 1),
        "out_of_order": out_of_order,
        "records_in_log": sum(len(r) for r in log.values()),
    }
    return figures, lost


def unavailability(
    outcomes: list[Outcome], partitions: list[int], since: float, all_partitions: int
) -> dict[str, Any]:
    """Per partition: from ``since`` (the kill) to its first acknowledgement after it, ms;
    for the other partitions the longest such wait (their records kept flowing)."""

    def first_ack(p: int) -> float | None:
        return min(
            (o.ts for o in outcomes if o.partition == p and o.error is None and o.ts > since),
            default=None,
        )

    def ms(ts: float | None) -> float | None:
        return None if ts is None else round((ts - since) * 1000, 1)

    others = [ms(first_ack(p)) for p in range(all_partitions) if p not in partitions]
    return {
        "window_ms": {str(p): ms(first_ack(p)) for p in partitions},
        "other_partitions_max_ms": max((x for x in others if x is not None), default=None),
    }
