"""``purgatory consumer-groups`` on a KIP-848 consumer group: listed with its type,
described with its members, partitions and lag, as kafka-consumer-groups.sh shows one."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from confluent_kafka import Consumer, Producer
from prometheus_client import generate_latest

from purgatory.clients import AdminClient
from tests.integration.test_cli_tools import cli
from tests.support import bootstrap, running_cluster, wait_until

FAST = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
}


def _consume(servers: str, group: str, stop: threading.Event, got: list[Any]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "client.id": "cli-member",
        }
    )
    consumer.subscribe(["cg-cli"])
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.offset())
                if len(got) == 5:
                    consumer.commit(asynchronous=False)
    finally:
        consumer.close()


async def test_consumer_groups_lists_and_describes_a_kip_848_group() -> None:
    async with running_cluster(1, **FAST) as brokers:
        boot = bootstrap(brokers)
        async with AdminClient(boot) as admin:
            await admin.create_topic("cg-cli", 2)
        producer = Producer({"bootstrap.servers": boot})
        for i in range(8):
            producer.produce("cg-cli", b"v%d" % i, partition=i % 2)
        assert await asyncio.to_thread(producer.flush, 20) == 0
        stop, got = threading.Event(), []
        member = threading.Thread(target=_consume, args=(boot, "g848", stop, got))
        member.start()
        try:
            await wait_until(lambda: len(got) == 8, timeout=30, message="8 records consumed")
            group = brokers[0].group_coordinator.groups["g848"]
            await wait_until(
                lambda: group.state.value == "Stable", timeout=30, message="a stable group"
            )

            code, out, err = await cli(
                "consumer-groups", "--list", "--type", "consumer", "--json", "--bootstrap", boot
            )
            assert code == 0, err
            assert json.loads(out) == [
                {
                    "group": "g848",
                    "type": "consumer",
                    "state": "Stable",
                    "protocol_type": "consumer",
                }
            ]
            code, out, _ = await cli(
                "consumer-groups", "--list", "--type", "classic", "--json", "--bootstrap", boot
            )
            assert code == 0 and json.loads(out) == []

            code, out, err = await cli(
                "consumer-groups", "--describe", "--group", "g848", "--json", "--bootstrap", boot
            )
            assert code == 0, err
            rows = {(r["topic"], r["partition"]): r for r in json.loads(out)}
            assert set(rows) == {("cg-cli", 0), ("cg-cli", 1)}
            assert {r["client_id"] for r in rows.values()} == {"cli-member"}
            assert all(r["log_end_offset"] == 4 for r in rows.values())
            code, _, err = await cli(
                "consumer-groups", "--describe", "--group", "g848", "--bootstrap", boot
            )
            assert code == 0, err
            assert "g848: consumer, Stable, 1 member(s), group epoch 2, assignor uniform" in err

            code, out, err = await cli(
                "consumer-groups", "--describe", "--group", "g848", "--members", "--json",
                "--bootstrap", boot,
            )  # fmt: skip
            assert code == 0, err
            (row,) = json.loads(out)
            assert row["partitions"] == 2 and row["assignment"] == "cg-cli(0,1)"

            metrics = generate_latest(brokers[0].metrics.registry).decode()
            assert 'purgatory_consumer_groups{state="Stable"} 1.0' in metrics
            assert "purgatory_consumer_group_rebalances_total 1.0" in metrics
            assert "purgatory_consumer_group_timeouts 1.0" in metrics  # its session
        finally:
            stop.set()
            await asyncio.to_thread(member.join)
