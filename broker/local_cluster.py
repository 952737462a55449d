"""`purgatory cluster`: N broker processes on this machine, started, watched and stopped together."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any


def replication_defaults(args: argparse.Namespace, environ: dict[str, str]) -> list[str]:
    """A local cluster is a replicated one: replication factor min(3, N) and, from 3 brokers,
    min.insync.replicas 2, unless the user set them (--set, PURGATORY_*, or --config)."""
    from broker.config.broker_config import load_config, parse_assignments
    from broker.config.definitions import BY_NAME, ENV_PREFIX

    chosen = {BY_NAME[name].name for name in parse_assignments(args.set) if name in BY_NAME}
    chosen |= {
        BY_NAME[key[len(ENV_PREFIX) :].lower().replace("_", ".")].name
        for key in environ
        if key.startswith(ENV_PREFIX)
        and key[len(ENV_PREFIX) :].lower().replace("_", ".") in BY_NAME
    }
    if args.config:
        chosen |= set(load_config(file=args.config, environ={}).sources)
    defaults = {"default.replication.factor": str(min(3, args.brokers))}
    if args.brokers >= 3:
        defaults["min.insync.replicas"] = "2"
    return [f"{k}={v}" for k, v in defaults.items() if k not in chosen]


def broker_commands(
    args: argparse.Namespace, environ: dict[str, str] | None = None
) -> list[list[str]]:
    members = ",".join(f"{i}@{args.host}:{args.base_port + i}" for i in range(args.brokers))
    settings = replication_defaults(args, dict(os.environ if environ is None else environ)) + list(
        args.set
    )
    commands = []
    for i in range(args.brokers):
        cmd = [
            sys.executable,
            "-m",
            "purgatory",
            "broker",
            "--id",
            str(i),
            "--host",
            args.host,
            "--port",
            str(args.base_port + i),
            "--admin-port",
            str(args.admin_base_port + i),
            "--cluster",
            members,
        ]
        if args.config:
            cmd += ["--config", args.config]
        for item in settings:
            cmd += ["--set", item]
        if args.log_format:
            cmd += ["--log-format", args.log_format]
        if args.log_level:
            cmd += ["--log-level", args.log_level]
        commands.append(cmd)
    return commands


def healthy(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class _Stop(Exception):
    pass


def run_cluster(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    if not 1 <= args.brokers <= 64:
        console.print("[red]--brokers must be between 1 and 64[/red]")
        return 2
    from broker.config.definitions import ConfigError

    try:
        commands = broker_commands(args)
    except ConfigError as exc:
        console.print(f"[red]purgatory cluster: {exc}[/red]")
        return 2
    logs: list[IO[Any]] = []
    procs: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for i, cmd in enumerate(commands):
            out: IO[Any] | None = None
            if args.log_dir:
                Path(args.log_dir).mkdir(parents=True, exist_ok=True)
                out = open(Path(args.log_dir) / f"broker-{i}.log", "ab")  # noqa: SIM115
                logs.append(out)
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=out, start_new_session=True))
        deadline = time.monotonic() + args.startup_timeout
        waiting = set(range(args.brokers))
        with console.status(f"starting {args.brokers} brokers..."):
            while waiting:
                for i in list(waiting):
                    if procs[i].poll() is not None:
                        console.print(
                            f"[red]broker {i} exited with code {procs[i].returncode} during start[/red]"
                        )
                        return 1
                    if healthy(args.host, args.admin_base_port + i):
                        waiting.discard(i)
                if waiting and time.monotonic() > deadline:
                    console.print(
                        f"[red]brokers {sorted(waiting)} not healthy after {args.startup_timeout}s[/red]"
                    )
                    return 1
                time.sleep(0.05)
        bootstrap = ",".join(f"{args.host}:{args.base_port + i}" for i in range(args.brokers))
        table = Table(title=f"purgatory cluster: {args.brokers} brokers")
        table.add_column("broker")
        table.add_column("bootstrap")
        table.add_column("metrics")
        table.add_column("pid")
        for i, proc in enumerate(procs):
            table.add_row(
                str(i),
                f"{args.host}:{args.base_port + i}",
                f"http://{args.host}:{args.admin_base_port + i}/metrics",
                str(proc.pid),
            )
        console.print(table)
        print(
            json.dumps(
                {
                    "bootstrap": bootstrap,
                    "admin": [
                        f"http://{args.host}:{args.admin_base_port + i}"
                        for i in range(args.brokers)
                    ],
                }
            ),
            flush=True,
        )
        console.print("[green]ready[/green]; Ctrl-C stops every broker")
        while True:
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    console.print(
                        f"[red]broker {i} exited with code {proc.returncode}; stopping the rest[/red]"
                    )
                    return 1
            time.sleep(0.2)
    except _Stop as stop:
        console.print(f"{stop}: stopping {len(procs)} brokers")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(procs)
        for handle in logs:
            handle.close()


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every broker, wait up to 10 s for all, then SIGKILL the rest."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 10
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        if proc.poll() is None:
            proc.kill()
            proc.wait()
