"""How ``purgatory perf produce`` and ``perf consume`` run: on a uvloop loop, library
warnings on stderr, and a summary on stdout however the run ends, Ctrl-C included."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import structlog
import uvloop

from purgatory.clients.cli.interrupts import Interrupts
from purgatory.clients.cli.tools import client_logging

Measure = Callable[[Interrupts], Coroutine[Any, Any, dict[str, Any]]]


def run_benchmark(
    command: str,
    measure: Measure,
    *,
    failures: tuple[type[Exception], ...],
    given_up: str,
    as_json: bool,
) -> dict[str, Any] | int:
    """Run ``measure(interrupts)`` and print its summary, with ``"interrupted"`` added;
    return the summary, or the exit status when there is none: 1 for one of ``failures``
    (named on stderr), 130 when a signal cancelled the run (``given_up`` says how far)."""
    if not structlog.is_configured():  # a command of its own, not a caller's test
        client_logging()
    with Interrupts() as interrupts:
        try:
            summary = uvloop.run(measure(interrupts))
        except failures as exc:
            print(f"purgatory {command}: {exc}", file=sys.stderr)
            return 1
        except asyncio.CancelledError:
            print(f"purgatory {command}: {given_up}", file=sys.stderr)
            return 130
    summary["interrupted"] = interrupts.count > 0
    print(json.dumps(summary, indent=None if as_json else 2))
    return summary
