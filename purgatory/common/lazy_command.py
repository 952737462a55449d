"""Commands that import their module only when they run, so ``purgatory --help`` and a
missing optional extra cost nothing until used."""

from __future__ import annotations

import argparse
from typing import Any

# Optional dependencies, by the extra that brings them (pyproject.toml).
EXTRAS = {"rich": "cli", "trustme": "cli", "matplotlib": "plots", "pyspark": "spark"}


def lazy(module: str, name: str) -> Any:
    """A command function that imports ``module`` only when the command runs. A command
    whose optional dependency is not installed says which extra brings it."""

    def run(args: argparse.Namespace) -> int:
        import importlib
        import sys

        try:
            return int(getattr(importlib.import_module(module), name)(args) or 0)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing not in EXTRAS:
                raise
            extra = EXTRAS[missing]
            print(
                f"purgatory: this command needs {missing}, which the {extra!r} extra "
                f"installs: pip install 'purgatory-broker[{extra}]'",
                file=sys.stderr,
            )
            return 1

    return run
