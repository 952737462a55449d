"""Fault injection over admin HTTP and `purgatory admin fault`: validated, effective, counted."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.cli import main
from purgatory.clients import AdminClient, Connection
from purgatory.clients.connection import ConnectionClosed
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.integration.test_dynamic_config import call
from tests.integration.test_produce_fetch import fetch_request, produce_request
from tests.support import bootstrap, running_cluster, wait_until


async def fetch_seconds(broker: Broker) -> float:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        started = time.perf_counter()
        await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0))
        return time.perf_counter() - started
    finally:
        await conn.close()


async def topic(broker: Broker) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 1)


def injections(broker: Broker, name: str) -> float:
    for family in broker.metrics.registry.collect():
        if family.name == "purgatory_fault_injections":
            return sum(s.value for s in family.samples if s.labels.get("fault") == name)
    return 0.0


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"name": "x", "kind": "slow"}, "not one of latency"),
        ({"name": "x", "kind": "latency"}, "0 < delay_ms"),
        ({"name": "x", "kind": "latency", "delay_ms": 5, "jitter_ms": 9}, "jitter_ms <= delay_ms"),
        ({"name": "x", "kind": "error", "api": "Frobnicate", "error_code": 7}, "not one of"),
        ({"name": "x", "kind": "error", "api": "Fetch", "error_code": "NOPE"}, "not a Kafka error"),
        ({"name": "x", "kind": "error", "api": "Fetch"}, "needs error_code"),
        ({"name": "x", "kind": "error", "api": "Fetch", "error_code": 7, "times": 0}, "times"),
        ({"name": "x", "kind": "pause"}, "needs duration_ms"),
        ({"name": "x y", "kind": "pause", "duration_ms": 5}, "fault name"),
        ({"name": "x", "kind": "pause", "duration_ms": 5, "colour": "red"}, "colour"),
        ([1, 2], "bad fault spec"),
        # Issue 42: values that were accepted (the last hung every request).
        ({"name": "x", "kind": "pause", "duration_ms": 2**70}, "duration_ms must be in"),
        ({"name": "x", "kind": "error", "api": "Fetch", "error_code": 7, "times": 2**63}, "times"),
        ({"name": "x", "kind": "latency", "delay_ms": 1e300}, "0 < delay_ms"),
        ({"name": "x", "kind": "partition", "peers": list(range(2000))}, "peers: at most"),
    ],
)
async def test_bad_fault_specs_are_refused_with_the_reason(
    broker: Broker, spec: Any, reason: str
) -> None:
    status, payload = await call(broker, "POST", "/v1/faults", spec)
    assert status == 400 and reason in payload["error"]
    assert broker.faults.faults == {}


async def test_a_latency_fault_delays_a_fetch_and_is_listed_and_counted(broker: Broker) -> None:
    await topic(broker)
    status, added = await call(
        broker, "POST", "/v1/faults", {"name": "slow", "kind": "latency", "delay_ms": 250}
    )
    assert status == 201 and added["delay_ms"] == 250
    assert await fetch_seconds(broker) >= 0.25  # the request's bytes were held 250 ms
    assert injections(broker, "slow") >= 1
    status, listed = await call(broker, "GET", "/v1/faults")
    assert [f["name"] for f in listed["faults"]] == ["slow"]
    status, _ = await call(
        broker, "POST", "/v1/faults", {"name": "slow", "kind": "pause", "duration_ms": 5}
    )
    assert status == 400  # the name is taken
    status, _ = await call(broker, "DELETE", "/v1/faults/slow")
    assert status == 200 and broker.faults.faults == {}
    status, payload = await call(broker, "DELETE", "/v1/faults/slow")
    assert status == 404 and "no fault named" in payload["error"]


async def test_a_latency_fault_on_given_peers_spares_the_others(broker: Broker) -> None:
    await topic(broker)
    await call(
        broker,
        "POST",
        "/v1/faults",
        {"name": "from-2", "kind": "latency", "delay_ms": 5000, "peers": [2, "some-client"]},
    )
    assert await fetch_seconds(broker) < 5  # this client is neither broker 2 nor some-client
    assert injections(broker, "from-2") == 0


async def test_an_error_fault_answers_n_requests_with_the_error_then_goes(broker: Broker) -> None:
    await topic(broker)
    await call(
        broker,
        "POST",
        "/v1/faults",
        {
            "name": "nle",
            "kind": "error",
            "api": "Produce",
            "error_code": "NOT_LEADER_OR_FOLLOWER",
            "times": 2,
        },
    )
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        for _ in range(2):
            with pytest.raises(KafkaError) as caught:
                await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"x"]))
            assert caught.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        response = await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"x"]))
        assert response.responses[0].partitions[0].error_code == 0
        # Other APIs were never touched.
        await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0))
    finally:
        await conn.close()
    assert broker.faults.faults == {} and injections(broker, "nle") == 2


async def test_a_pause_holds_requests_until_it_ends_then_serves_them(broker: Broker) -> None:
    await topic(broker)
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        await call(
            broker, "POST", "/v1/faults", {"name": "freeze", "kind": "pause", "duration_ms": 300}
        )
        started = time.perf_counter()
        response = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0))
        assert time.perf_counter() - started >= 0.2
        assert response.responses[0].partitions[0].error_code == 0
        assert broker.faults.faults == {}  # gone by itself after duration_ms
    finally:
        await conn.close()


async def test_a_disconnect_fault_drops_connections_while_it_lasts(broker: Broker) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    await conn.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
    await call(broker, "POST", "/v1/faults", {"name": "cut", "kind": "disconnect"})
    await wait_until(lambda: conn.closed, message="the connection dropped")
    fresh = await Connection.open("127.0.0.1", broker.port)
    with pytest.raises((ConnectionClosed, KafkaError)):
        await fresh.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest(), timeout_ms=2000)
    await call(broker, "POST", "/v1/faults/reset", {})
    again = await Connection.open("127.0.0.1", broker.port)
    await again.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
    await again.close()


async def test_inbound_latency_on_a_leader_slows_its_followers_true_fetch_latency() -> None:
    async with running_cluster(
        2, replica_fetch_wait_max_ms=50, replica_lag_time_max_ms=30000
    ) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("r", 1, replication_factor=2)
        leader = next(b for b in brokers if any(p.role == "leader" for p in b.state().partitions))
        follower = next(b for b in brokers if b is not leader)
        stats = follower.replica_manager.fetchers.stats[leader.broker_id]
        await wait_until(lambda: stats.requests > 5, message="the follower fetching")
        await call(
            leader, "POST", "/v1/faults", {"name": "slow", "kind": "latency", "delay_ms": 100}
        )
        # The round in flight when the fault came in was received before it: skip it.
        started = sum(stats.latency.true.counts)
        await wait_until(lambda: sum(stats.latency.true.counts) > started, message="a round")
        before = stats.latency.true.sum, sum(stats.latency.true.counts)
        await wait_until(
            lambda: sum(stats.latency.true.counts) >= before[1] + 5, message="more fetches"
        )
        rounds = sum(stats.latency.true.counts) - before[1]
        mean_true = (stats.latency.true.sum - before[0]) / rounds
        assert mean_true >= 0.09  # the leader's 100 ms hold shows in the *true* latency
        assert injections(leader, "slow") >= 5


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


async def test_the_cli_adds_lists_and_removes_faults(broker: Broker) -> None:
    admin = f"http://127.0.0.1:{broker.admin_port}"
    code, out = await asyncio.to_thread(
        run_cli,
        "admin",
        "fault",
        "add",
        "flaky",
        "--kind",
        "error",
        "--api",
        "Fetch",
        "--error-code",
        "7",
        "--probability",
        "0.5",
        "--admin",
        admin,
    )
    assert code == 0 and json.loads(out)["error_code"] == 7
    code, out = await asyncio.to_thread(
        run_cli, "admin", "fault", "list", "--json", "--admin", admin
    )
    assert [f["name"] for f in json.loads(out)["faults"]] == ["flaky"]
    code, _ = await asyncio.to_thread(run_cli, "admin", "fault", "rm", "flaky", "--admin", admin)
    assert code == 0 and broker.faults.faults == {}
    code, _ = await asyncio.to_thread(
        run_cli, "admin", "fault", "add", "bad", "--kind", "latency", "--admin", admin
    )
    assert code == 1


def test_a_latency_that_is_not_a_number_is_refused() -> None:
    from purgatory.broker.ops.faults import FaultError, parse_spec

    with pytest.raises(FaultError, match="0 < delay_ms"):
        parse_spec({"name": "x", "kind": "latency", "delay_ms": float("nan")})
