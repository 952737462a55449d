"""Run one broker process: resolve its config, start it on uvloop, stop it on a signal."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Mapping

import uvloop

from purgatory.broker.config.broker_config import BrokerConfig, load_config, parse_assignments
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.listeners import parse_listeners
from purgatory.broker.network.acceptor import ListenError
from purgatory.broker.ops.lifeline import watch_lifeline
from purgatory.common import gc_policy

SUPERVISOR_GONE = 0  # not a signal number: the lifeline broke


def config_from_args(args: argparse.Namespace) -> dict[str, str]:
    """--set assignments, then the dedicated flags (which win)."""
    overrides = parse_assignments(args.set)
    if args.id is not None:
        overrides["broker.id"] = str(args.id)
    if args.cluster is not None:
        overrides["cluster.members"] = args.cluster
    if args.log_format:
        overrides["log.format"] = args.log_format
    if args.log_level:
        overrides["log.level"] = args.log_level
    if args.add_scram:
        overrides["bootstrap.scram.credentials"] = " ".join(a.strip() for a in args.add_scram)
    return overrides


def keep_unused_out() -> None:
    """Mark missing, for this broker process only, two packages that its libraries
    import whenever they are installed but a broker never uses:

    - rich: a broker process draws nothing on a terminal, but structlog imports rich
      (which the command-line tools install), and rich imports attrs: 5 MB and about
      60 ms of every broker's start (issue 17: 50 brokers on a laptop). structlog then
      uses its plain tracebacks;
    - hypothesis (a test dependency, so in every development checkout): kio registers
      property-test strategies for its types with it when it can import it, which made
      loading the Kafka layer (at a broker's first Kafka client or consumer group) cost
      11 MB and 0.15-0.25 s of CPU, against 3 MB and 0.03 s without.

    Before anything imported structlog or kio."""
    if "structlog" not in sys.modules:
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]  # None: "not installed"
    if "kio" not in sys.modules:
        sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def resolve_config(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> BrokerConfig:
    """The config `purgatory broker ARGS` runs with (``environ``: the process's own unless
    given); ConfigError if it is not one."""
    overrides = config_from_args(args)
    config = load_config(file=args.config, environ=environ, overrides=overrides)
    if args.host is not None or args.port is not None:
        overrides["listeners"] = _one_listener(config, args.host, args.port)
    if args.admin_port is not None or args.host is not None:
        host, port = config.admin_listener()
        overrides["admin.listener"] = (
            f"{args.host or host}:{port if args.admin_port is None else args.admin_port}"
        )
    config = load_config(file=args.config, environ=environ, overrides=overrides)
    problem = config.member_address_problem(
        "--port" if args.port is not None else "listeners",
        "--cluster" if args.cluster is not None else "cluster.members",
    )
    if problem:
        raise ConfigError(problem)
    return config


def run_broker(args: argparse.Namespace) -> int:
    keep_unused_out()
    from purgatory.broker.ops.structured_logging import configure_logging

    try:
        config = resolve_config(args)
    except ConfigError as exc:
        print(f"purgatory broker: {exc}", file=sys.stderr)
        return 2
    configure_logging(config["log.format"], config["log.level"])
    if args.lifeline_fd is not None:
        try:
            os.fstat(args.lifeline_fd)
        except OSError:
            print(
                f"purgatory broker: --lifeline-fd {args.lifeline_fd} is not open", file=sys.stderr
            )
            return 2
    try:
        return uvloop.run(_serve(config, args.lifeline_fd))
    except ValueError as exc:
        print(f"purgatory broker: {exc}", file=sys.stderr)
        return 2
    except ListenError as exc:
        print(f"purgatory broker {config.broker_id}: cannot listen on its {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"purgatory broker {config.broker_id}: cannot listen: {exc}", file=sys.stderr)
        return 1


def _one_listener(config: BrokerConfig, host: str | None, port: int | None) -> str:
    """``listeners`` with --host and --port applied: they stand for its one listener."""
    bound = parse_listeners(config["listeners"])
    if len(bound) != 1:
        raise ConfigError(
            f"--host and --port set the one listener, and listeners names {len(bound)}: "
            "give each its address in listeners (--set listeners=NAME://host:port,...)"
        )
    [(name, bound_host, bound_port)] = bound
    if port is None and config.broker_id in config.members():
        bound_port = config.members()[config.broker_id][1]
    return f"{name}://{host or bound_host}:{bound_port if port is None else port}"


async def _serve(config: BrokerConfig, lifeline_fd: int | None) -> int:
    from purgatory.broker.server import start_broker

    gc_policy.use("broker")
    broker = await start_broker(config)
    # What start-up built lives as long as the process: keep it out of every collection.
    gc.freeze()
    signals: asyncio.Queue[int] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, signals.put_nowait, sig)
    if lifeline_fd is not None:
        watch_lifeline(lifeline_fd, lambda: signals.put_nowait(SUPERVISOR_GONE))
    if await signals.get() == SUPERVISOR_GONE:
        # The whole cluster goes: nobody to hand leadership to.
        broker.log.warning("supervisor_gone", hint="the process that started this broker exited")
        await broker.stop()
        return 0
    # Hand leadership over first (controlled shutdown); a second signal stops at once.
    handover = asyncio.ensure_future(broker.controlled_shutdown())
    second = asyncio.ensure_future(signals.get())
    await asyncio.wait([handover, second], return_when=asyncio.FIRST_COMPLETED)
    for task in (handover, second):
        task.cancel()
    await broker.stop()
    return 0
