"""Issue 42's proof in CI: 20,000 hostile frames (mutated requests of every API version of
both protocols, corrupt batches behind good CRCs, framing tricks, slowloris) against three
broker processes; `make fuzz` runs 100,000 and more."""

from __future__ import annotations

import json

import pytest

from tests.cluster.process_cluster import running
from tests.fuzz.run import fuzz

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(900)
async def test_hostile_frames_crash_nothing_lose_nothing_and_leak_nothing() -> None:
    async with running(**{"default.replication.factor": "3"}) as cluster:
        result = await fuzz(cluster, frames=20_000, seed=42)
    summary = json.dumps(result.summary(), indent=2)
    assert result.ok, summary
    assert result.hostile_frames >= 20_000
    # The brokers read them: refused as unreadable or invalid, or served (with errors).
    assert result.bad_requests >= 5_000, summary
