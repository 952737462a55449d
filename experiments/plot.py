"""`purgatory experiment plot DIR`: the figures of a run, as PNG files in DIR/plots/.

- grey-failure: KIP-736's two graphs, fetch latency per broker pair over time including
  the purgatory wait (total) and without it (true);
- purgatory: the timing-wheel post's curves (actual vs target rate, CPU);
- remote-backfill: expirations and completion time per remote.fetch.max.wait.ms, and the
  consumer's fetch latency over time;
- consumer-lag: MaxLag against the offset checker's lag over time, per queue shape;
- leader-failover: produce latency and acknowledged records/s around each kill, per
  topic (the clean and the unclean phase), with the kill, the elections and the restart
  marked;
- chaos: acknowledged records/s per client family, acknowledgement latency, and each
  fault's failover against broker.session.timeout.ms + 1 s, every fault shaded.
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
    fig.suptitle(f"{manifest.get('scenario', '')}: {kind} latency per broker pair")
    fig.tight_layout()
    return _save(fig, directory / "plots" / name)


def plot_purgatory(directory: Path) -> Path | None:
    from purgatory.broker.purgatory.perf import plot_sweep

    rows = read_jsonl(directory / "purgatory.jsonl")
    if not rows:
        return None
    path = directory / "plots" / "purgatory-sweep.png"
    plot_sweep(rows, path)
    return path


def backfill_figure(runs: list[dict[str, Any]]) -> Any:
    """Expirations and completion time per remote.fetch.max.wait.ms, bars labelled."""
    labels = [str(r["remote_fetch_max_wait_ms"]) for r in runs]
    fig, (exp_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4))
    bars = exp_ax.bar(labels, [r["expirations"] for r in runs], color="tab:red")
    exp_ax.bar_label(bars)
    exp_ax.set(title="remote fetch expirations", xlabel="remote.fetch.max.wait.ms", ylabel="count")
    bars = time_ax.bar(labels, [r["seconds"] for r in runs], color="tab:blue")
    time_ax.bar_label(bars, fmt="%.2f s")
    time_ax.set(title="backfill completion time", xlabel="remote.fetch.max.wait.ms", ylabel="s")
    for ax in (exp_ax, time_ax):
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)  # room for the labels
    fig.suptitle("Backfill of a tiered topic from a slow remote store (KIP-1018)")
    fig.tight_layout()
    return fig


def plot_backfill(directory: Path) -> Path | None:
    runs = read_jsonl(directory / "backfill.jsonl")
    if not runs:
        return None
    return _save(backfill_figure(runs), directory / "plots" / "remote-backfill.png")


def lag_figure(rows: list[dict[str, Any]]) -> Any:
    """One panel per queue shape, from the smallest queue to the largest, on one y scale."""
    by_phase: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_phase[r["phase"]].append(r)

    def shape(points: list[dict[str, Any]]) -> tuple[int, int]:
        return points[0]["queued_max_message_chunks"], points[0]["fetch_message_max_bytes"]

    panels = sorted(by_phase.values(), key=shape)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10, 3.2 * len(panels) + 0.6), squeeze=False, sharey=True
    )
    for ax, points in zip(axes[:, 0], panels, strict=True):
        t0 = points[0]["ts"]
        xs = [p["ts"] - t0 for p in points]
        ax.plot(
            xs, [p["checker_lag"] for p in points], label="offset checker lag (log end - committed)"
        )
        ax.plot(xs, [p["max_lag"] for p in points], label="MaxLag (fetcher)")
        chunks, size = shape(points)
        ax.set(
            title=f"queued.max.message.chunks={chunks}, fetch.message.max.bytes={size}",
            xlabel="seconds",
            ylabel="messages",
        )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        "MaxLag (the fetcher's lag) against the application's lag, per chunk queue size "
        "(same y scale)"
    )
    fig.tight_layout()
    return fig


def plot_lag(directory: Path) -> Path | None:
    rows = read_jsonl(directory / "lag.jsonl")
    if not rows:
        return None
    return _save(lag_figure(rows), directory / "plots" / "consumer-lag.png")


# How the failover figure marks what happened (events.jsonl): colour and label.
MARKS = {
    "followers-cut-off": ("tab:orange", "followers cut off"),
    "isr-shrunk": ("tab:purple", "ISR is the leader alone"),
    "kill": ("tab:red", "leader killed"),
    "election": ("tab:green", "election"),
    "restart": ("tab:blue", "restarted"),
}


def failover_figure(history: list[dict[str, Any]], events: list[dict[str, Any]]) -> Any:
    """Per topic (a column): acknowledgement latency and acknowledged records/s over time,
    seconds from the kill, with the kill, each partition's election and the restart."""
    topics = list(dict.fromkeys(r["topic"] for r in history))
    fig, axes = plt.subplots(2, len(topics), figsize=(7 * len(topics), 7), squeeze=False)
    for column, topic in enumerate(topics):
        rows = [r for r in history if r["topic"] == topic]
        first, last = min(r["sent_ts"] for r in rows), max(r["ts"] for r in rows)
        marks = _failover_marks([e for e in events if first <= e["ts"] <= last], topic)
        zero = next((ts for kind, ts in marks if kind == "kill"), first)
        acked = [r for r in rows if r["error"] is None]
        latency_ax, rate_ax = axes[0, column], axes[1, column]
        latency_ax.scatter(
            [r["ts"] - zero for r in acked],
            [(r["ts"] - r["sent_ts"]) * 1000 for r in acked],
            s=2,
            alpha=0.3,
        )
        latency_ax.set(
            title=f"{topic}: produce latency (acks=all), each record",
            ylabel="ms",
            yscale="log",
        )
        bin_s = 0.25
        counts: dict[int, int] = defaultdict(int)
        for r in acked:
            counts[int((r["ts"] - zero) // bin_s)] += 1
        xs = range(min(counts), max(counts) + 1) if counts else range(0)
        rate_ax.plot([x * bin_s for x in xs], [counts.get(x, 0) / bin_s for x in xs])
        rate_ax.set(
            title=f"{topic}: records acknowledged per second ({bin_s:g} s bins)",
            ylabel="records/s",
            xlabel="seconds from the kill",
        )
        for ax in (latency_ax, rate_ax):
            seen: set[str] = set()
            for kind, ts in marks:
                colour, label = MARKS[kind]
                ax.axvline(
                    ts - zero,
                    color=colour,
                    linestyle="-" if kind == "kill" else "--",
                    linewidth=1,
                    label=None if kind in seen else label,
                )
                seen.add(kind)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("Leader failover: acks=all produce around a SIGKILL of the leader")
    fig.tight_layout()
    return fig


def _failover_marks(events: list[dict[str, Any]], topic: str) -> list[tuple[str, float]]:
    """(kind, ts) to draw: the run's kills, cut-offs and restarts, and each election of
    ``topic``: a partition's leader changing after a kill."""
    marks: list[tuple[str, float]] = []
    killed = False
    for e in sorted(events, key=lambda e: e["ts"]):
        if e["event"] in MARKS:
            marks.append((e["event"], e["ts"]))
            killed = killed or e["event"] == "kill"
        elif e["event"] == "leader" and e["topic"] == topic and killed and e["leader"] >= 0:
            marks.append(("election", e["ts"]))
    return marks


def plot_failover(directory: Path) -> Path | None:
    history = read_jsonl(directory / "history.jsonl")
    if not history:
        return None
    figure = failover_figure(history, read_jsonl(directory / "events.jsonl"))
    return _save(figure, directory / "plots" / "leader-failover.png")


# The chaos figure's colour per fault kind.
FAULT_COLOURS = {
    "kill": "tab:red",
    "pause": "tab:orange",
    "restart-two": "tab:brown",
    "isolate": "tab:purple",
    "split": "tab:pink",
    "one-way": "tab:olive",
    "move-leader": "tab:cyan",
}


def chaos_figure(
    history: list[dict[str, Any]], faults: list[dict[str, Any]], ours: int, bound_ms: float
) -> Any:
    """Over the run: records acknowledged per second (ours and confluent-kafka's
    producers), each record's acknowledgement latency, and each fault's failover against
    its bound; every fault shaded from its start to its heal."""
    start = min(r["sent_ts"] for r in history)
    fig, (rate_ax, latency_ax, failover_ax) = plt.subplots(3, 1, figsize=(13, 10), sharex=True)
    acked = [r for r in history if r["error"] is None]
    for family, mine in (
        ("ours", [r for r in acked if r["producer"] < ours]),
        ("confluent-kafka", [r for r in acked if r["producer"] >= ours]),
    ):
        counts: dict[int, int] = defaultdict(int)
        for r in mine:
            counts[int(r["ts"] - start)] += 1
        xs = range(max(counts) + 1) if counts else range(0)
        rate_ax.plot(list(xs), [counts.get(x, 0) for x in xs], label=f"{family} producers")
    rate_ax.set(title="records acknowledged per second (acks=all)", ylabel="records/s")
    latency_ax.scatter(
        [r["ts"] - start for r in acked],
        [(r["ts"] - r["sent_ts"]) * 1000 for r in acked],
        s=1,
        alpha=0.2,
    )
    latency_ax.set(title="acknowledgement latency, each record", ylabel="ms", yscale="log")
    for f in faults:
        for measure, marker in (("failover_ms", "o"), ("controller_failover_ms", "^")):
            if f.get(measure) is not None:
                failover_ax.scatter(
                    f["started"] - start,
                    f[measure],
                    marker=marker,
                    color=FAULT_COLOURS.get(f["kind"], "grey"),
                )
    failover_ax.axhline(bound_ms, color="black", linestyle="--", linewidth=1)
    failover_ax.annotate("broker.session.timeout.ms + 1 s", (0, bound_ms), fontsize=8, va="bottom")
    failover_ax.set(
        title="per fault: until every partition it took had a leader (o), and a controller (^)",
        ylabel="ms",
        xlabel="seconds since the load began",
    )
    for ax in (rate_ax, latency_ax, failover_ax):
        seen: set[str] = set()
        for f in faults:
            end = f.get("healed") or f["started"]
            ax.axvspan(
                f["started"] - start,
                max(end, f["started"] + 0.3) - start,
                color=FAULT_COLOURS.get(f["kind"], "grey"),
                alpha=0.15,
                label=None if f["kind"] in seen else f["kind"],
            )
            seen.add(f["kind"])
        ax.grid(True, alpha=0.3)
    rate_ax.legend(fontsize=8, ncol=5, loc="lower left")
    fig.suptitle("Chaos: acks=all producers under a seeded nemesis")
    fig.tight_layout()
    return fig


def plot_chaos(directory: Path, manifest: dict[str, Any]) -> Path | None:
    history = read_jsonl(directory / "history.jsonl")
    if not history:
        return None
    settings = manifest.get("settings", {})
    figure = chaos_figure(
        history,
        read_jsonl(directory / "faults.jsonl"),
        int(settings.get("producers", 2)),
        float(settings.get("broker.session.timeout.ms", 3000)) + 1000,
    )
    return _save(figure, directory / "plots" / "chaos.png")


def _save(fig: Any, path: Path) -> Path:
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
        plot_failover(directory) if manifest["scenario"] == "leader-failover" else None,
        plot_chaos(directory, manifest) if manifest["scenario"] == "chaos" else None,
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
