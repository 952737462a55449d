"""A rich progress bar that follows a running benchmark without touching its hot path."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextlib.asynccontextmanager
async def progress_of(
    load: Any,
    total_records: int,
    records_per_request: int,
    *,
    enabled: bool,
    attribute: str = "done",
    label: str = "records",
) -> AsyncIterator[None]:
    """Show records completed (``getattr(load, attribute) * records_per_request``), the
    bar named ``label``."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    progress = Progress(
        TextColumn(f"[bold]{escape(label)}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task(label, total=total_records)

    async def follow() -> None:
        while True:
            progress.update(task, completed=getattr(load, attribute) * records_per_request)
            await asyncio.sleep(0.1)

    with progress:
        follower = asyncio.ensure_future(follow())
        try:
            yield
        finally:
            follower.cancel()
