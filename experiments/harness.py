"""What every scenario of `purgatory experiment run` is given: its options, a progress bar
over its planned steps, and brokers (started for it, or someone else's)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from purgatory.experiments.processes import Brokers, admin_call, existing_brokers, local_brokers
from purgatory.experiments.recorder import Recorder


@dataclass
class Options:
    out: Path
    bootstrap: str | None = None
    admin: list[str] = field(default_factory=list)
    duration_s: float = 60.0  # scenario-dependent meaning; small values for smoke runs
    partitions: int = 6
    records: int = 2000
    progress: bool = True
    params: dict[str, Any] = field(default_factory=dict)


class Steps:
    """A progress bar over the scenario's planned steps (seconds or items), on stderr."""

    def __init__(self, total: float, enabled: bool) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=not enabled,
        )
        self.task = self.progress.add_task("setup", total=total)

    def __enter__(self) -> Steps:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def describe(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def advance(self, amount: float = 1.0) -> None:
        self.progress.advance(self.task, amount)

    async def sleep(self, seconds: float, text: str) -> None:
        self.describe(text)
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            await asyncio.sleep(min(0.2, left))
            self.advance(min(0.2, left))


@contextlib.asynccontextmanager
async def brokers_for(
    options: Options, n: int, settings: dict[str, Any], recorder: Recorder
) -> AsyncIterator[Brokers]:
    if options.bootstrap:
        async with existing_brokers(options.bootstrap, options.admin) as brokers:
            recorder.manifest["brokers"] = {"bootstrap": brokers.bootstrap, "admin": brokers.admins}
            for base in brokers.admins.values():  # a clean slate on someone else's cluster
                await admin_call(base, "POST", "/v1/faults/reset", {})
            yield brokers
        return
    async with local_brokers(n, settings, options.out / "logs") as brokers:
        recorder.manifest["brokers"] = {
            "bootstrap": brokers.bootstrap,
            "admin": brokers.admins,
            "settings": brokers.settings,
            "pids": [p.pid for p in brokers.supervisor.procs.values()]
            if brokers.supervisor
            else [],
        }
        recorder.write_manifest()
        yield brokers
