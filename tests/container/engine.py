"""Podman as the container tests drive it: found (or the reason it is not), run with the
limits this machine allows, the image built by deploy/container/build.sh."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).parents[2]
IMAGE = "localhost/purgatory:test"
# A container may not raise a limit above the engine's own: nested or sandboxed engines
# refuse podman's defaults (nofile 1048576), and some refuse a high nproc that the shell
# reports (seen here: 96365 reported, above 32768 refused).
NPROC = 4096


def engine_problem() -> str | None:
    """Why podman cannot run the image here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (make system-packages installs it on Debian as root)"
    if os.geteuid() != 0:
        return "the container tests run rootful podman (root), and this is not root"
    if shutil.which("debootstrap") is None:
        return "debootstrap is missing: the image's base is built locally without a registry"
    return None


def containers_conf(directory: Path) -> Path:
    """A containers.conf whose default ulimits are at or below this process's, so that
    every container (`podman run`, podman-compose's) may start."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    nproc = NPROC if nproc == resource.RLIM_INFINITY else min(nproc, NPROC)
    path = directory / "containers.conf"
    path.write_text(
        f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
    )
    return path


class Podman:
    def __init__(self, conf: Path) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def run(
        self, *args: str, check: bool = True, timeout: float = 120, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=cwd,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} exited {done.returncode}: {_quiet(done.stderr)[-3000:]}"
            )
        return done

    def build(self, tag: str) -> None:
        built = subprocess.run(
            [str(ROOT / "deploy/container/build.sh"), tag],
            capture_output=True,
            text=True,
            timeout=900,
            env=self.env,
        )
        assert built.returncode == 0, (built.stdout + _quiet(built.stderr))[-4000:]

    def start(self, *args: str) -> str:
        """`podman run -d` ARGS: the container's id (removed by `remove`)."""
        return self.run("run", "-d", *args).stdout.strip()

    def host_port(self, container: str, port: int) -> tuple[str, int]:
        """Where the host reaches the container's ``port``."""
        mapped = self.run("port", container, f"{port}/tcp").stdout.split()[0]
        host, _, number = mapped.rpartition(":")
        return (host if host not in ("0.0.0.0", "") else "127.0.0.1"), int(number)

    def state(self, container: str) -> dict:
        return json.loads(self.run("inspect", container).stdout)[0]["State"]

    def healthy(self, container: str) -> bool:
        """The image's HEALTHCHECK, run now (no systemd here to run it on its interval)."""
        return self.run("healthcheck", "run", container, check=False).returncode == 0

    def logs(self, container: str) -> str:
        done = self.run("logs", container, check=False)
        return done.stdout + _quiet(done.stderr)

    def remove(self, *containers: str) -> None:
        if containers:
            self.run("rm", "-f", "-v", "-t", "0", *containers, check=False)  # -v: its volumes


def until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def _quiet(stderr: str) -> str:
    """podman's stderr without its complaints that no systemd runs healthcheck timers."""
    return "\n".join(line for line in stderr.splitlines() if "systemd" not in line)


def bootstrap(addresses: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{host}:{port}" for host, port in addresses)
