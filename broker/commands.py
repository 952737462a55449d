"""`purgatory broker` and `purgatory cluster` (argument declarations; code imported on use)."""

from __future__ import annotations

import argparse
from typing import Any

from purgatory.common.lazy_command import lazy


def _common_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML file of broker configs")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a config (repeatable); beats the file and PURGATORY_* variables",
    )
    p.add_argument("--log-format", choices=("json", "console"), help="log.format")
    p.add_argument(
        "--log-level",
        type=str.upper,  # `--log-level warning` works too
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log.level",
    )


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "broker",
        help="run one broker in this process",
        description="Run one broker. Configs: defaults < --config FILE < "
        "PURGATORY_<NAME> environment < --set < the flags below.",
    )
    p.add_argument("--id", type=int, help="broker.id")
    p.add_argument("--host", help="interface to bind (host of `listeners`)")
    p.add_argument("--port", type=int, help="client port (port of `listeners`; 0: any free port)")
    p.add_argument("--admin-port", type=int, help="admin HTTP port (port of `admin.listener`)")
    p.add_argument("--cluster", metavar="ID@HOST:PORT,...", help="cluster.members")
    p.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="'MECHANISM=[name=USER,password=PASSWORD]'",
        help="a SCRAM user the first controller writes into the new metadata log, as "
        "kafka-storage format --add-scram (repeatable; optional iterations=N): "
        "bootstrap.scram.credentials",
    )
    p.add_argument(
        "--lifeline-fd",
        type=int,
        metavar="FD",
        help="stop when this inherited file descriptor reads end of file (a supervisor's "
        "pipe: the broker exits when the process that started it is gone)",
    )
    _common_config_args(p)
    p.set_defaults(func=lazy("purgatory.broker.main", "run_broker"))

    c = sub.add_parser(
        "cluster",
        help="run N local broker processes until Ctrl-C",
        description="Start N broker processes on this machine, wait until all "
        "are healthy, print where they listen, and keep the others running when one "
        "exits; `purgatory admin broker` stops, kills, pauses or restarts one. Ctrl-C or "
        "SIGTERM stops them all.",
    )
    c.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    c.add_argument("--host", default="127.0.0.1", help="interface every broker binds")
    c.add_argument("--base-port", type=int, default=9092, help="broker i listens on BASE+i")
    c.add_argument(
        "--admin-base-port", type=int, default=9644, help="broker i's admin HTTP on BASE+i"
    )
    c.add_argument(
        "--log-dir", help="write each broker's log to DIR/broker-<id>.log instead of stderr"
    )
    c.add_argument("--startup-timeout", type=float, default=30.0, help="seconds to wait for health")
    c.add_argument(
        "--control-port",
        type=int,
        default=9640,
        help="HTTP port of the cluster's control endpoint: stop, kill, pause, restart one "
        "broker (`purgatory admin broker ...`); 0: any free port (default 9640)",
    )
    _common_config_args(c)
    c.set_defaults(func=lazy("purgatory.broker.local_cluster", "run_cluster"))


def add_perf_commands(sub: Any) -> None:
    buckets = sub.add_parser(
        "timer-buckets",
        help="timing-wheel bucket storage: linked list vs dict",
        description="Add, cancel and flush tasks in one bucket, stored as Kafka's doubly "
        "linked list and as the dict the timer uses.",
    )
    buckets.add_argument("--tasks", type=int, default=1000, help="tasks per bucket")
    buckets.add_argument(
        "--cancel-fraction",
        type=float,
        default=0.5,
        help="share of tasks cancelled before the flush",
    )
    buckets.add_argument("--rounds", type=int, default=300, help="add-cancel-flush rounds per run")
    buckets.add_argument("--json", action="store_true", help="print the result as JSON")
    buckets.set_defaults(func=lazy("purgatory.broker.purgatory.timer_perf", "main"))

    scaling = sub.add_parser(
        "timer-scaling",
        help="timing wheel: insert+cancel cost with 10^4 .. 10^6 tasks pending",
    )
    scaling.add_argument(
        "--pending",
        default="10000,100000,1000000",
        help="tasks pending, one run each (comma-separated)",
    )
    scaling.add_argument(
        "--operations", type=int, default=200_000, help="insert+cancel pairs timed per run"
    )
    scaling.add_argument(
        "--max-delay-ms",
        type=int,
        default=600_000,
        help="pending tasks' delays are spread up to this (all wheel levels)",
    )
    scaling.add_argument("--json", action="store_true", help="print the result as JSON")
    scaling.set_defaults(func=lazy("purgatory.broker.purgatory.timer_perf", "scaling_main"))

    cycle = sub.add_parser(
        "purgatory-cycle",
        help="create/watch-3-keys/timer-add/complete cycles with many operations pending",
    )
    cycle.add_argument(
        "--pending", type=int, default=50_000, help="operations left pending meanwhile"
    )
    cycle.add_argument("--cycles", type=int, default=200_000, help="cycles timed")
    cycle.add_argument("--json", action="store_true", help="print the result as JSON")
    cycle.set_defaults(func=lazy("purgatory.broker.purgatory.timer_perf", "cycle_main"))

    bench = sub.add_parser(
        "purgatory",
        help="the purgatory benchmark (Kafka's TestPurgatoryPerformance): wheel vs heap",
        description="Enqueue fake delayed operations at a target rate into a purgatory and "
        "report the rate it kept up with. --sweep runs every implementation over a range "
        "of rates for the timing-wheel post's two cases and draws the figures.",
    )
    bench.add_argument(
        "--impl",
        default="wheel",
        choices=("wheel", "wheel-purge", "heap"),
        help="wheel: timing wheel, eager removal; wheel-purge: Kafka's "
        "estimate-driven purge; heap: a model of the old design",
    )
    bench.add_argument("--num", type=int, default=200_000, help="requests per run")
    bench.add_argument("--rate", type=float, default=10_000, help="target requests per second")
    bench.add_argument("--keys", type=int, default=3, help="keys each request is watched on")
    bench.add_argument(
        "--key-space-size", type=int, default=100, help="distinct keys operations are watched on"
    )
    bench.add_argument("--timeout", type=int, default=200, help="operation timeout (ms)")
    bench.add_argument("--pct75", type=float, default=60.0, help="75th percentile latency (ms)")
    bench.add_argument("--pct50", type=float, default=20.0, help="median latency (ms)")
    bench.add_argument(
        "--purge-interval",
        type=int,
        default=1000,
        help="completed operations tolerated before a purge (wheel-purge)",
    )
    bench.add_argument("--seed", type=int, help="random seed, for repeatable workloads")
    bench.add_argument(
        "--gc",
        default="broker",
        choices=("broker", "python"),
        help="collect garbage as a broker process does (the default) or with Python's "
        "default thresholds",
    )
    bench.add_argument(
        "--sweep",
        action="store_true",
        help="every --impls over --rates, for both of the post's cases",
    )
    bench.add_argument(
        "--rates",
        default="25000,50000,75000,100000,125000,150000,200000,250000",
        help="target rates of --sweep (requests per second, comma-separated)",
    )
    bench.add_argument(
        "--impls", default="wheel,wheel-purge,heap", help="implementations of --sweep"
    )
    bench.add_argument("--out", default="out/purgatory", help="sweep output directory")
    bench.add_argument("--json", action="store_true", help="print the result as JSON")
    bench.set_defaults(func=lazy("purgatory.broker.purgatory.perf", "main"))

    cleaner = sub.add_parser(
        "log-cleaner",
        help="the log cleaner on one compacted log: records and bytes before and after, "
        "time per slice",
        description="Write --updates records over --keys keys to one in-memory compacted log, "
        "clean it once a slice at a time as a broker does, and report what was left and "
        "the wall time of each slice (the event-loop stall it causes).",
    )
    cleaner.add_argument("--updates", type=int, default=100_000, help="records written")
    cleaner.add_argument("--keys", type=int, default=1000, help="distinct keys")
    cleaner.add_argument("--batch", type=int, default=10, help="records per batch")
    cleaner.add_argument("--value-bytes", type=int, default=100, help="bytes per value")
    cleaner.add_argument(
        "--codec",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        default="none",
        help="codec of the batches written",
    )
    cleaner.add_argument("--segment-bytes", type=int, default=1 << 20, help="segment.bytes")
    cleaner.add_argument("--slice-records", type=int, default=1000, help="records per slice")
    cleaner.add_argument("--json", action="store_true", help="print the result as JSON")
    cleaner.set_defaults(func=lazy("purgatory.broker.log.cleaner.cleaner_perf", "main"))
