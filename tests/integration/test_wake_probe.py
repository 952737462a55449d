"""The machine's floor beside the parked-fetch benchmark: a process that only sleeps, and
how late it wakes."""

from __future__ import annotations

import json
import subprocess
import sys

from purgatory.testing.wake_probe import probe


def test_the_probe_times_every_nap_it_takes() -> None:
    result = probe(0.05)
    # Naps of 0.5-2 ms for 50 ms: a stalled machine takes fewer, never none.
    assert 1 <= result["samples"] <= 100
    assert 0 <= result["p50"] <= result["p99"] <= result["max"]


def test_run_as_a_program_it_says_it_started_then_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "purgatory.testing.wake_probe", "0.05"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    started, figures = run.stdout.splitlines()
    assert started == "sleeping"
    assert set(json.loads(figures)) == {"samples", "p50", "p99", "max"}


def test_a_bad_duration_is_a_usage_error() -> None:
    for argument in ("soon", "0", "-1", "nan", "inf"):
        run = subprocess.run(
            [sys.executable, "-m", "purgatory.testing.wake_probe", argument],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 2 and "Traceback" not in run.stderr, argument
