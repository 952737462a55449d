"""Consumer groups when processes die: a member killed with SIGKILL, a coordinator broker
killed with SIGKILL. Committed offsets survive both, and consumers resume from them."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator

import pytest

from purgatory.broker.coordinator.group_records import partition_for
from purgatory.clients import AdminClient, Consumer, Producer
from purgatory.clients.cli.tools import REBALANCING
from purgatory.clients.fetcher import ConsumerMessage
from purgatory.protocol.consumer_protocol import decode_assignment
from purgatory.protocol.errors import KafkaError
from tests.cluster.process_cluster import running
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.cluster

SESSION_MS = 2000
HEARTBEAT_MS = 300
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
}


async def produce(servers: str, topic: str, partitions: int, start: int, count: int) -> None:
    """``count`` records per partition, values ``p<partition>-<n>`` from n = ``start``."""
    async with Producer(servers, acks=-1, linger_ms=2) as producer:
        for n in range(start, start + count):
            for p in range(partitions):
                await producer.send(topic, f"p{p}-{n}".encode(), partition=p)
        await producer.flush()


@contextlib.asynccontextmanager
async def console_member(
    servers: str, topic: str, group: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, list[tuple[int, int]]]]:
    """`purgatory consume --group` as a process; yields it and the (partition, offset)
    pairs it printed so far (a task keeps reading them)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "purgatory", "consume", topic, "--group", group,
        "--from-beginning", "--print-offset", "--bootstrap", servers,
        "--consumer-property", f"session.timeout.ms={SESSION_MS}",
        "--consumer-property", f"heartbeat.interval.ms={HEARTBEAT_MS}",
        "--consumer-property", "client.id=console-member",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    printed: list[tuple[int, int]] = []

    async def read() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            where = line.split(b"\t", 1)[0].decode()
            partition, offset = where.split(":")
            printed.append((int(partition), int(offset)))

    reader = asyncio.ensure_future(read())
    try:
        yield proc, printed
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


async def assignment(admin: AdminClient, group: str) -> dict[str, set[int]]:
    """Each member's partitions, by client id, once the group is Stable (else empty)."""
    (described,) = await admin.describe_groups([group])
    if described.state != "Stable":
        return {}
    return {
        member.client_id: {
            p for _, ps in decode_assignment(member.assignment).partitions.items() for p in ps
        }
        for member in described.members
    }


async def committed_offsets(admin: AdminClient, group: str, topic: str, count: int) -> list[int]:
    committed = await admin.group_offsets(group)
    return [committed.get((topic, p), (0, None))[0] for p in range(count)]


@contextlib.asynccontextmanager
async def polling(consumer: Consumer) -> AsyncIterator[list[ConsumerMessage]]:
    """Poll ``consumer`` in a task, committing after each batch; yields what it read."""
    read: list[ConsumerMessage] = []

    async def keep_polling() -> None:
        while True:
            records = await consumer.poll(timeout_ms=200)
            read.extend(records)
            if records:
                try:
                    await consumer.commit()
                except KafkaError as exc:  # a rebalance or a moving coordinator:
                    if not exc.retriable and exc.code not in REBALANCING:
                        raise  # committed with the next records

    poller = asyncio.ensure_future(keep_polling())
    try:
        yield read
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller


def member(servers: str, group: str, client_id: str, session_timeout_ms: int) -> Consumer:
    return Consumer(
        servers,
        group_id=group,
        client_id=client_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        fetch_max_wait_ms=100,
    )


async def test_a_killed_members_partitions_are_taken_over_after_its_session_timeout_from_its_commits() -> (
    None
):
    """A console consumer process reads four partitions alone, then shares them with our
    consumer in this test, 2+2. The process is killed with SIGKILL after committing; the
    survivor takes its partitions over only once the session timeout has passed, and
    reads them from the dead member's commits: every record is read once."""
    async with running_cluster(1, **GROUP_SETTINGS) as brokers:
        servers = bootstrap(brokers)
        async with AdminClient(servers) as admin:
            await admin.create_topic("work", 4, 1)
            await produce(servers, "work", 4, 0, 25)

            async def committed(n: int) -> bool:
                return await committed_offsets(admin, "crew", "work", 4) == [n] * 4

            async with console_member(servers, "work", "crew") as (proc, printed):
                await wait_until(
                    lambda: committed(25), timeout=30, message="the process alone committed 25"
                )
                async with (
                    member(servers, "crew", "survivor", SESSION_MS) as survivor,
                    polling(survivor) as survivor_read,
                ):
                    survivor.subscribe(["work"])
                    split: dict[str, set[int]] = {}

                    async def both_hold_two() -> bool:
                        nonlocal split
                        split = await assignment(admin, "crew")
                        return sorted(len(ps) for ps in split.values()) == [2, 2]

                    await wait_until(both_hold_two, timeout=30, message="two members, 2+2")
                    dead = split["console-member"]
                    await produce(servers, "work", 4, 25, 10)
                    await wait_until(lambda: committed(35), timeout=30, message="both committed 35")
                    proc.send_signal(signal.SIGKILL)
                    killed_at = time.monotonic()
                    await proc.wait()
                    # Produced while the member is dead but still in the group: an
                    # auto.offset.reset of latest would skip these, earliest would
                    # re-read from 0; only the commits give exactly 35 onwards.
                    await produce(servers, "work", 4, 35, 10)

                    async def survivor_holds_all() -> bool:
                        return (await assignment(admin, "crew")).get("survivor") == {0, 1, 2, 3}

                    await wait_until(
                        survivor_holds_all, timeout=30, message="the survivor owns every partition"
                    )
                    took = time.monotonic() - killed_at
                    # Its session began at its last heartbeat, at most one interval before.
                    assert took >= (SESSION_MS - HEARTBEAT_MS) / 1000, took
                    await wait_until(
                        lambda: committed(45), timeout=30, message="the survivor committed 45"
                    )
        read_by = {
            "process": sorted(printed),
            "survivor": sorted((r.partition, r.offset) for r in survivor_read),
        }
        assert read_by == {
            "process": sorted(
                [(p, o) for p in range(4) for o in range(25)]
                + [(p, o) for p in dead for o in range(25, 35)]
            ),
            "survivor": sorted(
                [(p, o) for p in set(range(4)) - dead for o in range(25, 45)]
                + [(p, o) for p in dead for o in range(35, 45)]
            ),
        }


async def offsets_leaders(admin: AdminClient) -> dict[int, int]:
    (topic,) = (await admin.describe_topics(["__consumer_offsets"])).topics
    return {p.partition_index: p.leader_id for p in topic.partitions}


async def test_a_killed_coordinators_groups_move_to_the_new_offsets_leader_with_their_commits() -> (
    None
):
    """Three broker processes, __consumer_offsets replicated on all three. The broker that
    coordinates a group with a live member is killed with SIGKILL: the new leader of the
    group's offsets partition coordinates it with every commit, the member carries on in
    its generation, and what it reads after the kill continues where it stood."""
    settings = {
        **GROUP_SETTINGS,
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
    }
    async with running(**settings) as cluster, AdminClient(cluster.bootstrap) as admin:
        await admin.find_coordinator("first-use")  # creates __consumer_offsets
        leaders = await offsets_leaders(admin)
        # Broker 0 is the controller, which this cluster cannot lose.
        group = next(
            g for g in (f"ledger-{i}" for i in range(100)) if leaders[partition_for(g, 3)] != 0
        )
        old = await admin.find_coordinator(group)
        assert old == leaders[partition_for(group, 3)]
        await admin.create_topic("orders", 2, 3, {"min.insync.replicas": "2"})
        await produce(cluster.bootstrap, "orders", 2, 0, 20)
        async with (
            member(cluster.bootstrap, group, "ledger-reader", 6000) as reader,
            polling(reader) as read,
        ):
            reader.subscribe(["orders"])

            async def committed(n: int) -> bool:
                return await committed_offsets(admin, group, "orders", 2) == [n, n]

            await wait_until(lambda: committed(20), timeout=30, message="20 committed")
            (before,) = await admin.describe_groups([group])
            cluster.kill(old)

            async def moved() -> bool:
                return await admin.find_coordinator(group) != old

            await wait_until(moved, timeout=30, message="another coordinator")
            new = await admin.find_coordinator(group)
            assert new == (await offsets_leaders(admin))[partition_for(group, 3)]
            assert await committed(20), "the commits moved with the group"
            (after,) = await admin.describe_groups([group])
            assert (after.generation_id, [m.member_id for m in after.members]) == (
                before.generation_id,
                [m.member_id for m in before.members],
            ), "the member carries on in its generation"
            await produce(cluster.bootstrap, "orders", 2, 20, 10)
            await wait_until(lambda: committed(30), timeout=30, message="30 committed")
        # Each record once, in order: the member never went back to an older commit.
        offsets = sorted((r.partition, r.offset) for r in read)
        assert offsets == [(p, o) for p in (0, 1) for o in range(30)]  # each once, in order
