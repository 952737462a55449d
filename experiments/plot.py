"""`purgatory experiment plot DIR`: the figures of a run, as PNG files in DIR/plots/.

- grey-failure: KIP-736's two graphs, fetch latency per broker pair over time including
  the purgatory wait (total) and without it (true);
- purgatory: the timing-wheel post's curves (actual vs target rate, CPU);
- remote-backfill: expirations and completion time per remote.fetch.max.wait.ms, and the
  consumer's fetch latency over time;
- consumer-lag: MaxLag against the offset checker's lag over time, per queue shape.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _phase_lines(ax: Any, manifest: dict[str, Any], start: float) -> None:
    for phase in manifest.get("phases", [])[1:]:
        ax.axvline(phase["started_at"] - start, color="grey", linestyle="--", linewidth=1)
        ax.annotate(
            phase["name"],
            (phase["started_at"] - start, 1),
            xycoords=("data", "axes fraction"),
            fontsize=8,
            va="top",
        )


def _per_second_median(
    rows: list[dict[str, Any]], field: str, start: float
) -> tuple[list[float], list[float]]:
    buckets: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        buckets[int(r["ts"] - start)].append(r[field])
    xs = sorted(buckets)
    return [float(x) for x in xs], [sorted(buckets[x])[len(buckets[x]) // 2] for x in xs]


def plot_pairs(directory: Path, manifest: dict[str, Any], kind: str, name: str) -> Path | None:
    rows = read_jsonl(directory / "samples" / f"{kind}.jsonl")
    if not rows:
        return None
    start = min(r["ts"] for r in rows)
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_pair[(r["source"], r["destination"])].append(r)
    fig, (total_ax, true_ax) = plt.subplots(2, 1, figsize=(11, 8), sharex=True)
    for (source, destination), pair in sorted(by_pair.items()):
        label = f"{source} -> {destination}"
        total_ax.plot(*_per_second_median(pair, "latency_ms", start), label=label)
        true_ax.plot(*_per_second_median(pair, "true_ms", start), label=label)
    total_ax.set(title=f"{kind}: latency including purgatory wait (median per second)", ylabel="ms")
    true_ax.set(
        title=f"{kind}: true latency, wait_time_ms subtracted (KIP-736)",
        ylabel="ms",
        xlabel="seconds since start",
    )
    for ax in (total_ax, true_ax):
        _phase_lines(ax, manifest, start)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    path = directory / "plots" / name
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_purgatory(directory: Path) -> Path | None:
    from broker.purgatory.perf import plot_sweep

    rows = read_jsonl(directory / "purgatory.jsonl")
    if not rows:
        return None
    path = directory / "plots" / "purgatory-sweep.png"
    plot_sweep(rows, path)
    return path


def plot_backfill(directory: Path) -> Path | None:
    runs = read_jsonl(directory / "backfill.jsonl")
    if not runs:
        return None
    labels = [str(r["remote_fetch_max_wait_ms"]) for r in runs]
    fig, (exp_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4))
    exp_ax.bar(labels, [r["expirations"] for r in runs], color="tab:red")
    exp_ax.set(title="remote fetch expirations", xlabel="remote.fetch.max.wait.ms", ylabel="count")
    time_ax.bar(labels, [r["seconds"] for r in runs], color="tab:blue")
    time_ax.set(title="backfill completion time", xlabel="remote.fetch.max.wait.ms", ylabel="s")
    for ax in (exp_ax, time_ax):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Backfill of a tiered topic from a slow remote store (KIP-1018)")
    fig.tight_layout()
    path = directory / "plots" / "remote-backfill.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_lag(directory: Path) -> Path | None:
    rows = read_jsonl(directory / "lag.jsonl")
    if not rows:
        return None
    by_phase: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_phase[r["phase"]].append(r)
    fig, axes = plt.subplots(len(by_phase), 1, figsize=(10, 3.2 * len(by_phase)), squeeze=False)
    for ax, (_, points) in zip(axes[:, 0], sorted(by_phase.items()), strict=True):
        t0 = points[0]["ts"]
        xs = [p["ts"] - t0 for p in points]
        ax.plot(
            xs, [p["checker_lag"] for p in points], label="offset checker lag (log end - committed)"
        )
        ax.plot(xs, [p["max_lag"] for p in points], label="MaxLag (fetcher)")
        first = points[0]
        ax.set(
            title=f"queued.max.message.chunks={first['queued_max_message_chunks']}, "
            f"fetch.message.max.bytes={first['fetch_message_max_bytes']}",
            xlabel="seconds",
            ylabel="messages",
        )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = directory / "plots" / "consumer-lag.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot(directory: Path) -> list[Path]:
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "plots").mkdir(exist_ok=True)
    made = [
        plot_pairs(directory, manifest, "follower_fetch", "fetch-latency-pairs.png"),
        plot_pairs(directory, manifest, "consumer_fetch", "consumer-fetch-latency.png"),
        plot_purgatory(directory),
        plot_backfill(directory),
        plot_lag(directory),
    ]
    return [p for p in made if p is not None]


def main(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if not (directory / "manifest.json").exists():
        print(f"purgatory experiment plot: no manifest.json in {directory}", file=sys.stderr)
        return 2
    paths = plot(directory)
    print(json.dumps({"plots": [str(p) for p in paths]}))
    return 0
