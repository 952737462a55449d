"""What an experiment writes: request-level samples (JSON lines), broker metrics scraped
every second, and a manifest (scenario, settings, versions, times, files).

Layout of an experiment directory::

    manifest.json
    samples/<kind>.jsonl     one latency sample per line (SAMPLE_FIELDS)
    metrics.jsonl            every scrape: ts, broker, metric, labels, value
    results.json             the scenario's own summary figures

Files are appended and flushed as the run goes, so a run stopped with Ctrl-C keeps what
it wrote; the manifest says whether the run completed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

import purgatory

# A sample: when it ended (epoch s), what phase of the scenario it belongs to, who measured
# (source) against whom (destination), what was measured (kind), the latency, the part of
# it spent waiting in a purgatory, and the rest (true latency, KIP-736).
SAMPLE_FIELDS = ("ts", "phase", "source", "destination", "kind", "latency_ms", "wait_ms", "true_ms")

# Metrics worth a time series in every experiment (the rest of /metrics is left out).
SCRAPED = (
    "purgatory_replica_fetch_latency_seconds",
    "purgatory_replica_fetcher_max_lag",
    "purgatory_delayed_operations",
    "purgatory_size",
    "purgatory_expirations_total",
    "purgatory_remote_fetch_expirations_total",
    "purgatory_remote_fetch_requests_total",
    "purgatory_remote_log_reader_task_queue_size",
    "purgatory_remote_log_reader_avg_idle_ratio",
    "purgatory_under_replicated_partitions",
    "purgatory_isr_shrinks_total",
    "purgatory_fault_injections_total",
    "purgatory_requests_total",
    "purgatory_active_controller",
    "purgatory_offline_partitions",
    "purgatory_fenced_brokers",
    "purgatory_leader_elections_total",
    "purgatory_log_truncations_total",
)


def versions() -> dict[str, str]:
    out = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "purgatory": purgatory.__version__,  # installed as purgatory-broker
    }
    for package in ("uvloop", "msgspec", "pyspark", "matplotlib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[package] = metadata.version(package)
    return out


class Recorder:
    def __init__(self, out: Path, scenario: str, settings: dict[str, Any]) -> None:
        self.out = out
        (out / "samples").mkdir(parents=True, exist_ok=True)
        self.manifest: dict[str, Any] = {
            "scenario": scenario,
            "settings": settings,
            "versions": versions(),
            "command": sys.argv,
            "started_at": time.time(),
            "finished_at": None,
            "completed": False,
            "phases": [],
            "brokers": {},
        }
        self._files: dict[str, IO[str]] = {}
        self.phase = "setup"
        self.counts: dict[str, int] = {}
        self.write_manifest()

    def write_manifest(self) -> None:
        files = sorted(str(p.relative_to(self.out)) for p in self.out.rglob("*") if p.is_file())
        self.manifest["files"] = [f for f in files if f != "manifest.json"]
        path = self.out / "manifest.json"
        path.write_text(json.dumps(self.manifest, indent=2, default=str))

    def begin_phase(self, name: str, **details: Any) -> None:
        self.phase = name
        self.manifest["phases"].append({"name": name, "started_at": time.time(), **details})
        self.write_manifest()

    def phase_at(self, ts: float) -> str:
        """The phase that was running at ``ts`` (samples collected later, like a broker's
        fetch round trips scraped each second, belong to the phase they happened in)."""
        for phase in reversed(self.manifest["phases"]):
            if phase["started_at"] <= ts:
                return str(phase["name"])
        return "setup"

    def _file(self, relative: str) -> IO[str]:
        handle = self._files.get(relative)
        if handle is None:
            handle = self._files[relative] = (self.out / relative).open("a", encoding="utf-8")
        return handle

    def sample(
        self,
        kind: str,
        source: str,
        destination: str,
        latency_ms: float,
        wait_ms: float = 0.0,
        ts: float | None = None,
    ) -> None:
        ts = time.time() if ts is None else ts
        row = {
            "ts": ts,
            "phase": self.phase_at(ts),
            "source": source,
            "destination": destination,
            "kind": kind,
            "latency_ms": latency_ms,
            "wait_ms": wait_ms,
            "true_ms": max(latency_ms - wait_ms, 0.0),
        }
        self._file(f"samples/{kind}.jsonl").write(json.dumps(row) + "\n")
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def write(self, relative: str, row: dict[str, Any]) -> None:
        self._file(relative).write(json.dumps(row) + "\n")

    def results(self, results: dict[str, Any]) -> None:
        (self.out / "results.json").write_text(json.dumps(results, indent=2, default=str))

    def flush(self) -> None:
        for handle in self._files.values():
            handle.flush()

    def close(self, completed: bool) -> None:
        self.flush()
        for handle in self._files.values():
            handle.close()
        self._files.clear()
        self.manifest["finished_at"] = time.time()
        self.manifest["completed"] = completed
        self.manifest["sample_counts"] = self.counts
        self.write_manifest()


class Scraper:
    """Every ``interval`` seconds: each broker's /metrics (the SCRAPED families) into
    metrics.jsonl, and its replica fetch round trips into samples/follower_fetch.jsonl."""

    def __init__(self, recorder: Recorder, admins: dict[int, str], interval: float = 1.0) -> None:
        self.recorder = recorder
        self.admins = admins
        self.interval = interval
        self._since: dict[int, float] = dict.fromkeys(admins, time.time())
        self._task: asyncio.Task[None] | None = None
        self.scrapes = 0

    async def __aenter__(self) -> Scraper:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.scrape_once()  # the last second too
        await self._session.close()

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await self.scrape_once()
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def scrape_once(self) -> None:
        """One round over the brokers; one that does not answer (killed, paused, starting)
        is skipped this round."""
        for broker_id, base in self.admins.items():
            with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError):
                await self._scrape(broker_id, base)
        self.scrapes += 1
        self.recorder.flush()

    async def _scrape(self, broker_id: int, base: str) -> None:
        now = time.time()
        async with self._session.get(f"{base}/metrics") as response:
            text = await response.text()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.startswith(SCRAPED):  # histogram samples add suffixes
                    self.recorder.write(
                        "metrics.jsonl",
                        {
                            "ts": now,
                            "broker": broker_id,
                            "metric": s.name,
                            "labels": s.labels,
                            "value": s.value,
                        },
                    )
        async with self._session.get(
            f"{base}/v1/samples/replica-fetch", params={"since": str(self._since[broker_id])}
        ) as response:
            payload = await response.json()
        for row in payload["samples"]:
            self._since[broker_id] = max(self._since[broker_id], row["ts"])
            self.recorder.sample(
                "follower_fetch",
                f"broker-{broker_id}",
                f"broker-{row['source_broker']}",
                row["total_ms"],
                row["wait_ms"],
                ts=row["ts"],
            )
