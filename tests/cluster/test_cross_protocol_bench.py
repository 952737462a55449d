"""`purgatory perf cross-protocol` reads each protocol's records with both consumers."""

from __future__ import annotations

import json

import pytest

from tests.support import purgatory_cli

pytestmark = pytest.mark.cluster


def test_the_cross_protocol_benchmark_reads_every_record_with_both_consumers() -> None:
    run = purgatory_cli("perf", "cross-protocol", "--num-records", "5000", "--json")
    # Each reader raises (exit 1) unless it read all 5000 records of both topics.
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    for reader in ("purgatory_consumer", "confluent_consumer"):
        rates = result["consume"][reader]
        assert (
            rates["same_protocol_records_per_s"] > 0 and rates["other_protocol_records_per_s"] > 0
        )
    assert set(result["us_per_record"]) == {
        "broker_rewrites_ours_as_v2",
        "broker_passes_v2_through",
        "our_client_decodes_ours",
        "our_client_decodes_v2",
    }
