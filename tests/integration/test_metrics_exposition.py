"""/metrics as Prometheus reads it: each family once with all its samples (the purgatory
families come from two components), the standard process figures, and promtool's verdict,
on brokers that have served both protocols, groups, a follower's fetches and bad input."""

from __future__ import annotations

import asyncio
import os
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Consumer, Producer
from purgatory.clients.admin import quota_alteration
from purgatory.protocol.api import ApiKey
from purgatory.testing.cluster import metric_samples
from tests.integration.test_dynamic_config import call
from tests.kafka_wire import KafkaWire, request
from tests.promtool import promtool_problems
from tests.support import bootstrap, running_cluster, wait_until

PARTITIONS = 2  # of the topic "t" and of __consumer_offsets, each on both brokers
PROCESS = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
)


async def scrape(broker: Broker) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{broker.admin_port}/metrics") as r,
    ):
        assert r.status == 200
        return await r.text()


async def serve_both_protocols(brokers: list[Broker]) -> None:
    """Produce and fetch on both protocols, replicated, and a Kafka client's group."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    servers = bootstrap(brokers)
    async with AdminClient(servers) as admin:
        await admin.create_topic("t", PARTITIONS, 2)
        # Quotas no client reaches, on every client id: the quota families are measured.
        generous = {"producer_byte_rate": 1e9, "consumer_byte_rate": 1e9, "request_percentage": 1e4}
        await admin.alter_client_quotas([quota_alteration({"client-id": None}, generous)])
    async with Producer(servers, linger_ms=0) as producer:
        for i in range(10):
            await producer.send_and_wait("t", b"ours", partition=i % PARTITIONS)
    async with Consumer(servers, auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer:
        await consumer.assign_topics(["t"])
        got = 0
        async with asyncio.timeout(20):
            while got < 10:
                got += len(await consumer.poll())
    producer = AIOKafkaProducer(bootstrap_servers=servers)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait("t", b"kafka's", partition=i % PARTITIONS)
    finally:
        await producer.stop()
    group = AIOKafkaConsumer(
        "t", bootstrap_servers=servers, group_id="g", auto_offset_reset="earliest"
    )
    await group.start()
    try:
        got = 0
        async with asyncio.timeout(20):
            while got < 20:
                for records in (await group.getmany(timeout_ms=200)).values():
                    got += len(records)
        await group.commit()
    finally:
        await group.stop()


async def answer_badly(broker: Broker) -> KafkaWire:
    """An error fault acting once, a request with an unknown API key, and a connection
    that named its client software: left open, for the caller to close after scraping."""
    status, _ = await call(
        broker,
        "POST",
        "/v1/faults",
        {
            "name": "once",
            "kind": "error",
            "api": "ListGroups",
            "error_code": "NOT_COORDINATOR",
            "times": 1,
        },
    )
    assert status == 201
    named = await KafkaWire.open(broker.port)
    body = request(
        ApiKey.API_VERSIONS, 3, client_software_name="exposition", client_software_version="1"
    )
    await named.call(ApiKey.API_VERSIONS, 3, body)
    await named.call(ApiKey.LIST_GROUPS, 4, request(ApiKey.LIST_GROUPS, 4, states_filter=()))
    bad = await KafkaWire.open(broker.port)
    payload = struct.pack(">hhih", 24, 3, 1, 1) + b"x" + b"\x00" * 8  # AddOffsetsToTxn: not served
    await bad.send_raw(struct.pack(">i", len(payload)) + payload)
    assert await bad.closed()
    return named


async def scrape_after_traffic() -> list[str]:
    offsets: dict[str, Any] = {
        "offsets.topic.num.partitions": PARTITIONS,
        "offsets.topic.replication.factor": 2,
    }
    async with running_cluster(2, **offsets) as brokers:
        await serve_both_protocols(brokers)
        await wait_until(
            lambda: all(
                len(b.replica_manager.partitions) == 2 * PARTITIONS
                and all(
                    p.high_watermark == 10
                    for (topic, _), p in b.replica_manager.partitions.items()
                    if topic == "t"
                )
                for b in brokers
            ),
            message="both brokers holding both topics, t's replicas caught up",
        )
        named = [await answer_badly(b) for b in brokers]
        try:
            return [await scrape(b) for b in brokers]
        finally:
            for wire in named:
                await wire.close()


@pytest.fixture(scope="module")
def scrapes() -> list[str]:
    """Each broker's /metrics after the traffic (one cluster for this module's tests)."""
    return asyncio.run(scrape_after_traffic())


def test_each_family_is_exposed_once_with_samples(scrapes: list[str]) -> None:
    for text in scrapes:
        declared = Counter(
            tuple(line.split()[1:3]) for line in text.splitlines() if line.startswith("# ")
        )
        repeated = sorted(f"{kind} {name}" for (kind, name), n in declared.items() if n > 1)
        assert repeated == []
        families = list(text_string_to_metric_families(text))
        names = [f.name for f in families]
        assert len(names) == len(set(names))
        # Every family has samples, so the checks here and promtool's see their lines; a
        # new family this traffic leaves empty wants traffic above that fills it.
        assert [f.name for f in families if not f.samples] == []
        samples = metric_samples(text)
        assert {
            dict(labels)["purgatory"]
            for name, labels in samples
            if name == "purgatory_size" and len(labels) == 1
        } == {
            *("Fetch", "Produce", "RemoteFetch", "DeleteRecords", "Rebalance", "Heartbeat"),
            *("TransactionTimeout", "ShareFetch"),
        }


def test_every_broker_reports_its_process(scrapes: list[str]) -> None:
    for text in scrapes:
        samples = metric_samples(text)
        names = {name for name, _ in samples}
        assert "python_info" in names and "python_gc_collections_total" in names
        if Path("/proc/self/stat").exists():  # prometheus_client reads the process there
            assert set(PROCESS) <= names
            assert samples[("process_open_fds", ())] > 0


def test_partitions_led_and_held_are_told_apart(scrapes: list[str]) -> None:
    both = [metric_samples(text) for text in scrapes]
    # Both topics' partitions have a replica on each broker and one leader among them.
    total = 2 * PARTITIONS
    assert [s[("purgatory_hosted_partitions", ())] for s in both] == [total, total]
    assert sum(s[("purgatory_leader_partitions", ())] for s in both) == total


def test_promtool_accepts_every_broker_s_metrics(scrapes: list[str]) -> None:
    for text in scrapes:
        problems = promtool_problems(text)
        if problems is None:
            message = "promtool is not on PATH (apt install prometheus)"
            if os.environ.get("CI"):
                pytest.fail(f"{message}; CI must run this check")
            pytest.skip(message)
        assert problems == []
