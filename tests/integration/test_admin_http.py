"""The admin HTTP server: Prometheus text that parses, health, and state."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from purgatory.broker.ops.admin_http import resolve_token
from purgatory.broker.ops.cluster_control import serve_control
from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.ops.supervisor import Supervisor
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Producer
from purgatory.common.admin_request import admin_request
from purgatory.common.broker_state import decode_state
from purgatory.testing.cluster import metric_samples
from tests.support import bootstrap, running_cluster, wait_until

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


async def test_gc_pauses_are_timed_by_generation(broker: Broker) -> None:
    import gc

    def full_collections(text: str) -> tuple[float, float]:
        samples = metric_samples(text)
        labels = (("generation", "2"),)
        return (
            samples[("purgatory_gc_pause_seconds_count", labels)],
            samples[("purgatory_gc_pause_seconds_sum", labels)],
        )

    _, _, text = await get(broker, "/metrics")
    count, total = full_collections(text)
    gc.collect()
    gc.collect()
    _, _, text = await get(broker, "/metrics")
    count_after, total_after = full_collections(text)
    assert count_after >= count + 2 and total_after > total


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


async def test_a_broker_without_a_quorum_is_not_healthy() -> None:
    """One voter of two cannot elect a controller alone: it waits, and says why."""
    from purgatory.broker.server import start_broker
    from tests.support import broker_config, free_ports

    ports = free_ports(2)
    members = f"0@127.0.0.1:{ports[0]},1@127.0.0.1:{ports[1]}"
    lonely = await start_broker(broker_config(1, members=members, port=ports[1]))
    try:
        status, _, body = await get(lonely, "/healthz")
        assert status == 503
        assert "no active controller: the metadata quorum (voters 0, 1) has no leader" in body
    finally:
        await lonely.stop()


# -- the admin token -----------------------------------------------------------------------


def test_a_token_is_needed_beyond_loopback_unless_one_is_chosen() -> None:
    assert resolve_token("", "127.0.0.1") == (None, False)
    assert resolve_token("", "::1") == (None, False)
    assert resolve_token("", "localhost") == (None, False)
    token, generated = resolve_token("", "0.0.0.0")  # a container's address
    assert generated and token and len(token) >= 32
    assert resolve_token("", "0.0.0.0")[0] != token  # a new one each start
    assert resolve_token("chosen", "0.0.0.0") == ("chosen", False)
    assert resolve_token("chosen", "127.0.0.1") == ("chosen", False)  # set: always needed


async def test_with_a_token_changes_need_it_and_reads_stay_open() -> None:
    async with running_cluster(1, admin_token="s3cret") as (broker,):
        url = f"http://127.0.0.1:{broker.admin_port}"
        async with aiohttp.ClientSession() as session:
            for path in ("/metrics", "/healthz", "/v1/state", "/v1/config", "/v1/logs"):
                async with session.get(url + path) as r:
                    assert r.status == 200, path
            change = {"value": "2000"}
            async with session.put(f"{url}/v1/config/replica.lag.time.max.ms", json=change) as r:
                assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
                assert "admin token" in (await r.json())["error"]
            wrong = {"Authorization": "Bearer nope", "Content-Type": "application/json"}
            async with session.post(f"{url}/v1/faults/reset", headers=wrong) as r:
                assert r.status == 401
            right = {"Authorization": "Bearer s3cret"}
            async with session.put(
                f"{url}/v1/config/replica.lag.time.max.ms", json=change, headers=right
            ) as r:
                assert r.status == 200
            async with session.get(f"{url}/v1/config") as r:
                [token] = [c for c in (await r.json())["configs"] if c["name"] == "admin.token"]
                assert token["value"] is None and token["source"] != "default"  # never shown
        assert broker.config["replica.lag.time.max.ms"] == 2000
        assert all("s3cret" not in str(e) for e in RECENT_LOGS.events(broker.broker_id))


def test_the_cluster_control_endpoint_needs_its_token_for_actions() -> None:
    supervisor = Supervisor([], [])
    control = serve_control(supervisor, "127.0.0.1", 0, token="s3cret")
    base = f"http://127.0.0.1:{control.server_address[1]}"
    try:
        assert admin_request("GET", f"{base}/v1/brokers")[0] == 200
        status, payload = admin_request("POST", f"{base}/v1/brokers/0/kill", {}, token="")
        assert status == 401 and "token" in payload["error"]
        assert admin_request("POST", f"{base}/v1/brokers/0/kill", {}, token="s3cret")[0] == 404
    finally:
        control.shutdown()
        supervisor.close()


async def purgatory_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "purgatory", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_purgatory_admin_sends_the_token_from_its_option_or_the_environment() -> None:
    async with running_cluster(1, admin_token="s3cret") as (broker,):
        admin = f"http://127.0.0.1:{broker.admin_port}"
        setting = ("admin", "config", "set", "num.partitions", "4", "--admin", admin)
        code, out = await purgatory_cli(*setting, env={"PURGATORY_ADMIN_TOKEN": ""})
        assert code == 1 and "admin token" in out
        code, out = await purgatory_cli(*setting, "--token", "s3cret")
        assert code == 0 and "-> 4" in out, out
        code, out = await purgatory_cli(
            "admin", "fault", "reset", "--admin", admin, env={"PURGATORY_ADMIN_TOKEN": "s3cret"}
        )
        assert code == 0, out


async def test_a_follower_serves_its_latest_fetch_round_trips_as_samples() -> None:
    async with running_cluster(2) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("replicated", 1, 2)
        async with Producer(bootstrap(brokers), linger_ms=0, acks=-1) as producer:
            for _ in range(5):
                await producer.send_and_wait("replicated", b"x")
        follower = (
            brokers[1]
            if brokers[0].replica_manager.partitions[("replicated", 0)].is_leader
            else brokers[0]
        )
        samples: list[dict[str, float]] = []

        async def fetched() -> bool:
            _, _, text = await get(follower, "/v1/samples/replica-fetch")
            samples[:] = json.loads(text)["samples"]
            return len(samples) >= 5

        await wait_until(fetched, message="the follower's fetch samples")
        assert [s["ts"] for s in samples] == sorted(s["ts"] for s in samples)  # oldest first
        assert all(0 <= s["wait_ms"] <= s["total_ms"] for s in samples)
        assert {s["source_broker"] for s in samples} <= {0, 1}
        latest = max(s["ts"] for s in samples)
        _, _, text = await get(follower, f"/v1/samples/replica-fetch?since={latest}")
        assert all(s["ts"] > latest for s in json.loads(text)["samples"])


async def test_every_replica_lists_the_same_batches_with_their_checksums() -> None:
    """GET /v1/partitions/<topic>/<partition>/batches: a replica batch by batch (offsets
    and a CRC-32 of the bytes), the same on the leader and its followers, which store its
    batches as they are; ``from`` skips what ends before it; clear errors otherwise."""
    async with running_cluster(3) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("t", 1, 3)
        async with Producer(bootstrap(brokers), acks=-1, linger_ms=0) as producer:
            for i in range(5):
                await producer.send_and_wait("t", b"record-%d" % i, partition=0)
        await wait_until(
            lambda: all(
                b.replica_manager.partitions[("t", 0)].high_watermark == 5 for b in brokers
            ),
            message="every replica holds and knows all five",
        )
        answers = [json.loads((await get(b, "/v1/partitions/t/0/batches"))[2]) for b in brokers]
        assert [a["broker_id"] for a in answers] == [b.broker_id for b in brokers]
        batches = [a["batches"] for a in answers]
        assert batches[0] == batches[1] == batches[2]
        assert [(base, end) for base, end, _ in batches[0]] == [(i, i + 1) for i in range(5)]
        assert len({crc for _, _, crc in batches[0]}) == 5
        assert all((a["log_end_offset"], a["high_watermark"]) == (5, 5) for a in answers)
        later = json.loads((await get(brokers[0], "/v1/partitions/t/0/batches?from=3"))[2])
        assert later["batches"] == batches[0][3:]
        status, _, body = await get(brokers[0], "/v1/partitions/nope/0/batches")
        assert status == 404 and "holds no replica of nope-0" in body
        status, _, body = await get(brokers[0], "/v1/partitions/t/0/batches?from=x")
        assert status == 400


async def test_without_a_token_a_web_page_cannot_change_a_loopback_broker() -> None:
    """Issue 42: a text/plain POST with a foreign Origin and Host: evil.example applied a
    pause fault. Changes now need JSON, a Host of this machine and no foreign Origin;
    the CLI's requests (JSON, Host 127.0.0.1, no Origin) still pass."""
    async with running_cluster(1) as (broker,):
        url = f"http://127.0.0.1:{broker.admin_port}/v1/faults"
        spec = json.dumps({"name": "csrf", "kind": "pause", "duration_ms": 60000})
        json_type = {"Content-Type": "application/json"}
        attacks = [
            ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, 415),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({**json_type, "Host": "evil.example"}, 403),  # DNS rebinding: the page's name
            ({**json_type, "Host": "evil.example:9644", "Origin": "http://evil.example"}, 403),
            ({**json_type, "Origin": "http://evil.example"}, 403),
            ({**json_type, "Origin": "null"}, 403),
        ]
        async with aiohttp.ClientSession() as session:
            for headers, status in attacks:
                async with session.post(url, data=spec, headers=headers) as r:
                    assert r.status == status, headers
            assert broker.faults.faults == {}
            same = {**json_type, "Origin": f"http://localhost:{broker.admin_port}"}
            async with session.post(url, data=spec, headers=same) as r:
                assert r.status == 201
        assert "csrf" in broker.faults.faults


async def test_a_half_sent_request_is_closed_after_the_read_timeout() -> None:
    from purgatory.common.http_server import HttpServer, Router

    server = HttpServer(Router(), request_timeout_s=0.3)
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        async with asyncio.timeout(5):
            answer = await reader.read()  # until the server closes
        assert answer.startswith(b"HTTP/1.1 408")
        writer.close()
    finally:
        await server.stop()


async def test_the_state_document_lets_the_broker_serve_between_slices() -> None:
    """Issue 42: at 100,000 partitions GET /v1/state held the event loop for 2.4 s. It is
    built STATE_SLICE partitions at a time: a task counting turns of the loop meanwhile
    counts at least one per slice, and the document still lists every partition."""
    from purgatory.broker.server import STATE_SLICE

    partitions = 3 * STATE_SLICE + 10
    async with running_cluster(1, num_partitions=partitions) as (broker,):
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("wide")
        await wait_until(lambda: len(broker.replica_manager.partitions) >= partitions)
        turns = 0
        done = asyncio.Event()

        async def count_turns() -> None:
            nonlocal turns
            while not done.is_set():
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count_turns())
        state = await broker.state_in_slices()
        done.set()
        await counter
        assert len([p for p in state.partitions if p.topic == "wide"]) == partitions
        assert turns >= partitions // STATE_SLICE
