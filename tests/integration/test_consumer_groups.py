"""Consumer groups with real clients: members of four libraries in one group, clean
leaves, static members, vanished members, and the offsets they commit."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from purgatory.broker.coordinator.group_metadata import GroupState
from purgatory.broker.server import Broker
from purgatory.clients import Consumer, Producer
from tests.integration.test_kafka_clients import create, in_thread
from tests.support import bootstrap, running_cluster, wait_until

TOPIC = "shared"
PARTITIONS = 8
FAST_GROUPS = {"group.initial.rebalance.delay.ms": 200, "group.min.session.timeout.ms": 1000}


@pytest.fixture
async def cluster() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **FAST_GROUPS) as brokers:
        await create(brokers, TOPIC, PARTITIONS)
        yield brokers


def coordinated(brokers: list[Broker], group: str) -> Any:
    """The group as its coordinator holds it (None until one does)."""
    for b in brokers:
        found = b.group_coordinator.groups.get(group)
        if found is not None:
            return found
    return None


async def produce(brokers: list[Broker], count: int) -> set[bytes]:
    values = set()
    async with Producer(bootstrap(brokers), linger_ms=5) as producer:
        for i in range(count):
            value = b"r%d" % i
            values.add(value)
            await producer.send(TOPIC, value, partition=i % PARTITIONS)
        await producer.flush()
    return values


class Member:
    """One group member of some library, consuming on a thread (or a task) until told to
    stop; what it read, and the partitions it was last assigned."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.records: list[tuple[int, int, bytes]] = []
        self.assigned: set[int] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None


def kafka_python_member(port_list: str, group: str, member: Member) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=port_list,
        group_id=group,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
        session_timeout_ms=10000,
        heartbeat_interval_ms=300,
    )
    try:
        while not member.stop.is_set():
            for tp, messages in consumer.poll(timeout_ms=100).items():
                member.records.extend((tp.partition, m.offset, m.value) for m in messages)
            member.assigned = {tp.partition for tp in consumer.assignment()}
    finally:
        consumer.close()


def confluent_member(port_list: str, group: str, member: Member) -> None:
    from confluent_kafka import Consumer as ConfluentConsumer

    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": port_list,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe([TOPIC])
    try:
        while not member.stop.is_set():
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                member.records.append((message.partition(), message.offset(), message.value()))
            member.assigned = {tp.partition for tp in consumer.assignment()}
    finally:
        consumer.close()


async def aiokafka_member(port_list: str, group: str, member: Member) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=port_list,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=300,
    )
    await consumer.start()
    try:
        while not member.stop.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            for tp, messages in batches.items():
                member.records.extend((tp.partition, m.offset, m.value) for m in messages)
            member.assigned = {tp.partition for tp in consumer.assignment()}
    finally:
        await consumer.stop()


async def our_member(port_list: str, group: str, member: Member, **options: Any) -> None:
    async with Consumer(
        port_list,
        group_id=group,
        auto_offset_reset="earliest",
        partition_assignment_strategy=["roundrobin"],
        session_timeout_ms=10000,
        heartbeat_interval_ms=300,
        auto_commit_interval_ms=200,
        **options,
    ) as consumer:
        consumer.subscribe([TOPIC])
        while not member.stop.is_set():
            for r in await consumer.poll(timeout_ms=100):
                member.records.append((r.partition, r.offset, r.value or b""))
            member.assigned = {p for _, p in consumer.assignment()}


@contextlib.asynccontextmanager
async def running(*members: tuple[Member, Callable[[], Any]]) -> AsyncIterator[None]:
    """Run each member (a coroutine, or a blocking function for a thread) until the block
    ends; then stop them all and raise what any of them raised."""
    tasks = []
    for _, start in members:
        work = start()
        tasks.append(asyncio.ensure_future(work if asyncio.iscoroutine(work) else in_thread(work)))
    try:
        yield
    finally:
        for member, _ in members:
            member.stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]


async def test_members_of_four_libraries_split_the_partitions_and_read_everything_once(
    cluster: list[Broker],
) -> None:
    servers = bootstrap(cluster)
    group = "mixed"
    kp, cf, ak, ours = (Member(n) for n in ("kafka-python", "confluent", "aiokafka", "ours"))
    async with running(
        (kp, lambda: lambda: kafka_python_member(servers, group, kp)),
        (cf, lambda: lambda: confluent_member(servers, group, cf)),
        (ak, lambda: aiokafka_member(servers, group, ak)),
        (ours, lambda: our_member(servers, group, ours)),
    ):
        members = (kp, cf, ak, ours)

        def settled() -> bool:
            g = coordinated(cluster, group)
            return (
                g is not None
                and g.state is GroupState.STABLE
                and len(g.members) == 4
                and sorted(p for m in members for p in m.assigned) == list(range(PARTITIONS))
                # each member's view is of the last generation (a member slow to hear of
                # a rebalance still shows its old partitions)
                and all(len(m.assigned) == 2 for m in members)
            )

        await wait_until(settled, timeout=60, message="four members share the 8 partitions, 2 each")
        group_state = coordinated(cluster, group)
        assert group_state.protocol_name == "roundrobin"  # the one every library supports
        values = await produce(cluster, 400)
        await wait_until(
            lambda: sum(len(m.records) for m in members) >= 400,
            timeout=30,
            message="every record read",
        )
        # Taken while they are members: leaving the group revokes a member's partitions.
        assigned = {m.name: set(m.assigned) for m in members}
    read = [value for m in members for _, _, value in m.records]
    assert sorted(read) == sorted(values)  # each once
    for m in members:  # each read only its own partitions
        assert {p for p, _, _ in m.records} == assigned[m.name], m.name


async def test_a_member_that_leaves_cleanly_hands_its_partitions_over_at_once(
    cluster: list[Broker],
) -> None:
    servers = bootstrap(cluster)
    group = "leaving"
    staying, leaving = Member("staying"), Member("leaving")
    async with running((staying, lambda: our_member(servers, group, staying))):
        async with running((leaving, lambda: lambda: kafka_python_member(servers, group, leaving))):
            await wait_until(
                lambda: staying.assigned and leaving.assigned,
                timeout=60,
                message="two members",
            )
        # kafka-python's close sent LeaveGroup: no session had to expire.
        await wait_until(
            lambda: staying.assigned == set(range(PARTITIONS)),
            timeout=30,
            message="the partitions taken over",
        )
        coordinator = next(b for b in cluster if group in b.group_coordinator.groups)
        assert coordinator.group_coordinator.sessions.purgatory.expirations == 0


async def test_static_members_come_back_without_a_rebalance(cluster: list[Broker]) -> None:
    servers = bootstrap(cluster)
    group = "static"
    first, second = Member("first"), Member("second")
    async with running(
        (first, lambda: our_member(servers, group, first, group_instance_id="a")),
        (second, lambda: our_member(servers, group, second, group_instance_id="b")),
    ):
        await wait_until(
            lambda: len(first.assigned) == len(second.assigned) == PARTITIONS // 2,
            timeout=60,
            message="two static members",
        )
    before = {m.name: m.assigned for m in (first, second)}
    group_state = coordinated(cluster, group)
    coordinator = next(b for b in cluster if group in b.group_coordinator.groups)
    rebalances = coordinator.group_coordinator.rebalancer.rebalances
    assert len(group_state.members) == 2  # closing did not leave: they keep their places
    again = Member("first again")
    async with running((again, lambda: our_member(servers, group, again, group_instance_id="a"))):
        await wait_until(lambda: again.assigned, timeout=30, message="the static member back")
    assert again.assigned == before["first"]
    assert coordinator.group_coordinator.rebalancer.rebalances == rebalances


async def test_our_consumer_resumes_from_the_groups_committed_offsets(
    cluster: list[Broker],
) -> None:
    servers = bootstrap(cluster)
    group = "resume"
    values = await produce(cluster, 80)
    first = Member("first")
    async with running((first, lambda: our_member(servers, group, first))):
        await wait_until(lambda: len(first.records) >= 80, timeout=60, message="first read")
    second = Member("second")
    await produce(cluster, 16)
    async with running((second, lambda: our_member(servers, group, second))):
        await wait_until(lambda: len(second.records) >= 16, timeout=60, message="second read")
    assert {v for _, _, v in first.records} == values
    assert all(int(v[1:]) < 16 for _, _, v in second.records)  # only the new ones
    assert len(second.records) == 16


class Recorder:
    """A rebalance listener that writes down what it hears, in order (one method is a
    coroutine: the consumer awaits it)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    async def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self.events.append(("revoked", len(partitions)))

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
        self.events.append(("assigned", len(partitions)))


async def test_listeners_hear_each_revocation_before_the_next_assignment_and_state_shows_the_group(
    cluster: list[Broker],
) -> None:
    servers = bootstrap(cluster)
    group = "listened"
    heard = Recorder()
    async with Consumer(
        servers, group_id=group, session_timeout_ms=10000, heartbeat_interval_ms=200
    ) as first:
        first.subscribe([TOPIC], heard)
        polled = [first]

        def holding(*counts: int) -> Callable[[], Any]:
            async def check() -> bool:
                await asyncio.gather(*(c.poll(timeout_ms=20) for c in polled))
                return [len(c.assignment()) for c in polled] == list(counts)

            return check

        await wait_until(holding(PARTITIONS), timeout=30, message="the first alone")
        async with Consumer(
            servers, group_id=group, client_id="second", heartbeat_interval_ms=200
        ) as second:
            second.subscribe([TOPIC])
            polled.append(second)
            half = PARTITIONS // 2
            await wait_until(holding(half, half), timeout=30, message="two members, half each")
            coordinator = next(b for b in cluster if group in b.group_coordinator.groups)
            (described,) = [g for g in coordinator.state().groups if g.group_id == group]
            assert described.state == "Stable" and described.generation_id == 2
            assert sorted(m.client_id for m in described.members) == [
                "purgatory-consumer",
                "second",
            ]
            polled.remove(second)
        await wait_until(holding(PARTITIONS), timeout=30, message="all back after the leave")
    assert heard.events == [
        ("assigned", PARTITIONS),
        ("revoked", PARTITIONS),
        ("assigned", PARTITIONS // 2),
        ("revoked", PARTITIONS // 2),
        ("assigned", PARTITIONS),
        ("revoked", PARTITIONS),  # closing gives the partitions up too
    ]


async def test_a_metadata_request_naming_the_offsets_topic_creates_it_as_its_coordinators_need() -> (
    None
):
    """A client that asks Metadata for `__consumer_offsets` before any FindCoordinator
    (sarama does, under load it came first) auto-creates it with
    offsets.topic.num.partitions partitions, as Kafka's AutoTopicCreationManager does: a
    topic of num.partitions (1) left every group hashed past partition 0 without a
    coordinator for ever (COORDINATOR_NOT_AVAILABLE)."""
    from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
    from purgatory.protocol import messages as m
    from purgatory.protocol.errors import ErrorCode

    async with running_cluster(1, **{"offsets.topic.num.partitions": 7}) as brokers:
        broker = brokers[0]
        answer = broker.apis.handle_metadata(m.MetadataRequest([OFFSETS_TOPIC], True), 0)
        await answer
        await wait_until(lambda: OFFSETS_TOPIC in broker.metadata.topics)
        assert len(broker.metadata.topics[OFFSETS_TOPIC].partitions) == 7
        groups = [f"g{i}" for i in range(20)]  # hashed over the 7 partitions
        await wait_until(
            lambda: all(
                broker.group_coordinator.find_coordinator(g)[0] == ErrorCode.NONE for g in groups
            ),
            message="a coordinator for every group",
        )
