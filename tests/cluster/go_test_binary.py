"""Running one test of a compiled Go test binary (`go test -c`, built by `make go-clients`)
from pytest: what the binary holds, and one test run that must pass."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

from purgatory.testing import Cluster


def go_tests(binary: Path) -> list[str]:
    """The names of the binary's top-level tests."""
    done = subprocess.run(
        [str(binary), "-test.list", "^Test"], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.split()


def assert_go_test_passes(
    binary: Path,
    name: str,
    env: dict[str, str],
    cwd: Path,
    timeout_s: int,
    cluster: Cluster | None = None,
) -> None:
    """Run test `name` alone (`-test.timeout` timeout_s, the process 30 s more); it must
    report PASS and exit 0, or the failure shows the test's output and, given the cluster
    it ran against, what each broker logged last (a failure seen once in CI can then be
    understood without reproducing it)."""
    command = [str(binary), "-test.run", f"^{name}$", "-test.count", "1", "-test.v"]
    done = subprocess.run(
        [*command, "-test.timeout", f"{timeout_s}s"],
        capture_output=True,
        text=True,
        timeout=timeout_s + 30,
        cwd=cwd,
        env={**os.environ, **env},
    )
    output = done.stdout + done.stderr
    passed = done.returncode == 0 and f"--- PASS: {name} " in output
    story = "" if passed or cluster is None else brokers_story(cluster)
    assert passed, f"{binary.name} {name} exited {done.returncode}:\n{output[-20000:]}{story}"


def brokers_story(cluster: Cluster, events: int = 40) -> str:
    """Each answering broker's latest log events (INFO and above), one JSON line each."""
    lines = []
    for broker in range(cluster.size):
        lines.append(f"\n--- broker {broker}'s latest events:")
        with contextlib.suppress(Exception):  # a dead broker tells nothing; the rest still do
            lines.extend(json.dumps(e, default=str) for e in cluster.logs(broker, events))
    return "\n".join(lines)
