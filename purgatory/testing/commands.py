"""Arguments of the testing package's benchmark (`purgatory perf cluster-start`)."""

from __future__ import annotations

from typing import Any

from purgatory.common.lazy_command import lazy


def add_perf_commands(sub: Any) -> None:
    start = sub.add_parser(
        "cluster-start",
        help="what a test suite pays for a cluster of its own: a Cluster ready, a first "
        "topic, a per-test topic, in thread and process mode",
    )
    start.add_argument("--brokers", type=int, default=3, help="brokers per cluster (default 3)")
    start.add_argument(
        "--modes", default="thread,process", help="thread and/or process (default both)"
    )
    start.add_argument("--runs", type=int, default=5, help="clusters started per mode (default 5)")
    start.add_argument(
        "--topics", type=int, default=50, help="per-test topics created per cluster (default 50)"
    )
    start.add_argument("--partitions", type=int, default=1, help="partitions per topic (default 1)")
    start.add_argument("--json", action="store_true", help="one line of JSON")
    start.set_defaults(func=lazy("purgatory.testing.startup_bench", "main"))
