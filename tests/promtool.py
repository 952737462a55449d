"""Prometheus's own verdict on a /metrics text: `promtool check metrics` (Debian's and
Ubuntu's `prometheus` package installs it; CI does)."""

from __future__ import annotations

import shutil
import subprocess


def promtool_problems(text: str) -> list[str] | None:
    """What `promtool check metrics` says of ``text``: its errors and lint warnings, one a
    line ([] if it passes), or None without promtool on PATH.

    No warning is excepted: promtool's lint (counters end in ``_total``, base units, no
    ``_total`` on a gauge, ...) passes every family the broker exports. Should a name ever
    break a lint rule on purpose, except that one warning here and say why."""
    promtool = shutil.which("promtool")
    if promtool is None:
        return None
    run = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    problems = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    if run.returncode != 0 and not problems:
        problems.append(f"promtool exited with {run.returncode} and said nothing")
    return problems
