"""The README's pytest example in a user's own project, as a newcomer meets it: a new
virtualenv with nothing but `purgatory-broker[testing]` (from a wheel of this checkout)
and the client library the example imports, the README's pytest.ini, the README's tests,
run by pytest far from this repository's own configuration."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).parents[2]


def readme_block(language: str, containing: str) -> str:
    blocks = re.findall(
        rf"^```{language}\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M
    )
    [block] = [b for b in blocks if containing in b]
    return block


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def test_the_readme_pytest_example_passes_in_a_fresh_project(tmp_path: Path) -> None:
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path, ROOT, cwd=tmp_path)
    [wheel] = tmp_path.glob("purgatory_broker-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    # What the README says to install, and the client library its example imports.
    run(python, "-m", "pip", "install", "-q", f"{wheel}[testing]", "confluent-kafka", cwd=tmp_path)

    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text(readme_block("ini", "asyncio_mode"))
    (project / "tests" / "test_with_purgatory.py").write_text(
        readme_block("python", "def test_confluent(purgatory_cluster")
    )
    done = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert re.search(r"\b3 passed\b", done.stdout), done.stdout
    assert "warning" not in done.stdout.lower(), done.stdout
