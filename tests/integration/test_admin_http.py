"""The admin HTTP server: Prometheus text that parses, health, and state."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Producer
from purgatory.common.broker_state import decode_state
from purgatory.testing.cluster import metric_samples
from tests.support import bootstrap

DOC = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()


async def get(broker: Broker, path: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{broker.admin_port}{path}") as r,
    ):
        return r.status, r.headers["Content-Type"], await r.text()


async def produce_some(broker: Broker) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic("t", 2)
    async with Producer(bootstrap([broker]), linger_ms=0) as producer:
        for i in range(10):
            await producer.send_and_wait("t", b"x" * 10, partition=i % 2)


async def test_metrics_are_prometheus_text_with_request_and_partition_figures(
    broker: Broker,
) -> None:
    await produce_some(broker)
    status, content_type, text = await get(broker, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    samples = metric_samples(text)
    ours = ("listener", "PURGATORY")
    assert (
        samples[("purgatory_requests_total", (ours, ("request", "Produce"), ("version", "0")))]
        == 10
    )
    assert (
        samples[("purgatory_request_total_time_seconds_count", (ours, ("request", "Produce")))]
        == 10
    )
    assert samples[("purgatory_messages_in_total", ())] == 10
    assert samples[("purgatory_log_end_offset", (("partition", "0"), ("topic", "t")))] == 5
    assert samples[("purgatory_connections", ())] >= 0
    buckets = [
        v
        for (name, labels), v in samples.items()
        if name == "purgatory_request_total_time_seconds_bucket"
        and ("request", "Produce") in labels
    ]
    assert max(buckets) == 10


async def test_every_exported_metric_is_documented(broker: Broker) -> None:
    await produce_some(broker)
    _, _, text = await get(broker, "/metrics")
    names = {f.name for f in text_string_to_metric_families(text)}
    assert names, "no metrics exported"
    for name in names:
        assert re.search(rf"`{name}(_total)?`", DOC), f"{name} is not in docs/metrics.md"


async def test_healthz_and_state(broker: Broker) -> None:
    await produce_some(broker)
    status, _, body = await get(broker, "/healthz")
    assert status == 200 and '"ok"' in body
    _, content_type, body = await get(broker, "/v1/state")
    assert content_type.startswith("application/json")
    state = decode_state(body.encode())  # the typed document, unknown fields refused
    part = state.replica("t", 0)
    assert part is not None
    assert (part.leader, part.log_start_offset, part.high_watermark, part.log_end_offset) == (
        0,
        0,
        5,
        5,
    )
    assert part.size_bytes > 0 and state.broker_id == broker.broker_id


async def test_a_broker_waiting_for_its_controller_is_not_healthy() -> None:
    from purgatory.broker.server import start_broker
    from tests.support import broker_config, free_ports

    ports = free_ports(2)
    members = f"0@127.0.0.1:{ports[0]},1@127.0.0.1:{ports[1]}"
    lonely = await start_broker(broker_config(1, members=members, port=ports[1]))
    try:
        status, _, body = await get(lonely, "/healthz")
        assert status == 503 and "waiting for metadata from the controller (broker 0)" in body
    finally:
        await lonely.stop()
