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


def healthz(admin_url: str) -> tuple[int, dict[str, Any]] | None:
    """What the broker at ``admin_url`` answers on /healthz: (HTTP status, its JSON: 200
    when healthy, 503 while starting), or None when nothing answers there as a broker
    does (not listening yet, or another kind of server)."""
    try:
        with urllib.request.urlopen(f"{admin_url}/healthz", timeout=1) as r:
            status, body = r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        try:
            status, body = exc.code, json.load(exc)
        except (OSError, ValueError, http.client.HTTPException):
            return None
        finally:
            exc.close()
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        return None
    return (status, body) if isinstance(body, dict) else None


def healthy(admin_url: str) -> bool:
    """Whether the broker at ``admin_url`` answers /healthz with 200 (whichever process
    it is: ``Supervisor.healthy`` also proves it is the one started)."""
    answer = healthz(admin_url)
    return answer is not None and answer[0] == 200


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
        self._log_starts: dict[int, int] = {}  # broker id -> offset of its latest run's output
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
                self._log_starts[broker_id] = out.tell()  # where this run's output begins
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
        """Wait until every broker in ``broker_ids`` is healthy (``healthy``: its own
        process answers /healthz with 200); raise SupervisorError, with the broker's reason
        when its log has one, if one exits or the timeout passes."""
        limit = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        waiting = set(broker_ids)
        strangers: dict[int, Any] = {}  # broker id -> pid of another process answering
        while waiting:
            for i in sorted(waiting):
                proc = self.procs.get(i)
                if proc is None or proc.poll() is not None:
                    code = None if proc is None else proc.returncode
                    reason = self.exit_reason(i)
                    raise SupervisorError(
                        f"broker {i} exited with code {code} during start"
                        + (f": {reason}" if reason else "")
                    )
                answer = healthz(self.admin_urls[i])
                if answer is not None and answer[1].get("pid") != proc.pid:
                    strangers[i] = answer[1].get("pid")
                elif answer is not None and answer[0] == 200:
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                raise SupervisorError(
                    f"brokers {sorted(waiting)} not healthy after {limit:g}s"
                    + "".join(
                        f"; another process{'' if pid is None else f' (pid {pid})'} answers "
                        f"on broker {i}'s admin port, {self.admin_urls[i]}"
                        for i, pid in sorted(strangers.items())
                        if i in waiting
                    )
                )
            time.sleep(0.05)

    def healthy(self, broker_id: int) -> bool:
        """Whether the broker's own process (the pid /healthz names) answers /healthz with
        200: another broker on the same admin port (another cluster's) is not it."""
        proc = self.procs.get(broker_id)
        if proc is None or proc.poll() is not None:
            return False
        answer = healthz(self.admin_urls[broker_id])
        return answer is not None and answer[0] == 200 and answer[1].get("pid") == proc.pid

    def exit_reason(self, broker_id: int) -> str | None:
        """Why a broker that exited did, when its output goes to a log file: the last line
        of its latest run, when it is the ``purgatory broker ...: reason`` a broker prints
        as it gives up (a port already in use, a config error)."""
        if self.log_dir is None:
            return None  # its output went to this process's stderr: the user saw it
        try:
            with open(self.log_dir / f"broker-{broker_id}.log", "rb") as log:
                log.seek(max(self._log_starts.get(broker_id, 0), log.seek(0, os.SEEK_END) - 4096))
                lines = log.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return None
        if not lines or not lines[-1].startswith("purgatory broker"):
            return None
        return lines[-1].split(": ", 1)[-1]

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
