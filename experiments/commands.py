"""Arguments of `purgatory experiment ...` (the code runs only when a command does)."""

from __future__ import annotations

from typing import Any

from purgatory.common.lazy_command import lazy

# The names of experiments.scenarios.SCENARIOS (a unit test holds them equal): importing
# the scenarios would cost every command, `purgatory broker` too, a third of a second.
SCENARIO_NAMES = (
    "chaos",
    "consumer-lag",
    "grey-failure",
    "leader-failover",
    "purgatory",
    "remote-backfill",
)


def add_commands(sub: Any) -> None:
    experiment = sub.add_parser(
        "experiment", help="latency experiments: run a scenario, analyse it on Spark, plot it"
    )
    esub = experiment.add_subparsers(dest="experiment_command", metavar="ACTION", required=True)
    run = esub.add_parser(
        "run",
        help="run a scenario, writing samples, scraped metrics and a manifest to --out",
        description="Scenarios: grey-failure (KIP-736), purgatory (the timing-wheel post), "
        "remote-backfill (KIP-1018), consumer-lag (the old consumer's MaxLag), "
        "leader-failover (acks=all durability across a killed leader), chaos (every "
        "promise checked under a seeded nemesis: kills, pauses, partitions). "
        "See docs/experiments.md.",
    )
    run.add_argument("scenario", choices=SCENARIO_NAMES, help="the scenario to run")
    run.add_argument("--out", required=True, help="directory for the results")
    run.add_argument("--bootstrap", help="use running brokers (e.g. docker compose) instead")
    run.add_argument("--admin", nargs="+", help="their admin URLs, with --bootstrap")
    run.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    run.add_argument("--partitions", type=int, default=6, help="partitions of its topic")
    run.add_argument("--records", type=int, default=2000, help="records per partition to fill")
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="scenario parameter, e.g. delay_ms=50, timeouts=100,2000, shapes=1x1024,1000x65536",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run.set_defaults(func=lazy("purgatory.experiments.runner", "main"))
    analyze = esub.add_parser(
        "analyze",
        help="the Spark job: percentiles per window and pair, a report (grey-failure: the slow broker)",
    )
    analyze.add_argument("dir", help="a run's directory (its --out)")
    analyze.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    analyze.add_argument("--window", type=float, default=5.0, help="window length in seconds")
    analyze.set_defaults(func=lazy("purgatory.experiments.analyze", "main"))
    plot = esub.add_parser("plot", help="the figures of a run (PNG)")
    plot.add_argument("dir", help="a run's directory (its --out)")
    plot.set_defaults(func=lazy("purgatory.experiments.plot", "main"))
