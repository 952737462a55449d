"""`purgatory perf rebalance` measures a group forming and rebalancing after a leave, for
our client and confluent-kafka on Purgatory and confluent-kafka on librdkafka's mock."""

from __future__ import annotations

import json

import pytest

from tests.support import purgatory_cli

pytestmark = pytest.mark.cluster


def test_the_rebalance_benchmark_measures_every_target_and_skips_what_it_is_told_to() -> None:
    # librdkafka's mock does not settle with sessions under about 6 s.
    options = (
        "--members 1,3 --confluent-max-members 1 --initial-delay-ms 0 --session-timeout-ms 6000"
        " --heartbeat-interval-ms 200 --quiet-ms 300 --timeout 60 --json"
    )
    run = purgatory_cli("perf", "rebalance", *options.split())
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert "perf rebalance: purgatory/ours, 3 members" in run.stderr  # progress
    for target in ("mock/confluent", "purgatory/confluent", "purgatory/ours"):
        single = result[target]["1"]
        assert single["form"]["ms"] > 0 and single["form"]["assignments"] >= 1
        assert "leave" not in single  # nobody is left to rebalance
    group = result["purgatory/ours"]["3"]
    assert group["form"]["assignments"] >= 3 and group["leave"]["assignments"] >= 2
    assert group["form"]["ms"] > 0 and group["leave"]["ms"] > 0
    assert "confluent-max-members" in result["purgatory/confluent"]["3"]["skipped"]
    assert "confluent-max-members" in result["mock/confluent"]["3"]["skipped"]
