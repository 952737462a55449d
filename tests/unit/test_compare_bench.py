"""`purgatory perf compare` refuses what it cannot run with a clear line, before starting
anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from purgatory.testing import compare_bench


def perf_compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "purgatory", "perf", "compare", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unknown_system_is_a_usage_error_without_a_traceback() -> None:
    run = perf_compare("--systems", "purgatory,redpanda")
    assert run.returncode == 2
    assert "--systems takes purgatory, kafka, kfake, mock" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_missing_kfake_build_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(compare_bench, "KFAKE", tmp_path / "kfake")
    reason = compare_bench.unavailable("kfake")
    assert reason is not None and "make go-clients" in reason


def test_ratios_are_judged_in_the_direction_of_each_target() -> None:
    assert compare_bench.met(ours=90.0, kafka=100.0, bound=0.8, op=">=")
    assert not compare_bench.met(ours=70.0, kafka=100.0, bound=0.8, op=">=")
    assert compare_bench.met(ours=500.0, kafka=6000.0, bound=0.1, op="<=")
    assert not compare_bench.met(ours=700.0, kafka=6000.0, bound=0.1, op="<=")
