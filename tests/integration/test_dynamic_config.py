"""Dynamic configuration over admin HTTP: listed, changed at run time, refused clearly."""

from __future__ import annotations

from typing import Any

import aiohttp

from purgatory.broker.config.definitions import DEFINITIONS
from purgatory.broker.server import Broker
from purgatory.clients import Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.integration.test_replication import (
    FAST,
    create,
    followers_of,
    hold,
    leader_of,
    partition,
)
from tests.support import running_cluster, wait_until


async def call(broker: Broker, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{broker.admin_port}{path}"
    async with aiohttp.ClientSession() as session:
        kwargs = (
            {} if body is None else ({"data": body} if isinstance(body, str) else {"json": body})
        )
        async with session.request(method, url, **kwargs) as response:
            return response.status, await response.json()


async def test_every_config_is_listed_with_value_default_and_whether_it_is_dynamic(
    broker: Broker,
) -> None:
    status, payload = await call(broker, "GET", "/v1/config")
    assert status == 200
    listed = {c["name"]: c for c in payload["configs"]}
    assert set(listed) == {d.name for d in DEFINITIONS}
    assert listed["replica.lag.time.max.ms"]["dynamic"] is True
    assert listed["socket.request.max.bytes"]["dynamic"] is False
    assert listed["num.partitions"]["default"] == 1


async def test_a_dynamic_change_takes_effect_at_once_and_is_recorded(broker: Broker) -> None:
    status, payload = await call(
        broker, "PUT", "/v1/config/auto.create.topics.enable", {"value": False}
    )
    assert (status, payload["old"], payload["new"]) == (200, True, False)
    conn = await Connection.open("127.0.0.1", broker.port)
    response = await conn.send(ApiKey.METADATA, m.MetadataRequest(["brand-new"], True))
    await conn.close()
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not created
    [change] = broker.state().config_changes
    assert (change["name"], change["old"], change["new"]) == (
        "auto.create.topics.enable",
        True,
        False,
    )
    _, configs = await call(broker, "GET", "/v1/config")
    entry = next(c for c in configs["configs"] if c["name"] == "auto.create.topics.enable")
    assert (entry["value"], entry["source"]) == (False, "dynamic")


async def test_bad_changes_are_refused_with_the_reason(broker: Broker) -> None:
    status, payload = await call(broker, "PUT", "/v1/config/num.partitions", {"value": "many"})
    assert status == 400 and "expected an integer" in payload["error"]
    status, payload = await call(broker, "PUT", "/v1/config/num.partition", {"value": 3})
    assert status == 400 and "did you mean 'num.partitions'" in payload["error"]
    status, payload = await call(
        broker, "PUT", "/v1/config/socket.request.max.bytes", {"value": 1000}
    )
    assert status == 409 and "read at start only" in payload["error"]
    status, payload = await call(broker, "PUT", "/v1/config/num.partitions", "not json")
    assert status == 400 and "JSON" in payload["error"]
    status, payload = await call(
        broker, "PUT", "/v1/config/replica.fetch.wait.max.ms", {"value": 60_000}
    )
    assert status == 400 and "replica.lag.time.max.ms" in payload["error"]
    assert broker.config["num.partitions"] == 1 and broker.state().config_changes == []


async def test_lowering_the_lag_time_at_run_time_lets_the_isr_shrink() -> None:
    async with running_cluster(3, **{**FAST, "replica_lag_time_max_ms": 60_000}) as brokers:
        await create(brokers, "t")
        leader = leader_of(brokers, "t")
        slow = followers_of(brokers, "t")[0]
        hold(slow, leader)
        status, _ = await call(leader, "PUT", "/v1/config/replica.lag.time.max.ms", {"value": 300})
        assert status == 200
        await wait_until(
            lambda: slow.broker_id not in partition(leader, "t").isr,
            timeout=10,
            message="the ISR to shrink with the new lag time",
        )


async def test_the_kips_name_for_the_remote_fetch_timeout_changes_it_and_bad_models_are_refused(
    broker: Broker,
) -> None:
    status, payload = await call(
        broker, "PUT", "/v1/config/fetch.remote.max.wait.ms", {"value": 2500}
    )
    assert (status, payload["new"]) == (200, 2500)
    assert broker.config["remote.fetch.max.wait.ms"] == 2500
    assert broker.state().config_changes[-1]["name"] == "remote.fetch.max.wait.ms"
    status, payload = await call(
        broker, "PUT", "/v1/config/remote.storage.latency.distribution", {"value": "pareto"}
    )
    assert status == 400 and "lognormal" in payload["error"]
    status, payload = await call(
        broker, "PUT", "/v1/config/remote.storage.error.rate", {"value": 1.5}
    )
    assert status == 400 and "between" in payload["error"]
    status, _ = await call(broker, "PUT", "/v1/config/remote.log.reader.threads", {"value": 3})
    assert status == 409
