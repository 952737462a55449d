"""Issue 46's exactly-once proof in CI: a consume-transform-produce worker (confluent-kafka,
offsets sent to its transactions) SIGKILLed and restarted 15 times on three broker
processes, two brokers killed -9 under it (the transaction coordinator's, then the group
coordinator's); the output topic read read_committed holds every input record exactly
once. `make eos` runs 50 kills and more (tests/eos)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.eos.run import eos

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(300)
def test_a_consume_transform_produce_loop_killed_again_and_again_outputs_each_record_once(
    tmp_path: Path,
) -> None:
    result = eos(kills=15, broker_kills=2, records=3200, seed=46, worker_log=tmp_path / "w.log")
    summary = json.dumps(result.summary(), indent=2)
    assert result.ok, f"{summary}\nworkers' log: {tmp_path / 'w.log'}"
    assert result.kills == 15, summary
    assert [kill.rsplit(" ", 1)[0] for kill in result.broker_kills] == [
        "transaction coordinator",
        "group coordinator",
    ], summary
    assert result.read_committed == result.records == 3200, summary
    assert result.duplicates == result.missing == result.unexpected == 0, summary
    # Aborted transactions (a worker killed mid-way, fenced by its successor) left records
    # that only read_uncommitted is given.
    assert result.read_uncommitted > result.read_committed, summary
