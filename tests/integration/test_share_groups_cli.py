"""``purgatory share-groups`` as kafka-share-groups.sh: a share group whose members joined
over Kafka's wire (ShareGroupHeartbeat) listed with its state, described member by member
and by state, refused deletion while it has members and deleted once empty; unknown groups
and groups of another type answered with Kafka's messages; ``consumer-groups --list``
leaving share groups out as Kafka 4.3.1's kafka-consumer-groups.sh does. And the share
group metrics: groups by state and their rebalances on the coordinator, and on the
partition leader what a ShareFetch/ShareAcknowledge round trip did to records."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from tests.integration.test_cli_tools import cli
from tests.integration.test_share_fetch import (
    ACCEPT,
    REJECT,
    RELEASE,
    acquired,
    broker,
    members,
    partition_of,
    produce,
)
from tests.integration.test_share_fetch import TOPIC as FETCH_TOPIC
from tests.integration.test_share_groups import _find_coordinator, _heartbeat, _ready
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until


def samples(b: Broker) -> dict[str, float]:
    """The broker's metrics now, by sample name and labels (``name{label="v"}``)."""
    out = {}
    text = generate_latest(b.metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


async def test_share_groups_lists_describes_and_deletes_a_share_group() -> None:
    async with running_cluster(1) as brokers:
        boot = bootstrap(brokers)
        async with AdminClient(boot) as admin:
            await admin.create_topic("queue", 3)
            # A classic group (offsets only): a consumer group, not a share group.
            await admin.alter_group_offsets("plain", {("queue", 0): 1})
        await _find_coordinator(brokers[0])
        await wait_until(lambda: _ready(brokers), timeout=30, message="sg's coordinator")
        wire = await KafkaWire.open(brokers[0].port)
        try:
            m1 = await _heartbeat(wire, "m1", 0, ["queue"])
            m2 = await _heartbeat(wire, "m2", 0, ["queue"])
            m1 = await _heartbeat(wire, "m1", m1.member_epoch, None)  # takes its new share
            assert (m1.error_code, m2.error_code, m1.member_epoch) == (0, 0, m2.member_epoch)
            await _members_and_refusals(brokers[0], boot)
            for member, epoch in (("m1", m1.member_epoch), ("m2", m2.member_epoch)):
                left = await _heartbeat(wire, member, -1, None)
                assert (left.error_code, left.member_epoch) == (0, -1), epoch
        finally:
            await wire.close()

        code, out, err = await cli(
            "share-groups", "--describe", "--group", "sg", "--members", "--bootstrap", boot
        )
        assert (code, out) == (0, ""), err
        assert "Share group 'sg' has no active members." in err
        code, out, err = await cli(
            "share-groups", "--list", "--state", "Empty", "--json", "--bootstrap", boot
        )
        assert code == 0 and json.loads(out) == [{"group": "sg", "state": "Empty"}], err
        metrics = samples(brokers[0])
        assert metrics['purgatory_share_groups{state="Empty"}'] == 1
        assert metrics['purgatory_share_groups{state="Stable"}'] == 0

        code, out, err = await cli("share-groups", "--delete", "--group", "sg", "--bootstrap", boot)
        assert code == 0, err
        assert out == "Deletion of requested share groups ('sg') was successful.\n"
        code, out, err = await cli("share-groups", "--list", "--bootstrap", boot)
        assert (code, out) == (0, "") and "no share groups" in err
        code, out, err = await cli(
            "share-groups", "--describe", "--group", "sg", "--state", "--bootstrap", boot
        )
        assert code == 1 and "Error: Share group 'sg' does not exist." in err
        # The consumer group is still there: share-groups never deleted it.
        code, out, err = await cli("consumer-groups", "--list", "--json", "--bootstrap", boot)
        assert code == 0 and [g["group"] for g in json.loads(out)] == ["plain"], err


async def _members_and_refusals(b: Broker, boot: str) -> None:
    """What the tools say of Stable share group ``sg`` with members m1 and m2."""
    code, out, err = await cli("share-groups", "--list", "--bootstrap", boot)
    assert (code, out) == (0, "sg\n"), err  # the names alone, as kafka-share-groups --list
    code, out, err = await cli("share-groups", "--list", "--state", "--bootstrap", boot)
    assert code == 0, err
    assert _row(out, "GROUP") == ["GROUP", "STATE"]
    assert _row(out, "sg") == ["sg", "Stable"]
    code, out, err = await cli("share-groups", "--list", "--json", "--bootstrap", boot)
    assert code == 0 and json.loads(out) == [{"group": "sg", "state": "Stable"}], err
    code, out, _ = await cli(
        "share-groups", "--list", "--state", "empty,dead", "--json", "--bootstrap", boot
    )
    assert code == 0 and json.loads(out) == []

    # kafka-consumer-groups.sh lists consumer groups only (Kafka 4.3.1: ListGroups for the
    # classic and consumer types) and a share group is not one to it.
    code, out, err = await cli("consumer-groups", "--list", "--json", "--bootstrap", boot)
    assert code == 0 and [g["group"] for g in json.loads(out)] == ["plain"], err
    code, _, err = await cli("consumer-groups", "--list", "--type", "share", "--bootstrap", boot)
    assert code == 2 and "invalid choice: 'share'" in err
    code, _, err = await cli("consumer-groups", "--describe", "--group", "sg", "--bootstrap", boot)
    assert code == 1 and "Error: Consumer group 'sg' does not exist." in err

    code, out, err = await cli(
        "share-groups", "--describe", "--group", "sg", "--members", "--json", "--bootstrap", boot
    )
    assert code == 0, err
    rows = {r["consumer_id"]: r for r in json.loads(out)}
    assert set(rows) == {"m1", "m2"}
    assert {r["client_id"] for r in rows.values()} == {"wire"}
    assert all("127.0.0.1" in r["host"] for r in rows.values())
    held = [
        (topic, int(p))
        for r in rows.values()
        for topic, _, parts in [r["assignment"].partition(":")]
        for p in parts.split(",")
    ]
    # The simple assignor: every partition to someone, spread over the two members.
    assert sorted(held) == [("queue", 0), ("queue", 1), ("queue", 2)]
    assert sorted(r["#partitions"] for r in rows.values()) == [1, 2]
    code, out, err = await cli(
        "share-groups", "--describe", "--group", "sg", "--members", "--bootstrap", boot
    )
    assert code == 0, err
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert _row(out, "GROUP") == header
    assert _row(out, "sg")[1] in ("m1", "m2") and "queue:" in out
    code, out, err = await cli(
        "share-groups", "--describe", "--group", "sg", "--state", "--verbose", "--bootstrap", boot
    )
    assert code == 0, err
    assert _row(out, "GROUP") == ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "#MEMBERS"]
    assert _row(out, "sg")[-3:] == ["Stable", "3", "2"] and "(0)" in out
    code, out, err = await cli(
        "share-groups", "--describe", "--group", "sg", "--state", "--json", "--bootstrap", boot
    )
    assert code == 0, err
    described = json.loads(out)
    assert (described["state"], described["members"], described["coordinator"]) == ("Stable", 2, 0)

    code, out, err = await cli(
        "share-groups", "--describe", "--group", "nosuch", "--bootstrap", boot
    )
    assert (code, out) == (1, "") and "Error: Share group 'nosuch' does not exist." in err
    for action in ("--describe", "--delete"):
        code, _, err = await cli("share-groups", action, "--group", "plain", "--bootstrap", boot)
        assert code == 1 and "Error: Group 'plain' is not a share group." in err
    code, out, err = await cli("share-groups", "--delete", "--group", "sg", "--bootstrap", boot)
    assert code == 1 and "Share group 'sg' is not EMPTY (2 member(s))" in err

    metrics = samples(b)
    assert metrics['purgatory_share_groups{state="Stable"}'] == 1
    assert metrics['purgatory_consumer_groups{state="Stable"}'] == 0  # not counted twice
    # The group epoch went 1 (made) -> 2 (m1 joined) -> 3 (m2 joined).
    assert metrics["purgatory_share_group_rebalances_total"] == 2


def _row(out: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").replace("┃", "│").split("│")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{out}")


async def test_share_metrics_count_a_fetch_and_acknowledge_round_trip() -> None:
    async with broker() as b, members(b, 2) as (m1, m2):
        before = samples(b)
        for m in (m1, m2):
            assert partition_of(await m.fetch()).error_code == 0
        await asyncio.to_thread(produce, b, [b"r%d" % i for i in range(6)])
        await wait_until(lambda: b.replica_manager.partitions[(FETCH_TOPIC, 0)].high_watermark == 6)
        assert acquired(await m1.fetch()) == dict.fromkeys(range(6), 1)
        metrics = samples(b)
        assert metrics["purgatory_share_partitions"] == 1
        assert metrics["purgatory_share_acquisition_locks"] == 1  # one acquire, one lock
        answer = await m1.acknowledge(
            [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT]), (3, 5, [ACCEPT])]
        )
        assert [p.error_code for t in answer.responses for p in t.partitions] == [0]
        # m2 takes the released record and never acknowledges it: its lock expires.
        assert acquired(await m2.fetch()) == {1: 2}
        # Meanwhile m1's fetch has nothing to acquire: it waits in the ShareFetch purgatory.
        waiting = asyncio.ensure_future(m1.fetch(max_wait_ms=20_000))
        await wait_until(
            lambda: samples(b)['purgatory_delayed_operations{purgatory="ShareFetch"}'] == 1,
            message="m1's fetch in the ShareFetch purgatory",
        )
        # Watched on the partition (appends) and on the group's partition (releases).
        assert samples(b)['purgatory_size{purgatory="ShareFetch"}'] == 2
        assert acquired(await asyncio.wait_for(waiting, 15)) == {1: 3}
        # m1 closes its session holding record 1: it is released.
        closed = await m1.acknowledge([], epoch=-1)
        assert closed.error_code == 0, closed
        after = samples(b)
    assert _counted(before, after) == {
        "purgatory_share_records_acquired_total": 8,  # 6, then record 1 twice more
        "purgatory_share_records_acknowledged_total": 4,
        "purgatory_share_records_released_total": 2,  # a RELEASE, a closed session
        "purgatory_share_records_rejected_total": 1,
        "purgatory_share_records_archived_total": 1,  # the rejected one
        "purgatory_share_acquisition_lock_timeouts_total": 1,  # m2's hold of record 1
    }
    assert after["purgatory_share_acquisition_locks"] == 0
    assert after['purgatory_delayed_operations{purgatory="ShareFetch"}'] == 0


def _counted(before: dict[str, float], after: dict[str, Any]) -> dict[str, float]:
    """The leader's share counters' increase (the coordinator's share group ones left out)."""
    names = [
        n
        for n in after
        if n.startswith("purgatory_share_")
        and n.endswith("_total")
        and not n.startswith("purgatory_share_group")
    ]
    return {n: after[n] - before.get(n, 0) for n in names}
