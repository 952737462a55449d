"""The chaos scenario's checker, beyond the record history's (record_history.check): the
replicas agree batch for batch, no quorum epoch had two leaders, no consumer was shown a
record the log later lost, and how long failovers took against their bound."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from purgatory.experiments.kafka_clients import Seen
from purgatory.experiments.nemesis import FAILOVER_KINDS, Fault
from purgatory.experiments.processes import Brokers, admin_call
from purgatory.experiments.record_history import Log


class ReplicaVerifier:
    """Compares every broker's replica of each partition batch by batch (offsets and a
    CRC-32 of the bytes, ``GET /v1/partitions/<t>/<p>/batches``), below the lowest high
    watermark of the replicas (committed there, so it must be equal everywhere) or, once
    the cluster is quiet, to the end. What was found equal is not read again."""

    def __init__(self, brokers: Brokers, topic: str, partitions: int) -> None:
        self.brokers = brokers
        self.topic = topic
        self.verified_to = dict.fromkeys(range(partitions), 0)
        self.compared = 0  # batches found equal on every replica
        self.divergent: list[dict[str, Any]] = []
        self._reported: set[tuple[int, int]] = set()

    async def ends(self, partition: int) -> dict[int, tuple[int, int]]:
        """broker -> (log end offset, high watermark) of its replica of ``partition``."""
        out = {}
        for broker_id, base in self.brokers.admins.items():
            with contextlib.suppress(RuntimeError, OSError):
                replica = await admin_call(
                    base, "GET", f"/v1/partitions/{self.topic}/{partition}/batches?from={1 << 62}"
                )
                out[broker_id] = (replica["log_end_offset"], replica["high_watermark"])
        return out

    async def quiesce(self, timeout: float) -> bool:
        """Wait (the load stopped) until every replica of every partition has the same log
        end offset, all of it committed; False if that did not happen within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ends = [await self.ends(p) for p in self.verified_to]
            if all(len(set(e.values())) == 1 and len(e) > 1 for e in ends) and all(
                leo == hw for e in ends for leo, hw in e.values()
            ):
                return True
            await asyncio.sleep(0.2)
        return False

    async def verify(self, to_end: bool = False) -> None:
        for partition, start in self.verified_to.items():
            replicas: dict[int, dict[str, Any]] = {}
            for broker_id, base in self.brokers.admins.items():
                try:
                    replicas[broker_id] = await admin_call(
                        base, "GET", f"/v1/partitions/{self.topic}/{partition}/batches?from={start}"
                    )
                except (RuntimeError, OSError):
                    continue  # not a replica of it, or not answering: compared next time
            if len(replicas) < 2:
                continue
            if to_end:
                ends = {r["log_end_offset"] for r in replicas.values()}
                if len(ends) > 1:
                    self.divergent.append(
                        {
                            "partition": partition,
                            "problem": "log end offsets differ once quiet",
                            "log_end_offsets": {
                                b: r["log_end_offset"] for b, r in replicas.items()
                            },
                        }
                    )
                limit = min(ends)
            else:
                limit = min(r["high_watermark"] for r in replicas.values())
            self._compare(partition, replicas, limit)

    def _compare(self, partition: int, replicas: dict[int, dict[str, Any]], limit: int) -> None:
        held = {
            broker_id: {base: (end, crc) for base, end, crc in r["batches"] if end <= limit}
            for broker_id, r in replicas.items()
        }
        for base in sorted(set().union(*held.values())):
            copies = {b: batches.get(base) for b, batches in held.items()}
            distinct = set(copies.values())
            if len(distinct) > 1:  # reported once; nothing past it is verified
                if (partition, base) not in self._reported:
                    self._reported.add((partition, base))
                    self.divergent.append(
                        {"partition": partition, "base_offset": base, "copies": copies}
                    )
                return
            end, _ = distinct.pop()  # type: ignore[misc]
            self.compared += 1
            self.verified_to[partition] = end

    def figures(self) -> dict[str, Any]:
        return {
            "batches_compared": self.compared,
            "divergent": len(self.divergent),
            "divergent_sample": self.divergent[:5],
        }


def quorum_leaders(log_dir: Path) -> dict[int, set[int]]:
    """Quorum epoch -> the brokers that logged becoming its leader (``quorum_leader_elected``
    in their JSON logs, one file per broker; a line cut by kill -9 is skipped)."""
    leaders: dict[int, set[int]] = defaultdict(set)
    for path in sorted(log_dir.glob("broker-*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "quorum_leader_elected" not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "quorum_leader_elected":
                    leaders[int(event["epoch"])].add(int(event["broker_id"]))
    return leaders


def controller_figures(log_dir: Path) -> dict[str, Any]:
    leaders = quorum_leaders(log_dir)
    return {
        "quorum_epochs_with_a_leader": len(leaders),
        "epochs_with_two_leaders": {
            str(epoch): sorted(brokers)
            for epoch, brokers in sorted(leaders.items())
            if len(brokers) > 1
        },
    }


def consumed_figures(seen: Seen, log: Log, reread_differently: int) -> dict[str, Any]:
    """What a consumer was given against the final log: each record must be there, at the
    offset it was read at (a consumer reads only what the ISR holds)."""
    at = {(p, offset): value for p, records in log.items() for offset, value in records}
    read = [(p, offset, value) for p, offsets in seen.items() for offset, value in offsets.items()]
    gone = [(p, offset) for p, offset, value in read if at.get((p, offset)) != value]
    return {
        "read": len(read),
        "not_in_the_log": len(gone),
        "not_in_the_log_sample": gone[:5],
        "read_twice_differently": reread_differently,
    }


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def failover_figures(faults: Iterable[Fault], bound_ms: float) -> dict[str, Any]:
    """Per fault kind: how many, and p50/p99/max of the leader and controller failovers;
    and every failover over ``bound_ms`` (session timeout + 1 s)."""
    faults = list(faults)
    by_kind: dict[str, Any] = {}
    over: list[dict[str, Any]] = []
    for kind in sorted({f.kind for f in faults}):
        mine = [f for f in faults if f.kind == kind]
        entry: dict[str, Any] = {"count": len(mine)}
        for measure in ("failover_ms", "controller_failover_ms", "recovered_ms"):
            values = [getattr(f, measure) for f in mine if getattr(f, measure) is not None]
            if values:
                entry[measure] = {
                    "n": len(values),
                    "p50": percentile(values, 0.5),
                    "p99": percentile(values, 0.99),
                    "max": max(values),
                }
        by_kind[kind] = entry
    for f in faults:
        if f.kind not in FAILOVER_KINDS:
            continue
        for measure in ("failover_ms", "controller_failover_ms"):
            value = getattr(f, measure)
            if value is not None and value > bound_ms:
                over.append({"fault": f.index, "kind": f.kind, "measure": measure, "ms": value})
    every = [
        v
        for f in faults
        if f.kind in FAILOVER_KINDS
        for v in (f.failover_ms, f.controller_failover_ms)
        if v is not None
    ]
    return {
        "bound_ms": bound_ms,
        "p99_ms": percentile(every, 0.99),
        "by_kind": by_kind,
        "over_the_bound": over,
    }
