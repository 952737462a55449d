"""A cluster whose broker cannot listen fails at once, saying which broker, which port and
why, and never takes another process's broker for its own: ports held by real processes
(a plain bound socket, another broker), `purgatory cluster` and its Supervisor as a user
runs them. A broker whose port is not its own member address refuses to start."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from purgatory.broker.local_cluster import broker_commands, cluster_environment
from purgatory.broker.ops.supervisor import Supervisor, SupervisorError
from purgatory.clients.cluster_auth import SECRET_ENV
from purgatory.experiments.processes import free_port_range, free_ports
from tests.support import PURGATORY, purgatory_cli

pytestmark = pytest.mark.cluster

HOLD = (
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "print('bound', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes our stdin
)


@pytest.fixture
def hold_port() -> Iterator[Callable[[int], None]]:
    """``hold_port(port)``: another process binds and listens on ``port`` until the test
    ends."""
    holders: list[subprocess.Popen[str]] = []

    def hold(port: int) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == "bound\n"

    yield hold
    for proc in holders:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return purgatory_cli("cluster", "--brokers", "1", *args, timeout=60)


def assert_failed_clearly(run: subprocess.CompletedProcess[str], *says: str) -> None:
    assert run.returncode == 1, run.stderr
    for text in says:
        assert text in run.stderr
    assert "ready;" not in run.stderr and run.stdout == ""  # no bootstrap line, no ready
    assert "Traceback" not in run.stderr


def test_a_taken_client_port_fails_the_cluster_at_once_naming_broker_and_port(
    hold_port: Callable[[int], None],
) -> None:
    base, admin = free_ports(2)
    hold_port(base)
    run = cluster("--base-port", str(base), "--admin-base-port", str(admin), "--control-port", "0")
    assert_failed_clearly(
        run, f"broker 0's client port 127.0.0.1:{base}: address already in use", "--base-port"
    )


def test_a_taken_admin_or_control_port_fails_the_cluster_too(
    hold_port: Callable[[int], None],
) -> None:
    base, admin, control = free_ports(3)
    hold_port(admin)
    hold_port(control)
    run = cluster("--base-port", str(base), "--admin-base-port", str(admin), "--control-port", "0")
    assert_failed_clearly(run, f"broker 0's admin port 127.0.0.1:{admin}: address already in use")
    free_admin = free_port_range(1)
    run = cluster(
        "--base-port",
        str(base),
        "--admin-base-port",
        str(free_admin),
        "--control-port",
        str(control),
    )
    assert_failed_clearly(run, f"control port 127.0.0.1:{control}: address already in use")


def one_broker(base_port: int, admin_port: int) -> list[str]:
    [command] = broker_commands(
        argparse.Namespace(
            brokers=1,
            host="127.0.0.1",
            base_port=base_port,
            admin_base_port=admin_port,
            set=[],
            config=None,
            log_format=None,
            log_level="WARNING",
        ),
        environ={},
    )
    return command


@pytest.fixture
def other_broker(tmp_path: Path) -> Iterator[str]:
    """Another broker process, already healthy: its admin URL."""
    port, admin = free_ports(2)
    url = f"http://127.0.0.1:{admin}"
    other = Supervisor([one_broker(port, admin)], [url], tmp_path / "other", 60)
    try:
        other.start_all()
        other.wait_healthy([0])
        yield url
    finally:
        other.stop_all()


def test_a_broker_that_cannot_bind_is_never_taken_for_the_one_answering_its_admin_port(
    other_broker: str, hold_port: Callable[[int], None], tmp_path: Path
) -> None:
    # The race the early check cannot close: the broker's ports were free when the
    # cluster looked, and are not when it binds; meanwhile another broker answers
    # /healthz on the admin port (here the other broker's own).
    taken = free_port_range(1)
    hold_port(taken)
    admin = int(other_broker.rsplit(":", 1)[1])
    ours = Supervisor(
        [one_broker(taken, admin)], [other_broker], tmp_path / "ours", 60, cluster_environment({})
    )
    try:
        ours.start_all()
        with pytest.raises(SupervisorError) as failed:
            ours.wait_healthy([0])
        assert str(failed.value) == (
            "broker 0 exited with code 1 during start: cannot listen on its PLAINTEXT "
            f"listener 127.0.0.1:{taken}: address already in use"
        )
        assert not ours.healthy(0)
    finally:
        ours.stop_all()


def test_readiness_is_proven_by_the_pid_of_the_broker_started(
    other_broker: str, tmp_path: Path
) -> None:
    # Our broker starts well, on ports of its own, but the URL the supervisor watches
    # is the other broker's: healthy there is not healthy here.
    port, admin = free_ports(2)
    ours = Supervisor([one_broker(port, admin)], [other_broker], tmp_path / "ours", 3)
    try:
        ours.start_all()
        with pytest.raises(SupervisorError) as failed:
            ours.wait_healthy([0])
        assert "brokers [0] not healthy after 3s; another process (pid " in str(failed.value)
        assert f"answers on broker 0's admin port, {other_broker}" in str(failed.value)
        assert ours.running(0) and not ours.healthy(0)
        ours.admin_urls[0] = f"http://127.0.0.1:{admin}"  # where it really answers
        ours.wait_healthy([0])
        assert ours.healthy(0)
    finally:
        ours.stop_all()


def test_a_broker_whose_port_is_not_its_member_address_refuses_to_start() -> None:
    port, member, other = free_ports(3)
    run = subprocess.run(
        [*PURGATORY, "broker", "--port", str(port), "--admin-port", "0",
         "--cluster", f"0@127.0.0.1:{member},1@127.0.0.1:{other}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, SECRET_ENV: "a-secret"},
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert (
        f"purgatory broker: --port puts node 0's PLAINTEXT listener on port {port}, but "
        f"--cluster gives node 0 the address 127.0.0.1:{member}, where the other nodes "
        "reach it"
    ) in run.stderr
    assert "Traceback" not in run.stderr and "broker_started" not in run.stderr
