"""Ctrl-C (SIGINT) and SIGTERM for a command that winds down on the first and gives up on
the second: ``purgatory produce``, ``consume``, ``perf produce`` and ``perf consume``.

One handler, installed with ``signal.signal`` for the whole command, counts the signals:
asyncio's own SIGINT handling (the runner cancels the main task, then raises
KeyboardInterrupt) never runs beside it, so one Ctrl-C is one count whichever phase or
event loop of the command it lands in. The command learns of it through a callback run
on its event loop, or by reading ``count`` between loops, and prints its summary either
way.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """``with Interrupts(on_signal) as interrupts:`` counts SIGINT and SIGTERM while the
    block runs and calls ``on_signal(name, count)`` on the event loop running when each
    arrives (at once when none runs). The handlers in force before are restored after."""

    def __init__(self, on_signal: Callable[[str, int], None] | None = None) -> None:
        self.count = 0
        self.on_signal = on_signal
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.on_signal is None:
            return
        name = signal.Signals(signum).name
        loop = asyncio._get_running_loop()
        if loop is None:
            self.on_signal(name, self.count)
        else:  # a signal handler runs between any two bytecodes: hand over to the loop
            loop.call_soon_threadsafe(self.on_signal, name, self.count)
