"""How the command-line tools print: tables that wrap to a terminal and are never cut in a
pipe or a file, one JSON document for ``--json``, and messages on stderr.

Rich lays a table out for 80 columns when stdout is not a terminal, folding or cutting
what does not fit. Here a table printed to a pipe gets the width its widest row needs,
so ``purgatory admin config get | grep`` sees every name and value whole.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

# Messages for people: errors, warnings, summaries. Never wrapped when stderr is not a
# terminal (a log file keeps one message per line).
err = Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())

T = TypeVar("T")


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A table whose cells are shown as they are: a value like ``[remote]`` is text, not
    rich markup, and None is shown as ``-``."""
    out = Table(title=title)
    for column in columns:
        out.add_column(column)
    for row in rows:
        out.add_row(*(Text("-" if v is None else str(v)) for v in row))
    return out


def print_table(rendered: Table) -> None:
    """Print to stdout: wrapped to a terminal's width, at full width anywhere else."""
    console = Console(highlight=False)
    if not console.is_terminal:
        measuring = Console(width=1 << 20, file=io.StringIO())
        console = Console(width=max(measuring.measure(rendered).maximum, 1), highlight=False)
    console.print(rendered)


def print_json(document: object) -> None:
    """One JSON document on stdout, without colour: what ``--json`` prints."""
    print(json.dumps(document, indent=2))


def parse_file(path: str, parse: Callable[[str], T], command: str) -> T | None:
    """``parse`` of the text of the file at ``path``; None once it has said on stderr, in
    one line, why the file could not be read or ``parse`` refused it (a ValueError)."""
    try:
        with open(path, encoding="utf-8") as file:
            return parse(file.read())
    except OSError as exc:
        err.print(f"[red]purgatory {command}: {exc.strerror}: {exc.filename}[/red]")
    except ValueError as exc:
        err.print(f"[red]purgatory {command}: {path}: {exc}[/red]")
    return None
