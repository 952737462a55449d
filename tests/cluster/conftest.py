"""The `cluster` fixture: a `purgatory cluster` of three broker processes started through
the CLI, as a user would, one per test module that asks for it (the CLI's tests, the
docs' commands)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from purgatory.experiments.processes import free_port_range
from tests.support import PURGATORY


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    base = free_port_range(3)
    admin_base = free_port_range(3)
    while admin_base in range(base - 3, base + 3):
        admin_base = free_port_range(3)
    log_dir = tmp_path_factory.mktemp("logs")
    proc = subprocess.Popen(
        [
            *PURGATORY,
            "cluster",
            "--brokers",
            "3",
            "--base-port",
            str(base),
            "--admin-base-port",
            str(admin_base),
            "--log-dir",
            str(log_dir),
            "--control-port",
            "0",
            "--set",
            "num.partitions=3",
            "--set",
            "group.initial.rebalance.delay.ms=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    info = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            info = json.loads(line)
            break
    if info is None:
        proc.kill()
        _, err = proc.communicate()
        logs = "\n".join(p.read_text()[-2000:] for p in Path(log_dir).glob("*.log"))
        pytest.fail(f"cluster did not become ready: {err}\n{logs}")
    info["proc"] = proc
    info["log_dir"] = log_dir
    yield info
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
