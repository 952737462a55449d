"""Supervisor: the broker processes of a local cluster, by id: started, watched, stopped,
killed, paused and restarted one at a time (what `purgatory cluster`, its control endpoint
and the experiment runner drive). A broker that exits is reported, never followed by the
others: the cluster keeps running without it, as a real one would.

Each broker keeps its metadata log (its votes, the cluster's metadata) in a directory of
its own that outlives its process but not the cluster (``metadata.log.dir``, under one
temporary directory the supervisor removes when it closes): a restarted broker remembers
the quorum, as Raft needs, and a new cluster starts empty, as the brokers' logs do."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from purgatory.broker.ops.lifeline import lifeline_args

# How long a broker may take over a controlled shutdown (SIGTERM) before it is killed:
# controlled.shutdown.max.retries (3) x controlled.shutdown.retry.backoff.ms (5 s) and then
# some, as a broker whose controller is gone retries that long.
STOP_TIMEOUT_S = 30.0


class SupervisorError(Exception):
    """A request the supervisor cannot carry out (unknown broker, already running, ...)."""


def get_json(url: str, timeout: float = 1.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def healthy(admin_url: str) -> bool:
    """Whether the broker at ``admin_url`` answers /healthz with 200."""
    try:
        with urllib.request.urlopen(f"{admin_url}/healthz", timeout=1) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return False  # not listening yet, or not an HTTP answer: not healthy (yet)


class Supervisor:
    def __init__(
        self,
        commands: list[list[str]],
        admin_urls: list[str],
        log_dir: Path | None = None,
        startup_timeout: float = 30.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.commands = commands
        # Added to this process's environment for every broker (the cluster secret).
        self.environ = dict(environ or {})
        self.admin_urls = admin_urls
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.paused: set[int] = set()
        self._expected_exit: set[int] = set()  # stopped or killed on request
        self._reported: set[int] = set()  # exits already returned by unexpected_exits()
        self._logs: dict[int, IO[Any]] = {}
        self._lock = threading.RLock()
        self.metadata_dir = Path(tempfile.mkdtemp(prefix="purgatory-metadata-"))
        # The lifeline: every broker gets the read end of this pipe and exits when it
        # reads end of file, which happens when this process is gone however it ended
        # (SIGKILL included): no broker outlives its supervisor.
        self._lifeline, self._lifeline_keep = os.pipe()

    @property
    def ids(self) -> range:
        return range(len(self.commands))

    def _check(self, broker_id: int) -> None:
        if broker_id not in self.ids:
            raise SupervisorError(f"no broker {broker_id}: brokers are 0..{len(self.commands) - 1}")

    def _running_proc(self, broker_id: int) -> subprocess.Popen[bytes]:
        self._check(broker_id)
        proc = self.procs.get(broker_id)
        if proc is None or proc.poll() is not None:
            raise SupervisorError(f"broker {broker_id} is not running")
        return proc

    def running(self, broker_id: int) -> bool:
        proc = self.procs.get(broker_id)
        return proc is not None and proc.poll() is None

    # -- one broker ------------------------------------------------------------------------

    def start(self, broker_id: int) -> None:
        """Start a broker process (a new incarnation: its logs start empty)."""
        self._check(broker_id)
        with self._lock:
            if self.running(broker_id):
                raise SupervisorError(f"broker {broker_id} is already running")
            out: IO[Any] | None = None
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                old = self._logs.pop(broker_id, None)
                if old is not None:
                    old.close()
                out = open(self.log_dir / f"broker-{broker_id}.log", "ab")  # noqa: SIM115
                self._logs[broker_id] = out
            self.procs[broker_id] = subprocess.Popen(
                [
                    *self.commands[broker_id],
                    *self._metadata_args(broker_id),
                    *lifeline_args(self._lifeline),
                ],
                stdout=out,
                stderr=out,
                start_new_session=True,
                pass_fds=(self._lifeline,),
                env={**os.environ, **self.environ} if self.environ else None,
            )
            self.paused.discard(broker_id)
            self._expected_exit.discard(broker_id)
            self._reported.discard(broker_id)

    def _metadata_args(self, broker_id: int) -> list[str]:
        """Where the broker keeps its metadata log, unless its command says."""
        if any(arg.startswith("metadata.log.dir=") for arg in self.commands[broker_id]):
            return []
        return ["--set", f"metadata.log.dir={self.metadata_dir / f'broker-{broker_id}'}"]

    def wait_healthy(self, broker_ids: list[int], timeout: float | None = None) -> None:
        """Wait until every broker in ``broker_ids`` answers /healthz with 200; raise
        SupervisorError if one exits or the timeout passes."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        waiting = set(broker_ids)
        while waiting:
            for i in sorted(waiting):
                proc = self.procs.get(i)
                if proc is None or proc.poll() is not None:
                    code = None if proc is None else proc.returncode
                    raise SupervisorError(f"broker {i} exited with code {code} during start")
                if self.healthy(i):
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                raise SupervisorError(f"brokers {sorted(waiting)} not healthy after {timeout}s")
            time.sleep(0.05)

    def healthy(self, broker_id: int) -> bool:
        return healthy(self.admin_urls[broker_id])

    def stop(self, broker_id: int, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (the broker hands its leaderships over first: a controlled shutdown),
        then SIGKILL if it has not exited within ``timeout``."""
        with self._lock:
            proc = self._running_proc(broker_id)
            self._expected_exit.add(broker_id)
            self.resume(broker_id)  # a stopped process cannot act on SIGTERM
            proc.terminate()
        _wait_or_kill(proc, timeout)

    def kill(self, broker_id: int) -> None:
        """SIGKILL: the broker dies at once, as in a crash (its partitions move after
        broker.session.timeout.ms)."""
        with self._lock:
            proc = self._running_proc(broker_id)
            self._expected_exit.add(broker_id)
            proc.kill()
            proc.wait()
            self.paused.discard(broker_id)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process freezes (a long GC pause, a VM stall); its sockets stay open."""
        with self._lock:
            os.kill(self._running_proc(broker_id).pid, signal.SIGSTOP)
            self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self._check(broker_id)
        with self._lock:
            if self.running(broker_id) and broker_id in self.paused:
                os.kill(self.procs[broker_id].pid, signal.SIGCONT)
            self.paused.discard(broker_id)

    def restart(self, broker_id: int) -> None:
        if self.running(broker_id):
            self.stop(broker_id)
        self.start(broker_id)

    # -- the whole cluster ---------------------------------------------------------------

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def unexpected_exits(self) -> list[tuple[int, int]]:
        """Brokers that exited without being asked to since the last call: (id, code)."""
        out = []
        with self._lock:
            for i, proc in self.procs.items():
                code = proc.poll()
                if code is not None and i not in self._expected_exit and i not in self._reported:
                    self._reported.add(i)
                    out.append((i, code))
        return out

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for i in self.ids:
            proc = self.procs.get(i)
            if proc is None:
                state, code = "stopped", None
            elif proc.poll() is not None:
                state, code = ("stopped" if i in self._expected_exit else "exited"), proc.returncode
            else:
                state, code = ("paused" if i in self.paused else "running"), None
            out.append(
                {
                    "broker": i,
                    "state": state,
                    "pid": proc.pid if proc is not None and state != "stopped" else None,
                    "exit_code": code,
                    "admin": self.admin_urls[i],
                }
            )
        return out

    def controller(self) -> int | None:
        """The broker that says it is the controller, if one answers."""
        for i in self.ids:
            if self.running(i) and i not in self.paused:
                with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                    if get_json(f"{self.admin_urls[i]}/v1/state").get("is_controller"):
                        return i
        return None

    def stop_all(self) -> None:
        """Stop every broker: the others first (each hands over to the controller), then
        the controller, so no controlled shutdown waits on a controller already gone."""
        with self._lock:
            for i in list(self.paused):
                self.resume(i)
            controller = self.controller()
            first = [i for i in self.ids if i != controller and self.running(i)]
            for group in (first, [controller] if controller is not None else []):
                procs = [self.procs[i] for i in group if self.running(i)]
                self._expected_exit.update(group)
                for proc in procs:
                    proc.terminate()
                deadline = time.monotonic() + STOP_TIMEOUT_S
                for proc in procs:
                    _wait_or_kill(proc, max(0.1, deadline - time.monotonic()))
            self._expected_exit.update(self.ids)
            for proc in self.procs.values():
                _wait_or_kill(proc, 0.1)
            self.close()

    def close(self) -> None:
        """Close the brokers' log files and the lifeline (any broker still running
        exits); the supervisor starts nothing after this."""
        for handle in self._logs.values():
            handle.close()
        self._logs.clear()
        for fd in (self._lifeline, self._lifeline_keep):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lifeline = self._lifeline_keep = -1
        shutil.rmtree(self.metadata_dir, ignore_errors=True)


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
