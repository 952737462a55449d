"""`purgatory perf compare` runs Purgatory, Apache Kafka, franz-go's kfake and librdkafka's
mock cluster with the same client, small, and reports every measure for each."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from purgatory.testing.compare_bench import MEASURES, SYSTEMS, TARGETS, markdown, unavailable

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    for system in SYSTEMS:
        if (reason := unavailable(system)) is not None:
            pytest.skip(reason)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "purgatory",
            "perf",
            "compare",
            "--brokers",
            "1",
            "--runs",
            "1",
            "--num-records",
            "3000",
            "--rate",
            "50",
            "--seconds",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_every_system_is_measured_on_every_measure(result: dict[str, Any]) -> None:
    assert set(result["median"]) == set(SYSTEMS)
    for system, figures in result["median"].items():
        assert set(figures) == {name for name, _label in MEASURES}, system
        assert all(value > 0 for value in figures.values()), (system, figures)
        assert len(result["samples"][system]) == 1


def test_purgatory_is_held_to_issue_44s_targets_against_kafka(result: dict[str, Any]) -> None:
    versus = result["purgatory_vs_kafka"]
    assert set(versus) == set(TARGETS)
    for name, entry in versus.items():
        ours, kafka = result["median"]["purgatory"][name], result["median"]["kafka"][name]
        assert entry["ratio"] == round(ours / kafka, 3)
        assert isinstance(entry["met"], bool)


def test_the_markdown_table_has_a_row_per_measure_and_a_column_per_system(
    result: dict[str, Any],
) -> None:
    rows = markdown(result).splitlines()
    columns = [*result["median"], "Purgatory / Kafka", "target"]
    assert rows[0].split("|")[2:-1] == [f" {c} " for c in columns]
    assert len(rows) == 2 + len(MEASURES)
    assert all(len(row.split("|")) == len(columns) + 3 for row in rows)
