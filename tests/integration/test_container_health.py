"""The image's HEALTHCHECK (purgatory.broker.ops.container_health) reads the broker's own
command line and environment from /proc, so it follows an admin port set by flags, by
--set or by a variable: here against real broker processes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from purgatory.broker.ops.container_health import admin_url, main
from purgatory.experiments.processes import free_ports
from tests.support import PURGATORY, wait_until_sync


@pytest.fixture
def start() -> Iterator:
    procs: list[subprocess.Popen[bytes]] = []

    def run(*args: str, env: dict[str, str] | None = None) -> Path:
        proc = subprocess.Popen(
            [*PURGATORY, "broker", *args],
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        return Path(f"/proc/{proc.pid}")

    yield run
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("how", ["flag", "set", "environment"])
def test_the_healthcheck_finds_the_admin_port_however_it_was_set(start, how: str) -> None:
    port, admin = free_ports(2)
    args = {
        "flag": ["--admin-port", str(admin)],
        "set": ["--set", f"admin.listener=127.0.0.1:{admin}"],
        "environment": [],
    }[how]
    env = {"PURGATORY_ADMIN_LISTENER": f"0.0.0.0:{admin}"} if how == "environment" else {}
    proc = start("--port", str(port), *args, env=env)
    wait_until_sync(lambda: main(proc) == 0, timeout=30, message="a healthy broker")
    assert admin_url(proc) == f"http://127.0.0.1:{admin}/healthz"


def test_a_broker_that_is_gone_is_unhealthy(start) -> None:
    port, admin = free_ports(2)
    proc = start("--port", str(port), "--admin-port", str(admin))
    wait_until_sync(lambda: main(proc) == 0, timeout=30, message="a healthy broker")
    os.kill(int(proc.name), 9)
    wait_until_sync(lambda: main(proc) == 1, timeout=30, message="an unhealthy verdict")


def test_a_process_that_is_not_a_broker_is_unhealthy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(Path(f"/proc/{os.getpid()}")) == 1
    assert "is not `purgatory broker`" in capsys.readouterr().err
