"""The lifeline between a supervisor and its broker processes: the supervisor holds the
write end of a pipe and hands each broker the read end (``purgatory broker --lifeline-fd
N``). Nothing is ever written; a broker that reads end of file knows its supervisor is
gone (exited, crashed, SIGKILLed) and stops, so no broker outlives the `purgatory
cluster`, test session or benchmark that started it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable


def lifeline_args(fd: int) -> list[str]:
    """What a supervisor adds to a `purgatory broker` command line."""
    return ["--lifeline-fd", str(fd)]


def watch_lifeline(fd: int, on_lost: Callable[[], None]) -> None:
    """Call ``on_lost`` once, on the running loop, when the supervisor's end closes."""
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            data = os.read(fd, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            os.close(fd)
            on_lost()

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
