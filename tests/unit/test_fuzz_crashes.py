"""Every input that ever crashed a decoder stays a test: the coverage-guided targets'
crashes (tests/corpus/crashes/<target>/) and the bodies that aborted kio's native reader,
as whole Kafka frames. And each target runs a bounded coverage-guided session (atheris)
from its seed corpus, in a child process: libFuzzer exits non-zero on a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.coverage import TARGETS, crashes
from tests.unit.test_kafka_bounds import ABORTING, frame_body

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_kept_crash_is_now_refused_cleanly(name: str) -> None:
    target = TARGETS[name]()
    for path in crashes(name):
        target(path.read_bytes())  # raises only on a bug


def test_the_bodies_that_aborted_kios_reader_pass_the_kafka_target_as_frames() -> None:
    target = TARGETS["kafka"]()
    for api_key, version, body in ABORTING:
        target(frame_body(api_key, version, body))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_bounded_coverage_guided_session_finds_no_crash(name: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.coverage",
            name,
            "--runs",
            "50000",
            "--corpus",
            str(tmp_path / "corpus"),
            "--",
            "-seed=42",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Done 50000 runs" in run.stderr
    assert not list(tmp_path.glob("crash-*"))
