"""A user's test session that is interrupted (Ctrl-C) or killed outright leaves no broker
process and no bound port behind: pytester runs a suite whose test holds a process-mode
cluster, and the session is stopped from outside while the test runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import wait_until_sync

pytest_plugins = ["pytester"]

SAMPLE = """
import json, os, time
import pytest


@pytest.mark.purgatory(brokers=2, mode="process")
def test_holds_a_cluster(purgatory_cluster):
    c = purgatory_cluster
    info = {"pids": [c.pid(i) for i in range(c.size)], "ports": c.ports + c.admin_ports}
    with open(os.environ["CLUSTER_INFO"] + ".tmp", "w") as out:
        json.dump(info, out)
    os.rename(os.environ["CLUSTER_INFO"] + ".tmp", os.environ["CLUSTER_INFO"])
    time.sleep(600)  # until the session is stopped from outside
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (exited, not reaped by its dead parent yet) holds nothing.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" in status.read_text()


def free(port: int) -> bool:
    """Nothing listens on ``port``: a server can listen there again (as brokers do, with
    SO_REUSEADDR, so closed connections waiting in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
        return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_a_stopped_session_leaves_no_broker_and_no_port(
    pytester: pytest.Pytester, tmp_path: Path, sig: signal.Signals
) -> None:
    pytester.makepyfile(test_sample=SAMPLE)
    info_file = tmp_path / "cluster.json"
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(pytester.path)],
        cwd=pytester.path,
        env={**os.environ, "CLUSTER_INFO": str(info_file)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_sync(info_file.exists, timeout=90, message="the test holds its cluster")
        info = json.loads(info_file.read_text())
        assert len(info["pids"]) == 2 and session.pid not in info["pids"]
        session.send_signal(sig)
        out, _ = session.communicate(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
    wait_until_sync(
        lambda: all(gone(p) for p in info["pids"]),
        timeout=30,
        message=f"broker processes {info['pids']} gone\n{out.decode()[-2000:]}",
    )
    wait_until_sync(lambda: all(free(p) for p in info["ports"]), timeout=30, message="ports free")
    if sig == signal.SIGINT:
        assert b"KeyboardInterrupt" in out or b"Interrupted" in out, out.decode()[-2000:]
