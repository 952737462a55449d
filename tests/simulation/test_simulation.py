"""The deterministic simulation in CI: thousands of seeded fault schedules over the whole
cluster (quorum, controller, brokers, replication) on the simulated clock and network,
every promise checked; a seed replays its run exactly; and the checker catches planted
bugs (a check that cannot fail would prove nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from purgatory.broker.controller.replication_control import ReplicationControlManager
from purgatory.broker.raft.quorum_state import QuorumState
from tests.simulation.run import run_seed

ROOT = Path(__file__).parents[2]
# CI runs 10,000 schedules; PURGATORY_SIM_SEEDS=A-B runs others (longer on demand).
SEEDS = os.environ.get("PURGATORY_SIM_SEEDS", "0-9999")


@pytest.mark.timeout(3600)
def test_seeded_fault_schedules_break_no_promise() -> None:
    workers = str(max(1, os.cpu_count() or 1))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.simulation",
            "--seeds",
            SEEDS,
            "--workers",
            workers,
            "--json",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert run.returncode == 0, run.stderr[-20_000:]
    summary = json.loads(run.stdout.splitlines()[-1])
    first, _, last = SEEDS.partition("-")
    assert summary["schedules"] == int(last or first) - int(first) + 1
    assert summary["failed"] == []
    assert summary["acked_records"] > 10 * summary["schedules"]  # the workload did write
    assert summary["quorum_elections"] > summary["schedules"]  # and the faults did bite


def test_a_seed_replays_the_same_run() -> None:
    first, second = run_seed(77), run_seed(77)
    assert first.passed and second.passed
    assert (first.faults, first.acked, first.messages, first.elections) == (
        second.faults,
        second.acked,
        second.messages,
        second.elections,
    )


def first_failure(seeds: int) -> list[str]:
    for seed in range(seeds):
        result = run_seed(seed)
        if not result.passed:
            return result.problems
    return []


def test_the_checker_catches_a_broker_that_restarts_empty_and_stays_in_the_isr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted bug: the controller forgets that a broker registering as a new run lost
    its logs, so the restarted, empty broker stays in ISRs and may be elected."""
    elect = ReplicationControlManager.elect
    monkeypatch.setattr(
        ReplicationControlManager,
        "elect",
        lambda self, image, lost_data=frozenset(), preferred=False: elect(
            self, image, frozenset(), preferred
        ),
    )
    problems = first_failure(50)
    assert any("acked at" in p for p in problems), problems


def test_the_checker_catches_a_voter_that_forgets_its_vote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted bug: a voter grants a vote without recording it, so it can vote twice in
    one epoch and two leaders are elected."""
    monkeypatch.setattr(QuorumState, "to_voted", lambda self, candidate_id: self.state)
    problems = first_failure(100)
    assert any("both led quorum epoch" in p for p in problems), problems
