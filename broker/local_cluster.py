"""`purgatory cluster`: N broker processes on this machine, started together, watched and
steered one at a time (its Supervisor and control endpoint), stopped together."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from purgatory.clients.cluster_auth import SECRET_ENV


def replication_defaults(args: argparse.Namespace, environ: dict[str, str]) -> list[str]:
    """A local cluster is a replicated one: replication factor min(3, N) and, from 3 brokers,
    min.insync.replicas 2, unless the user set them (--set, PURGATORY_*, or --config)."""
    from purgatory.broker.config.broker_config import load_config, parse_assignments
    from purgatory.broker.config.definitions import BY_NAME, ENV_PREFIX

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


def cluster_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the brokers of one cluster share through their environment: the cluster
    secret (PURGATORY_CLUSTER_SECRET if ``environ`` has it, else a new one)."""
    given = (os.environ if environ is None else environ).get(SECRET_ENV, "")
    return {SECRET_ENV: given or secrets.token_hex(16)}


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


def bind_problem(what: str, host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now, as a broker would bind it (with
    SO_REUSEADDR: a port whose old connections linger in TIME_WAIT is free), said as
    "<what> host:port: address already in use"; None when it can."""
    from purgatory.broker.network.acceptor import ListenError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        return str(ListenError(what, host, port, exc))
    return None


def taken_ports(args: argparse.Namespace) -> list[str]:
    """The ports this cluster's brokers would listen on that are not free now: a cluster
    whose broker cannot bind fails before it starts one, rather than find another
    cluster's broker answering in its place."""
    problems = []
    for i in range(args.brokers):
        for what, port in (("client", args.base_port + i), ("admin", args.admin_base_port + i)):
            problem = bind_problem(f"broker {i}'s {what} port", args.host, port)
            if problem:
                problems.append(problem)
    return problems


class _Stop(Exception):
    pass


def run_cluster(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from purgatory.broker.network.acceptor import ListenError
    from purgatory.broker.ops.admin_http import resolve_token
    from purgatory.broker.ops.cluster_control import serve_control
    from purgatory.broker.ops.supervisor import Supervisor, SupervisorError
    from purgatory.common.admin_request import TOKEN_ENV

    console = Console(stderr=True)
    if not 1 <= args.brokers <= 64:
        console.print("[red]--brokers must be between 1 and 64[/red]")
        return 2
    for flag, base in (
        ("--base-port", args.base_port),
        ("--admin-base-port", args.admin_base_port),
    ):
        if not 1 <= base <= 65536 - args.brokers:
            console.print(
                f"[red]{flag} must be between 1 and {65536 - args.brokers} for "
                f"{args.brokers} brokers (broker i listens on BASE+i)[/red]"
            )
            return 2
    if not 0 <= args.control_port <= 65535:
        console.print("[red]--control-port must be between 0 (any free port) and 65535[/red]")
        return 2
    from purgatory.broker.config.config_def import ConfigError

    try:
        commands = broker_commands(args)
    except ConfigError as exc:
        console.print(f"[red]purgatory cluster: {exc}[/red]")
        return 2
    taken = taken_ports(args)
    if taken:
        console.print(
            escape(f"purgatory cluster: cannot listen on {'; '.join(taken)}. ")
            + "Another cluster or program holds them: stop it, or choose other ports "
            "(--base-port, --admin-base-port).",
            style="red",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    admins = [f"http://{args.host}:{args.admin_base_port + i}" for i in range(args.brokers)]
    # One admin token for the control endpoint and every broker (they read it from the
    # environment as admin.token), chosen or generated when they listen beyond loopback.
    token, generated = resolve_token(os.environ.get(TOKEN_ENV, ""), args.host)
    if token is not None:
        os.environ[TOKEN_ENV] = token
    if generated:
        console.print(
            f"admin token (changes through the control endpoint and the brokers' admin APIs "
            f"need it; export {TOKEN_ENV} for purgatory admin): {token}"
        )
    supervisor = Supervisor(
        commands,
        admins,
        Path(args.log_dir) if args.log_dir else None,
        args.startup_timeout,
        cluster_environment(),
    )

    def on_signal(signum: int, _frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    control = None
    try:
        try:
            control = serve_control(
                supervisor,
                args.host,
                args.control_port,
                lambda broker, action: console.print(f"broker {broker}: {action} (on request)"),
                token=token,
            )
        except OSError as exc:
            problem = ListenError("control port", args.host, args.control_port, exc)
            console.print(
                escape(f"purgatory cluster: cannot listen on its {problem} ")
                + "(--control-port 0 picks a free one)",
                style="red",
                highlight=False,
                soft_wrap=True,
            )
            return 1
        control_url = f"http://{args.host}:{control.server_address[1]}"
        with console.status(f"starting {args.brokers} brokers..."):
            supervisor.start_all()
            try:
                supervisor.wait_healthy(list(supervisor.ids))
            except SupervisorError as exc:
                console.print(
                    escape(f"purgatory cluster: {exc}"),
                    style="red",
                    highlight=False,
                    soft_wrap=True,
                )
                return 1
        bootstrap = ",".join(f"{args.host}:{args.base_port + i}" for i in range(args.brokers))
        table = Table(title=f"purgatory cluster: {args.brokers} brokers")
        for column in ("broker", "bootstrap", "metrics", "pid"):
            table.add_column(column)
        for i in supervisor.ids:
            table.add_row(
                str(i),
                f"{args.host}:{args.base_port + i}",
                f"{admins[i]}/metrics",
                str(supervisor.procs[i].pid),
            )
        console.print(table)
        print(
            json.dumps({"bootstrap": bootstrap, "admin": admins, "control": control_url}),
            flush=True,
        )
        console.print(
            f"bootstrap {bootstrap}: for Kafka clients (bootstrap.servers) and purgatory "
            "tools alike; each port speaks both protocols"
        )
        console.print(
            f"[green]ready[/green]; Ctrl-C stops every broker. One broker: "
            f"`purgatory admin broker stop|kill|pause|resume|start|restart ID "
            f"--control {control_url}`"
        )
        while True:
            for i, code in supervisor.unexpected_exits():
                console.print(
                    f"[red]broker {i} exited with code {code}[/red]; the other brokers keep "
                    f"running. Bring it back: purgatory admin broker start {i} "
                    f"--control {control_url}"
                )
            time.sleep(0.2)
    except _Stop as stop:
        console.print(f"{stop}: stopping {args.brokers} brokers")
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if control is not None:
            control.shutdown()
        supervisor.stop_all()
