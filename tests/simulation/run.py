"""One simulated run per seed: three brokers start, a topic is made, producers write while
the nemesis breaks things for a few simulated seconds, everything heals, the cluster
settles, and the checker says what (if anything) broke. A seed replays a run exactly:

    PYTHONHASHSEED=0 python -m tests.simulation --seed 1234 --verbose

(string hashing must not change between runs either: ``tests.simulation`` sets it itself
when started otherwise).
"""

from __future__ import annotations

import logging
import random
import sys
from dataclasses import dataclass, field
from typing import Any

import structlog

from tests.simulation.checker import check, settled, unsettled
from tests.simulation.cluster import SimCluster
from tests.simulation.nemesis import Nemesis
from tests.simulation.sim_loop import Simulation, SimulationError
from tests.simulation.workload import Workload

FAULTS_S = 4.0  # simulated seconds of faults (and writes)
SETTLE_S = 20.0  # then at most this long to settle after the heal


@dataclass
class RunResult:
    seed: int
    problems: list[str]
    acked: int = 0
    abandoned: int = 0
    messages: int = 0
    elections: int = 0
    simulated_s: float = 0.0
    faults: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def replay_command(seed: int) -> str:
    return f"PYTHONHASHSEED=0 python -m tests.simulation --seed {seed} --verbose"


def quiet_logging(verbose: bool, sim: Simulation | None = None) -> None:
    """The brokers' log events: none (a run is thousands of them), or, to debug a seed,
    INFO and above with the simulated time."""
    if not verbose:
        structlog.configure(
            processors=[],
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        )
        return

    def sim_time(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
        event["t"] = round(sim.now - 1000, 4) if sim is not None else None
        return event

    structlog.configure(
        processors=[sim_time, structlog.processors.add_log_level, structlog.dev.ConsoleRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
    )


def run_seed(
    seed: int, faults_s: float = FAULTS_S, settle_s: float = SETTLE_S, verbose: bool = False
) -> RunResult:
    sim = Simulation(seed)
    quiet_logging(verbose, sim)
    cluster = SimCluster(sim)
    nemesis = Nemesis(cluster, random.Random(seed * 7919 + 1))
    result = RunResult(seed, [], faults=nemesis.log)
    try:
        cluster.start()
        workload = Workload(cluster)
        begin = sim.now
        workload.start(until=begin + 0.3 + faults_s)
        nemesis.plan(0.3, 0.3 + faults_s)
        sim.run_until(begin + 0.3 + faults_s)
        nemesis.heal()
        workload.stopping = True
        if not cluster.wait_for(lambda: settled(cluster, workload), settle_s):
            why = unsettled(cluster, workload)
            result.problems.append(f"the cluster did not settle within {settle_s:g} s: {why}")
        result.problems += check(cluster, workload)
        result.acked = len(workload.acks)
        result.abandoned = workload.abandoned
    except SimulationError as exc:
        result.problems.append(str(exc))
    result.messages = cluster.net.sent
    result.elections = len(cluster.leaders)
    result.simulated_s = sim.now - 1000
    return result
