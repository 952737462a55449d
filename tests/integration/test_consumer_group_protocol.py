"""KIP-848's consumer group protocol with a real client: confluent-kafka's consumers with
``group.protocol=consumer`` (ConsumerGroupHeartbeat) against in-process brokers. The
assignment is the coordinator's: members join, leave, die and come back without the
others stopping, the group survives its coordinator's broker, and offsets carry over
from a classic group."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.coordinator.consumer_group import ConsumerGroup
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.broker.server import Broker
from purgatory.clients.admin import AdminClient as OurAdminClient
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.testing.cluster import metric_samples
from tests.differential.harness import body
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until

T = TypeVar("T")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HEARTBEAT_MS = 300
SESSION_MS = 3000
OFFSETS_PARTITIONS = 3
FAST_CONSUMER_GROUPS = {
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": SESSION_MS,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
}
TOPIC = "cg-orders"
PARTITIONS = 6


async def in_thread(work: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(work, *args)


@contextlib.asynccontextmanager
async def cluster(n: int, **overrides: Any) -> AsyncIterator[list[Broker]]:
    """``n`` brokers with consumer group timeouts of a test, and the test's topic."""
    replication = {
        "offsets.topic.replication.factor": n,
        "default.replication.factor": n,
        "min.insync.replicas": min(n, 2),
    }
    configs = {**FAST_CONSUMER_GROUPS, **replication, **overrides}
    async with running_cluster(n, **configs) as brokers:
        await create_topic(brokers, TOPIC, PARTITIONS)
        yield brokers


async def create_topic(brokers: list[Broker], topic: str, partitions: int) -> None:
    admin = OurAdminClient(bootstrap(brokers))  # it waits out a controller election
    try:
        await admin.create_topic(topic, partitions, len(brokers))
    finally:
        await admin.close()
    await wait_until(
        lambda: all(
            all((topic, p) in b.replica_manager.partitions for p in range(partitions))
            for b in brokers
        ),
        message=f"{topic} on every broker",
    )


def produce(servers: str, topic: str, values: list[bytes], partitions: int = PARTITIONS) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(30) == 0


def batch(name: str, count: int) -> list[bytes]:
    return [b"%s-%d" % (name.encode(), i) for i in range(count)]


def consumer_config(servers: str, group: str, **config: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": servers,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50,
        "topic.metadata.refresh.interval.ms": 500,
        **config,
    }


class Member:
    """A confluent-kafka consumer polling on a thread until told to stop: what it read
    (with when it read it), what it holds, and each assignment and revocation its
    rebalance callbacks heard."""

    def __init__(
        self, servers: str, group: str, topics: list[str], name: str = "", **config: Any
    ) -> None:
        self.name = name
        self.config = consumer_config(servers, group, **config)
        self.topics = topics
        self.records: list[tuple[str, int, int, bytes]] = []  # topic, partition, offset, value
        self.read_at: list[float] = []  # monotonic instant of each record
        self.assigned: set[tuple[str, int]] = set()
        # ("assign" or "revoke", the partitions, the monotonic instant) of each callback
        self.events: list[tuple[str, frozenset[tuple[str, int]], float]] = []
        self.errors: list[str] = []
        self.commit_each = False
        self.revoke_gate: threading.Event | None = None  # a revocation waits until it is set
        self.revoking = threading.Event()  # a revocation waits at the gate
        self.stop = threading.Event()
        self.ready = threading.Event()  # first partitions assigned
        self.ready_at = 0.0
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> Member:
        self.thread.start()
        return self

    def values(self) -> list[bytes]:
        return [value for *_, value in self.records]

    def partitions_read(self) -> set[tuple[str, int]]:
        return {(topic, partition) for topic, partition, *_ in self.records}

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        added = frozenset((tp.topic, tp.partition) for tp in partitions)
        self.events.append(("assign", added, time.monotonic()))
        self.assigned |= added
        if added and not self.ready.is_set():
            self.ready_at = time.monotonic()
            self.ready.set()

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        removed = frozenset((tp.topic, tp.partition) for tp in partitions)
        if self.revoke_gate is not None and removed:
            self.revoking.set()
            self.revoke_gate.wait(30)
        self.events.append(("revoke", removed, time.monotonic()))
        self.assigned -= removed

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(self.config)
            consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
            try:
                while not self.stop.is_set():
                    message = consumer.poll(0.05)
                    if message is None:
                        continue
                    if message.error() is not None:
                        self.errors.append(str(message.error()))
                        continue
                    topic, partition = message.topic() or "", message.partition() or 0
                    offset, value = message.offset() or 0, message.value() or b""
                    self.records.append((topic, partition, offset, value))
                    self.read_at.append(time.monotonic())
                    if self.commit_each:
                        consumer.commit(message=message, asynchronous=False)
            finally:
                consumer.close()
        except BaseException as exc:
            self.failure = exc

    def revoked(self, since: int = 0) -> set[tuple[str, int]]:
        """What the callbacks heard revoked, from event ``since`` on."""
        return {tp for kind, tps, _ in self.events[since:] if kind == "revoke" for tp in tps}

    async def close(self) -> None:
        self.stop.set()
        if self.thread.ident is None:
            return  # never started
        await in_thread(self.thread.join, 30)
        assert not self.thread.is_alive(), f"member {self.name} did not close"
        if self.failure is not None:
            raise self.failure


@contextlib.asynccontextmanager
async def members(*started: Member) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for m in started:
            m.stop.set()
        for m in started:
            await m.close()


class Feeder:
    """Produces records round the topic's partitions on a thread until stopped."""

    def __init__(self, servers: str, name: str) -> None:
        self.servers = servers
        self.name = name.encode()
        self.sent: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"feeder-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.servers, "linger.ms": 1})
        i = 0
        while not self.stop.is_set():
            value = b"%s-%d" % (self.name, i)
            producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
            self.sent.append(value)
            producer.poll(0.005)
            i += 1
        assert producer.flush(30) == 0

    async def close(self) -> list[bytes]:
        self.stop.set()
        await in_thread(self.thread.join, 30)
        return self.sent


def never_owned_twice(*ms: Member) -> None:
    """No partition was held by two members at once: each was revoked from its owner
    (its callback ran) before the next was assigned it."""
    held: dict[tuple[str, int], list[tuple[float, float, str]]] = {}
    for m in ms:
        since: dict[tuple[str, int], float] = {}
        for kind, tps, at in m.events:
            for tp in tps:
                if kind == "assign":
                    since[tp] = at
                else:
                    held.setdefault(tp, []).append((since.pop(tp), at, m.name))
        for tp, start in since.items():
            held.setdefault(tp, []).append((start, float("inf"), m.name))
    for tp, spans in held.items():
        spans.sort()
        for (_, end, owner), (start, _, successor) in itertools.pairwise(spans):
            assert end <= start, f"{tp} held by {owner} and {successor} at once"


def read_values(*ms: Member) -> Counter[bytes]:
    return Counter(v for m in ms for v in m.values())


async def all_read(expected: list[bytes], *ms: Member, timeout: float = 20) -> None:
    await wait_until(
        lambda: set(expected) <= set(read_values(*ms)),
        timeout=timeout,
        message=f"{len(expected)} records read by the members",
    )


def coordinator_group(brokers: list[Broker], group: str) -> ConsumerGroup | None:
    for b in brokers:
        found = b.group_coordinator.groups.get(group)
        if isinstance(found, ConsumerGroup):
            return found
    return None


def stable_with(brokers: list[Broker], group: str, count: int) -> bool:
    """The coordinator holds the group stable with ``count`` members, each reconciled."""
    g = coordinator_group(brokers, group)
    return (
        g is not None
        and len(g.members) == count
        and g.state.value == "Stable"
        and all(m.member_epoch == g.group_epoch for m in g.members.values())
    )


async def assigned_as_target(ms: list[Member], count: int) -> None:
    """Each member holds its share of the topic's partitions, together all of them."""

    def done() -> bool:
        held = [m.assigned for m in ms]
        return (
            all(len(h) in (PARTITIONS // count, -(-PARTITIONS // count)) for h in held)
            and set().union(*held) == {(TOPIC, p) for p in range(PARTITIONS)}
            and sum(len(h) for h in held) == PARTITIONS
        )

    await wait_until(done, timeout=20, message=f"{PARTITIONS} partitions over {count} members")


def requests_served(brokers: list[Broker]) -> Counter[tuple[str, str]]:
    """(request name, version) -> how many the brokers were sent."""
    served: Counter[tuple[str, str]] = Counter()
    for b in brokers:
        text = generate_latest(b.metrics.registry).decode()
        for (name, labels), value in metric_samples(text).items():
            if name == "purgatory_requests_total":
                by = dict(labels)
                served[(by["request"], by["version"])] += int(value)
    return served


def served_names(brokers: list[Broker]) -> set[str]:
    return {name for (name, _), count in requests_served(brokers).items() if count}


# -- 1. the coordinator assigns ------------------------------------------------------------


async def test_three_members_split_six_partitions_and_read_each_record_once() -> None:
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        group = "split"
        ms = [Member(servers, group, [TOPIC], name=str(i)).start() for i in range(3)]
        async with members(*ms):
            await assigned_as_target(ms, 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="a stable group")
            assert all(len(m.assigned) == 2 for m in ms)
            expected = batch("split", 120)
            await in_thread(produce, servers, TOPIC, expected)
            await all_read(expected, *ms)
            # Each record exactly once, by the member that holds its partition.
            assert read_values(*ms) == Counter(expected)
            for m in ms:
                assert m.partitions_read() == m.assigned

            admin = AdminClient({"bootstrap.servers": servers})
            listed = await in_thread(
                admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result, 30
            )
            assert [(g.group_id, g.type) for g in listed.valid] == [
                (group, ConsumerGroupType.CONSUMER)
            ]
            (future,) = admin.describe_consumer_groups([group]).values()
            described = await in_thread(future.result, 30)
            assert described.type == ConsumerGroupType.CONSUMER
            assert described.state == ConsumerGroupState.STABLE
            assert len(described.members) == 3
            by_member = {
                frozenset((tp.topic, tp.partition) for tp in d.assignment.topic_partitions)
                for d in described.members
            }
            assert by_member == {frozenset(m.assigned) for m in ms}
            never_owned_twice(*ms)
            # librdkafka 2.16 asked the coordinator by KIP-848's APIs only: no JoinGroup,
            # and ConsumerGroupDescribe (not DescribeGroups) for a consumer group.
            served = served_names(brokers)
            assert {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "ListGroups"} <= served
            assert not served & {"JoinGroup", "SyncGroup", "Heartbeat", "DescribeGroups"}
            assert brokers[0].group_coordinator.consumer_groups.rebalances >= 1


# -- 2. no stop-the-world --------------------------------------------------------------


async def test_a_joining_member_takes_partitions_without_stopping_the_others_and_a_leaving_one_hands_its_own_over() -> (
    None
):
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        group = "incremental"
        old = [Member(servers, group, [TOPIC], name=str(i)).start() for i in range(3)]
        newcomer = Member(servers, group, [TOPIC], name="new")
        async with members(*old, newcomer), contextlib.AsyncExitStack() as stack:
            await assigned_as_target(old, 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 stable members")
            held_before = [set(m.assigned) for m in old]
            heard = [len(m.events) for m in old]
            feeder = Feeder(servers, "flow")
            stack.push_async_callback(feeder.close)
            await wait_until(
                lambda: all(m.records for m in old), message="records flowing to every member"
            )

            joined_at = time.monotonic()
            newcomer.start()
            await in_thread(newcomer.ready.wait, 20)
            assert newcomer.ready.is_set(), "the fourth member was given no partitions"
            await assigned_as_target([*old, newcomer], 4)
            await wait_until(lambda: stable_with(brokers, group, 4), message="4 stable members")

            # Each old member gave up only what moved to the newcomer: its callbacks heard
            # the revocation of those partitions alone (incremental, not everything).
            for m, before, since in zip(old, held_before, heard, strict=True):
                kept = before & m.assigned
                assert m.assigned <= before
                assert m.revoked(since) == before - kept
                # ... and it read its kept partitions while the group rebalanced (between
                # the newcomer's join and its first assignment).
                during = {
                    (topic, partition)
                    for (topic, partition, *_), at in zip(m.records, m.read_at, strict=True)
                    if joined_at <= at <= newcomer.ready_at
                }
                assert during & kept, f"member {m.name} stopped reading while the group rebalanced"
            moved = set().union(*(m.revoked(since) for m, since in zip(old, heard, strict=True)))
            assert moved == newcomer.assigned

            # The newcomer leaves (a clean close): its partitions go back to the others.
            await newcomer.close()
            await assigned_as_target(old, 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 members again")
            returned = set().union(*(m.assigned for m in old)) & moved
            assert returned == moved
            never_owned_twice(*old, newcomer)
            sent = await feeder.close()
            await all_read(sent, *old, newcomer)
            read = read_values(*old, newcomer)
            assert set(sent) <= set(read)
            # A partition that never moved was read once, by the member that kept it.
            never_moved = set().union(*held_before) - moved
            for m in old:
                own = [v for t, p, _, v in m.records if (t, p) in never_moved]
                assert own and all(read[v] == 1 for v in own)


# -- 3. a member killed ---------------------------------------------------------------

# A member in a process of its own: it prints what it is assigned and what it reads.
MEMBER_PROCESS = """
import sys
from confluent_kafka import Consumer

servers, group, topic = sys.argv[1:4]
consumer = Consumer({
    "bootstrap.servers": servers, "group.id": group, "group.protocol": "consumer",
    "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
})

def said(kind):
    def callback(consumer, partitions):
        print(kind, *(tp.partition for tp in partitions), flush=True)
    return callback

consumer.subscribe([topic], on_assign=said("assign"), on_revoke=said("revoke"))
while True:
    m = consumer.poll(0.05)
    if m is not None and m.error() is None:
        print("record", m.partition(), m.offset(), m.value().decode(), flush=True)
"""


class MemberProcess:
    def __init__(self, servers: str, group: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", MEMBER_PROCESS, servers, group, TOPIC],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.assigned: set[tuple[str, int]] = set()
        self.values: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, *fields = line.split()
            if kind == "assign":
                self.assigned |= {(TOPIC, int(p)) for p in fields}
            elif kind == "revoke":
                self.assigned -= {(TOPIC, int(p)) for p in fields}
            elif kind == "record":
                self.values.append(fields[2].encode())

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


async def test_a_killed_members_partitions_go_to_the_survivors_after_its_session() -> None:
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        group = "killed"
        survivors = [Member(servers, group, [TOPIC], name=str(i)).start() for i in range(2)]
        doomed = MemberProcess(servers, group)
        try:
            async with members(*survivors):
                await wait_until(
                    lambda: (
                        stable_with(brokers, group, 3)
                        and len(doomed.assigned) == 2
                        and all(len(m.assigned) == 2 for m in survivors)
                    ),
                    timeout=20,
                    message="3 members with 2 partitions each",
                )
                before = batch("before", 60)
                await in_thread(produce, servers, TOPIC, before)
                await wait_until(
                    lambda: set(before) <= set(read_values(*survivors)) | set(doomed.values),
                    message="the first records read",
                )
                orphaned = set(doomed.assigned)
                assert orphaned and {v for v in doomed.values} <= set(before)

                await in_thread(doomed.kill)  # no leave: the coordinator waits for its session
                after = batch("after", 60)
                await in_thread(produce, servers, TOPIC, after)
                await all_read(after, *survivors, timeout=SESSION_MS / 1000 + 20)
                await wait_until(lambda: stable_with(brokers, group, 2), message="2 members left")
                assert set().union(*(m.assigned for m in survivors)) == {
                    (TOPIC, p) for p in range(PARTITIONS)
                }
                # The survivors took the orphaned partitions and read every record on them
                # from the group's committed offset on: nothing lost, in either batch.
                taken = set().union(*(m.partitions_read() for m in survivors))
                assert orphaned <= taken
                assert set(before) <= set(read_values(*survivors)) | set(doomed.values)
                assert Counter(v for v in read_values(*survivors) if v in set(after)) == Counter(
                    after
                )
        finally:
            doomed.kill()


# -- 4. the coordinator's broker stops --------------------------------------------------


def offsets_leader(brokers: list[Broker], group: str) -> Broker | None:
    key = (OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))
    for b in brokers:
        partition = b.replica_manager.partitions.get(key)
        if partition is not None and partition.is_leader:
            return b
    return None


def committed_offsets(servers: str, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": servers})
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {tp.partition: tp.offset for tp in future.result(30).topic_partitions}


async def all_committed(servers: str, group: str, offset: int) -> bool:
    """The group has committed ``offset`` on each of the topic's partitions."""
    committed = await in_thread(committed_offsets, servers, group)
    return committed == {p: offset for p in range(PARTITIONS)}


async def test_the_group_carries_on_when_its_coordinators_broker_stops() -> None:
    # The controller fences the stopped broker soon: its partitions get new leaders.
    fencing = {"broker.heartbeat.interval.ms": 100, "broker.session.timeout.ms": 1500}
    async with cluster(3, **fencing) as brokers:
        servers = bootstrap(brokers)
        group = "failover"
        ms = [
            Member(servers, group, [TOPIC], name=str(i), **{"enable.auto.commit": False})
            for i in range(3)
        ]
        for m in ms:
            m.commit_each = True
            m.start()
        async with members(*ms):
            await assigned_as_target(ms, 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 stable members")
            before = batch("before", 60)
            await in_thread(produce, servers, TOPIC, before)
            await all_read(before, *ms)
            await wait_until(
                lambda: all_committed(servers, group, 10), message="the first records committed"
            )
            coordinator = offsets_leader(brokers, group)
            assert coordinator is not None
            old = coordinator_group([coordinator], group)
            assert old is not None
            epoch, owned = old.group_epoch, {i: dict(m.assigned) for i, m in old.members.items()}
            heard = [len(m.events) for m in ms]

            await coordinator.stop()
            survivors = [b for b in brokers if b is not coordinator]

            def reloaded_by_new_coordinator() -> bool:
                leader = offsets_leader(survivors, group)
                return leader is not None and stable_with([leader], group, 3)

            await wait_until(
                reloaded_by_new_coordinator,
                timeout=20,
                message="a new coordinator with the group loaded",
            )
            # The new coordinator answers the offsets committed through the old one.
            assert await all_committed(bootstrap(survivors), group, 10)
            after = batch("after", 60)
            await in_thread(produce, bootstrap(survivors), TOPIC, after)
            await all_read(after, *ms, timeout=30)

            # The group came back from its records as it was: the same members in the
            # same epoch with the same partitions, none revoked. None was fenced or
            # rejoined either: either would have bumped the group epoch.
            reloaded = coordinator_group(survivors, group)
            assert reloaded is not None
            assert reloaded.group_epoch == epoch
            assert {i: dict(m.assigned) for i, m in reloaded.members.items()} == owned
            assert all(not m.revoked(since) for m, since in zip(ms, heard, strict=True))
            await wait_until(
                lambda: all_committed(bootstrap(survivors), group, 20),
                message="every record committed",
            )
            read = read_values(*ms)
            assert set(read) == set(before) | set(after)
            # At least once: only a record whose commit the stop cut off is read twice.
            assert sum(read.values()) - len(read) <= len(ms)


def reconciliation(group: ConsumerGroup) -> Any:
    """What the coordinator knows of where the group's rebalance stands."""
    return (
        group.group_epoch,
        group.assignment_epoch,
        dict(group.target_assignment),
        {
            m.member_id: (m.member_epoch, m.state, m.assigned, m.pending_revocation)
            for m in group.members.values()
        },
    )


async def test_a_rebalance_half_done_when_the_coordinators_broker_stops_completes_on_the_next() -> (
    None
):
    fencing = {"broker.heartbeat.interval.ms": 100, "broker.session.timeout.ms": 1500}
    async with cluster(3, **fencing) as brokers:
        servers = bootstrap(brokers)
        group = "midway"
        gate = threading.Event()
        gate.set()
        old = [Member(servers, group, [TOPIC], name=str(i)) for i in range(3)]
        newcomer = Member(servers, group, [TOPIC], name="new")
        for m in old:
            m.revoke_gate = gate
            m.start()
        async with members(*old, newcomer), contextlib.AsyncExitStack() as opened:
            opened.callback(gate.set)  # before the members close
            await assigned_as_target(old, 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 members")
            # The newcomer joins; the old members' revocations wait: the group stays with
            # partitions promised to the newcomer and not yet released.
            gate.clear()
            newcomer.start()
            coordinator = offsets_leader(brokers, group)
            assert coordinator is not None
            g = coordinator_group([coordinator], group)
            assert g is not None
            log = coordinator.replica_manager.partitions[
                (OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))
            ]

            def halted() -> bool:
                """Members revoke at the gate, the others are in the new epoch, and the
                group's records are all committed: nothing moves until the gate opens."""
                states = [m.state.value for m in g.members.values()]
                return (
                    len(states) == 4
                    and "unrevoked_partitions" in states
                    and all(
                        m.member_epoch == g.group_epoch or m.state.value == "unrevoked_partitions"
                        for m in g.members.values()
                    )
                    and log.high_watermark == log.log.log_end_offset
                )

            await wait_until(halted, timeout=20, message="the rebalance halted at revocation")
            halfway = reconciliation(g)

            await coordinator.stop()
            survivors = [b for b in brokers if b is not coordinator]

            def reloaded() -> bool:
                leader = offsets_leader(survivors, group)
                return leader is not None and coordinator_group([leader], group) is not None

            await wait_until(reloaded, timeout=20, message="the group on a new coordinator")
            moved = coordinator_group(survivors, group)
            assert moved is not None
            assert reconciliation(moved) == halfway  # replayed from its records as it was

            gate.set()
            await assigned_as_target([*old, newcomer], 4)
            await wait_until(lambda: stable_with(survivors, group, 4), message="4 members")
            assert moved.group_epoch == halfway[0]  # nobody fenced, nobody rejoined
            never_owned_twice(*old, newcomer)


# -- 5. static membership ---------------------------------------------------------------


async def test_a_static_member_back_within_its_session_gets_its_partitions_back() -> None:
    # A longer session: the closed member's consumer must start again within it.
    session = {
        "group.consumer.session.timeout.ms": 10000,
        "group.consumer.min.session.timeout.ms": 10000,
    }
    async with cluster(1, **session) as brokers:
        servers = bootstrap(brokers)
        group = "static"

        def member(instance: str) -> Member:
            return Member(servers, group, [TOPIC], name=instance, **{"group.instance.id": instance})

        stay = [member("a"), member("c")]
        leaving = member("b")
        back = member("b")
        async with members(*stay, leaving, back):
            for m in (*stay, leaving):
                m.start()
            await assigned_as_target([*stay, leaving], 3)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 stable members")
            g = coordinator_group(brokers, group)
            assert g is not None
            epoch = g.group_epoch
            held = set(leaving.assigned)
            heard = [len(m.events) for m in stay]

            await leaving.close()  # a static member's leave: epoch -2, it keeps its place
            await wait_until(
                lambda: any(
                    m.instance_id == "b" and m.member_epoch == -2 for m in g.members.values()
                ),
                message="the coordinator keeps member b's place",
            )
            back.start()
            await in_thread(back.ready.wait, 20)
            await wait_until(lambda: back.assigned == held, message="b's partitions back")
            never_owned_twice(*stay, leaving, back)
            await wait_until(lambda: stable_with(brokers, group, 3), message="3 stable members")
            # No rebalance: the others kept everything, the group epoch did not move.
            assert all(not m.revoked(since) for m, since in zip(stay, heard, strict=True))
            assert coordinator_group(brokers, group) is g and g.group_epoch == epoch
            (member_b,) = [m for m in g.members.values() if m.instance_id == "b"]
            assert {p for ps in member_b.assigned.values() for p in ps} == {p for _, p in held}


# -- 6. regular expressions ---------------------------------------------------------------


async def test_a_regex_subscription_picks_up_a_topic_created_after_it() -> None:
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        group = "pattern"
        await create_topic(brokers, "other", 1)
        m = Member(servers, group, ["^cg-.*"], name="regex").start()
        async with members(m):
            await wait_until(lambda: len(m.assigned) == PARTITIONS, message="cg-orders assigned")
            g = coordinator_group(brokers, group)
            assert g is not None
            (member,) = g.members.values()
            # The coordinator resolves the regex (librdkafka sends it, not topic names).
            assert member.subscribed_topic_regex is not None
            assert "cg-" in member.subscribed_topic_regex

            await create_topic(brokers, "cg-later", 2)
            await wait_until(
                lambda: {("cg-later", 0), ("cg-later", 1)} <= m.assigned,
                timeout=20,
                message="the new topic assigned",
            )
            later = batch("later", 10)
            await in_thread(produce, servers, "cg-later", later, 2)
            await in_thread(produce, servers, "other", batch("other", 3), 1)
            await wait_until(lambda: set(later) <= set(m.values()), message="cg-later's records")
            assert not {t for t, *_ in m.records} - {"cg-later", TOPIC}


# -- 7. offsets -----------------------------------------------------------------------------


async def test_offsets_commit_by_member_epoch_and_carry_over_from_a_classic_group() -> None:
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        first = batch("first", 60)
        await in_thread(produce, servers, TOPIC, first)

        def commit_and_read_back(group: str, protocol: str, count: int) -> list[Any]:
            """Read ``count`` records in ``group``, commit, and read the commit back."""
            c = KafkaConsumer(
                consumer_config(
                    servers, group, **{"group.protocol": protocol, "enable.auto.commit": False}
                )
            )
            try:
                c.subscribe([TOPIC])
                read: list[Any] = []
                deadline = time.monotonic() + 20
                while len(read) < count and time.monotonic() < deadline:
                    m = c.poll(0.1)
                    if m is not None and m.error() is None:
                        read.append(m.value())
                committed = c.commit(asynchronous=False)
                assert committed is not None
                back = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 10)
                return [read, {tp.partition: tp.offset for tp in back}]
            finally:
                c.close()

        read, back = await in_thread(commit_and_read_back, "epochs", "consumer", 60)
        assert sorted(read) == sorted(first)
        assert back == {p: 10 for p in range(PARTITIONS)}
        # OffsetCommit v9+ carries the member id and epoch (KIP-848).
        served = requests_served(brokers)
        assert any(name == "OffsetCommit" and int(v) >= 9 for (name, v), n in served.items() if n)

        # A classic group commits the first records and empties; a consumer group member
        # then joins it (the coordinator converts it) and resumes after them.
        read, back = await in_thread(commit_and_read_back, "converted", "classic", 60)
        assert sorted(read) == sorted(first) and back == {p: 10 for p in range(PARTITIONS)}
        described = await in_thread(describe, servers, "converted")
        assert (described.type, described.state) == (
            ConsumerGroupType.CLASSIC,
            ConsumerGroupState.EMPTY,
        )
        second = batch("second", 30)
        await in_thread(produce, servers, TOPIC, second)
        read, back = await in_thread(commit_and_read_back, "converted", "consumer", 30)
        assert sorted(read) == sorted(second)
        assert back == {p: 15 for p in range(PARTITIONS)}
        assert isinstance(coordinator_group(brokers, "converted"), ConsumerGroup)
        described = await in_thread(describe, servers, "converted")
        assert (described.type, described.state) == (
            ConsumerGroupType.CONSUMER,
            ConsumerGroupState.EMPTY,
        )


def describe(servers: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": servers})
    (future,) = admin.describe_consumer_groups([group]).values()
    return future.result(30)


async def offset_commit(
    wire: KafkaWire, version: int, group: str, member_id: str, epoch: int
) -> int:
    """The error of an OffsetCommit of offset 0 of the topic's partition 0."""
    partitions = [{"partition_index": 0, "committed_offset": 0, "committed_metadata": None}]
    request = body(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        group_instance_id=None,
        topics=[{"name": TOPIC, "partitions": partitions}],
    )
    answer = await wire.call(ApiKey.OFFSET_COMMIT, version, request)
    (topic,) = answer.topics
    (partition,) = topic.partitions
    return int(partition.error_code)


async def test_an_offset_commit_is_refused_unless_it_carries_the_members_epoch() -> None:
    async with cluster(1) as brokers:
        servers = bootstrap(brokers)
        group = "epochs"
        m = Member(servers, group, [TOPIC], name="m", **{"enable.auto.commit": False}).start()
        async with members(m):
            await wait_until(lambda: stable_with(brokers, group, 1), message="a stable member")
            g = coordinator_group(brokers, group)
            assert g is not None
            (member,) = g.members.values()
            member_id, epoch = member.member_id, member.member_epoch
            wire = await KafkaWire.open(brokers[0].port)
            try:
                # Kafka's ConsumerGroup.validateOffsetCommit: the member's epoch and no
                # other.
                assert await offset_commit(wire, 9, group, member_id, epoch) == ErrorCode.NONE
                for stale in (epoch - 1, epoch + 1):
                    assert (
                        await offset_commit(wire, 9, group, member_id, stale)
                        == ErrorCode.STALE_MEMBER_EPOCH
                    )
                assert (
                    await offset_commit(wire, 9, group, "someone-else", epoch)
                    == ErrorCode.UNKNOWN_MEMBER_ID
                )
                # An admin's commit (epoch -1) only to an empty group.
                assert await offset_commit(wire, 9, group, "", -1) == ErrorCode.UNKNOWN_MEMBER_ID
                # A KIP-848 member commits with v9+ (it carries the member epoch).
                assert (
                    await offset_commit(wire, 8, group, member_id, epoch)
                    == ErrorCode.UNSUPPORTED_VERSION
                )
            finally:
                await wire.close()
            assert g.group_epoch == epoch  # none of it disturbed the group
