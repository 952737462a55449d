"""KIP-932's share groups with a real client: confluent-kafka's ShareConsumer (librdkafka's
share consumer, ShareGroupHeartbeat, ShareFetch and ShareAcknowledge) against one and three
in-process brokers. Two members of one group split a partition's records, none given to
both while one holds it; a member killed (SIGKILL, a child process) holding records it never
acknowledged loses them to the other once their lock expires, delivered again with a higher
delivery count, none lost; a member closing without acknowledging releases its records at
once; explicit ACCEPT, RELEASE and REJECT, and implicit acknowledgement; and a record
released, or never acknowledged, as often as group.share.delivery.count.limit allows is
archived.

The brokers lock a record for 2 s (group.share.record.lock.duration.ms) and deliver it at
most twice (group.share.delivery.count.limit); the group starts from the earliest record
(share.auto.offset.reset, a group config set with confluent-kafka's AdminClient)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from purgatory.broker.server import Broker
from purgatory.broker.share.share_partition import SharePartition
from tests.support import bootstrap, running_cluster, wait_until

GROUP = "sg"
TOPIC = "queue"
LOCK_MS = 2000
DELIVERY_LIMIT = 2
BROKER_CONFIGS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "3000",
    "group.share.min.session.timeout.ms": "3000",
}
WAIT_S = 30.0

# A member in its own process: it polls until it is given records, prints them (partition,
# offset, delivery count) as one JSON line, and holds them unacknowledged until killed.
HOLDER = """
import json, sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    held = [(m.partition(), m.offset(), m.delivery_count()) for m in consumer.poll(0.5)
            if m.error() is None]
    if held:
        print(json.dumps(held), flush=True)
        time.sleep(3600)
"""

Delivery = tuple[int, int, int]  # partition, offset, delivery count


def _prepare(
    servers: str, replicas: int, records: int, partitions: int = 1, **group_configs: str
) -> None:
    """The topic (every broker a replica), the group reading it from the earliest record
    (and ``group_configs``, dots as underscores), and ``records`` records in it, spread
    round-robin over its partitions."""
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(TOPIC, partitions, replicas)])[TOPIC].result(WAIT_S)
    configs = {"share.auto.offset.reset": "earliest"}
    configs.update({k.replace("_", "."): v for k, v in group_configs.items()})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    group = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=entries)
    for done in admin.incremental_alter_configs([group]).values():
        done.result(WAIT_S)
    _produce(servers, 0, records, partitions)


def _produce(servers: str, first: int, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for i in range(first, first + count):
        producer.produce(TOPIC, value=f"r{i}".encode(), partition=i % partitions)
    assert producer.flush(WAIT_S) == 0


@contextmanager
def _member(servers: str, mode: str = "explicit") -> Iterator[ShareConsumer]:
    consumer = ShareConsumer(
        {"bootstrap.servers": servers, "group.id": GROUP, "share.acknowledgement.mode": mode}
    )
    consumer.subscribe([TOPIC])
    try:
        yield consumer
    finally:
        consumer.close()


def _poll(consumer: ShareConsumer, timeout: float = 0.5) -> list[Any]:
    messages = list(consumer.poll(timeout))
    assert all(m.error() is None for m in messages), [m.error() for m in messages]
    return messages


def _poll_until_given(consumer: ShareConsumer) -> list[Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if messages := _poll(consumer):
            return messages
    raise AssertionError("the member was given no records")


def _delivery(message: Any) -> Delivery:
    return message.partition(), message.offset(), message.delivery_count()


def _commit(consumer: ShareConsumer) -> None:
    results = consumer.commit_sync(WAIT_S)
    assert all(error is None for error in results.values()), results


def _accept(consumer: ShareConsumer, messages: list[Any], accepted: list[int]) -> None:
    for message in messages:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        accepted.append(message.offset())
    _commit(consumer)


def _share_partition(brokers: list[Broker], partition: int = 0) -> SharePartition | None:
    """The group's SharePartition of one of the topic's partitions, on its leader."""
    for broker in brokers:
        if (found := broker.share_partitions.get(GROUP, TOPIC, partition)) is not None:
            return found
    return None


def _done_with(brokers: list[Broker], records: int) -> bool:
    """Every record of partition 0 acknowledged or archived: nothing in flight below
    ``records``."""
    share_partition = _share_partition(brokers)
    return share_partition is not None and (
        share_partition.start_offset == share_partition.end_offset == records
    )


@contextmanager
def _holder(servers: str) -> Iterator[tuple[subprocess.Popen[str], list[Delivery]]]:
    """A member in a child process holding the records it was given (yielded with them)."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, servers, GROUP, TOPIC],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], WAIT_S)
        line = child.stdout.readline() if ready else ""
        assert line, f"the holding member printed nothing (exit {child.poll()})"
        yield child, [tuple(d) for d in json.loads(line)]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(WAIT_S)


def _kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(WAIT_S) == -signal.SIGKILL


@pytest.mark.parametrize("size", [1, 3])
async def test_two_members_split_records_none_to_both_while_locked(size: int) -> None:
    async with running_cluster(size, **BROKER_CONFIGS) as brokers:
        await asyncio.to_thread(_split, bootstrap(brokers), size)


def _split(servers: str, size: int) -> None:
    _prepare(servers, size, 10)
    deliveries: list[Delivery] = []
    accepted: list[int] = []
    with _member(servers) as first, _member(servers) as second:
        held = _poll_until_given(first)  # held, not acknowledged
        _produce(servers, 10, 10)
        given = _poll_until_given(second)
        assert {m.offset() for m in held}.isdisjoint(m.offset() for m in given)
        deliveries += map(_delivery, held + given)
        _accept(second, given, accepted)
        _accept(first, held, accepted)
        deadline = time.monotonic() + WAIT_S
        while len(accepted) < 20 and time.monotonic() < deadline:
            for member in (first, second):
                messages = _poll(member, 0.2)
                deliveries += map(_delivery, messages)
                _accept(member, messages, accepted)
    assert sorted(accepted) == list(range(20))  # each acknowledged once, none lost
    assert {count for _, _, count in deliveries} == {1}  # never delivered twice


@pytest.mark.parametrize("size", [1, 3])
async def test_records_of_a_killed_member_go_to_another_after_their_lock(size: int) -> None:
    async with running_cluster(size, **BROKER_CONFIGS) as brokers:
        await asyncio.to_thread(_killed_member, bootstrap(brokers), size)
        await wait_until(lambda: _done_with(brokers, 30), message="every record acknowledged")


def _killed_member(servers: str, size: int) -> None:
    _prepare(servers, size, 30)
    with _holder(servers) as (child, held):
        assert {count for _, _, count in held} == {1}
        _kill(child)
    deliveries: list[Delivery] = []
    accepted: list[int] = []
    with _member(servers) as survivor:
        deadline = time.monotonic() + WAIT_S
        while len(accepted) < 30 and time.monotonic() < deadline:
            messages = _poll(survivor)
            deliveries += map(_delivery, messages)
            _accept(survivor, messages, accepted)
    assert sorted(accepted) == list(range(30))
    held_offsets = {offset for _, offset, _ in held}
    assert {(o, c) for _, o, c in deliveries if o in held_offsets} == {(o, 2) for o in held_offsets}
    assert {c for _, o, c in deliveries if o not in held_offsets} <= {1}


async def test_accept_release_reject_and_a_record_released_at_the_limit_is_archived() -> None:
    async with running_cluster(1, **BROKER_CONFIGS) as brokers:
        servers = bootstrap(brokers)
        deliveries = await asyncio.to_thread(_acknowledge_each_way, servers)
        await wait_until(lambda: _done_with(brokers, 6), message="every record done with")
        # Offset 0 rejected at once, offset 1 released at each of its two deliveries:
        # both archived, never delivered again.
        assert await asyncio.to_thread(_poll_once_more, servers) == []
    assert sorted(deliveries) == sorted(
        [(0, 0, 1), (0, 1, 1), (0, 1, 2), (0, 2, 1), (0, 3, 1), (0, 4, 1), (0, 5, 1)]
    )


def _acknowledge_each_way(servers: str) -> list[Delivery]:
    _prepare(servers, 1, 6)
    deliveries: list[Delivery] = []
    with _member(servers) as consumer:
        deadline = time.monotonic() + WAIT_S
        while len(deliveries) < 7 and time.monotonic() < deadline:
            for message in _poll(consumer):
                deliveries.append(_delivery(message))
                if message.offset() == 0:
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                elif message.offset() == 1:
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                else:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            _commit(consumer)
    return deliveries


def _poll_once_more(servers: str) -> list[Delivery]:
    with _member(servers) as consumer:
        return [_delivery(m) for m in _poll(consumer, 2.0)]


async def test_a_record_never_acknowledged_is_archived_at_the_limit() -> None:
    async with running_cluster(1, **BROKER_CONFIGS) as brokers:
        servers = bootstrap(brokers)
        counts = await asyncio.to_thread(_held_until_archived, servers)
        assert counts == [{1}, {2}]
        await wait_until(lambda: _done_with(brokers, 5), message="the records archived")
        assert await asyncio.to_thread(_poll_once_more, servers) == []


def _held_until_archived(servers: str) -> list[set[int]]:
    """Two members in turn, each given every record, each killed holding them: the delivery
    counts each saw."""
    _prepare(servers, 1, 5)
    counts = []
    for _ in range(DELIVERY_LIMIT):
        with _holder(servers) as (child, held):
            assert sorted(o for _, o, _ in held) == list(range(5))
            counts.append({c for _, _, c in held})
            _kill(child)
    return counts


@pytest.mark.parametrize("size", [1, 3])
async def test_implicit_acknowledgement_accepts_what_was_polled(size: int) -> None:
    async with running_cluster(size, **BROKER_CONFIGS) as brokers:
        deliveries = await asyncio.to_thread(_implicit, bootstrap(brokers), size)
        await wait_until(
            lambda: all(
                (found := _share_partition(brokers, partition)) is not None
                and found.start_offset == found.end_offset == 10
                for partition in range(3)
            ),
            message="every partition's records acknowledged",
        )
    assert sorted(deliveries) == [(p, o, 1) for p in range(3) for o in range(10)]


def _implicit(servers: str, size: int) -> list[Delivery]:
    """One member in implicit mode polls all 30 records: the next poll, or a commit after
    the last, accepts them (a close alone would release the last poll's records, in
    librdkafka as in Kafka's Java client)."""
    _prepare(servers, size, 30, partitions=3)
    deliveries: list[Delivery] = []
    with _member(servers, "implicit") as consumer:
        deadline = time.monotonic() + WAIT_S
        while len(deliveries) < 30 and time.monotonic() < deadline:
            deliveries += map(_delivery, _poll(consumer))
        _commit(consumer)
    return deliveries


async def test_a_member_closing_releases_what_it_holds_before_the_lock_expires() -> None:
    async with running_cluster(1, **BROKER_CONFIGS) as brokers:
        servers = bootstrap(brokers)
        held = await asyncio.to_thread(_close_holding, servers)
        # The group locks records for a minute: only the session's close releases them.
        share_partition = _share_partition(brokers)
        assert share_partition is not None and share_partition.lock_duration_ms == 60000
        await wait_until(lambda: share_partition.acquired_count == 0, timeout=20)
        again = await asyncio.to_thread(_take_all, servers, 10)
    assert {o for _, o, _ in held} <= set(range(10)) and held
    assert sorted(again) == sorted(
        (0, o, 2 if o in {o for _, o, _ in held} else 1) for o in range(10)
    )


def _close_holding(servers: str) -> list[Delivery]:
    _prepare(servers, 1, 10, share_record_lock_duration_ms="60000")
    with _member(servers) as consumer:
        return [_delivery(m) for m in _poll_until_given(consumer)]  # never acknowledged


def _take_all(servers: str, records: int) -> list[Delivery]:
    deliveries: list[Delivery] = []
    accepted: list[int] = []
    with _member(servers) as consumer:
        deadline = time.monotonic() + WAIT_S
        while len(accepted) < records and time.monotonic() < deadline:
            messages = _poll(consumer)
            deliveries += map(_delivery, messages)
            _accept(consumer, messages, accepted)
    assert sorted(accepted) == list(range(records))
    return deliveries


async def test_three_members_and_a_killed_one_account_for_every_record_once() -> None:
    """Three members, each in its own thread, on three brokers and three partitions: each
    releases some records at their first delivery and rejects some, accepts the rest; a
    fourth, in a child process, is killed holding records. Every record ends accepted or
    rejected exactly once, none delivered beyond the limit, none left in flight."""
    async with running_cluster(3, **BROKER_CONFIGS) as brokers:
        servers = bootstrap(brokers)
        await asyncio.to_thread(_prepare, servers, 3, 300, 3)
        held = await asyncio.to_thread(_hold_and_die, servers)
        outcome = _Outcome()
        await asyncio.gather(*(asyncio.to_thread(_busy_member, servers, outcome) for _ in range(3)))
        await wait_until(
            lambda: all(
                (found := _share_partition(brokers, partition)) is not None
                and found.start_offset == found.end_offset == 100
                for partition in range(3)
            ),
            message="every record done with",
        )
    everything = {(p, o) for p in range(3) for o in range(100)}
    done = outcome.accepted + outcome.rejected
    assert len(done) == len(set(done)) and set(done) == everything
    assert set(outcome.rejected) == {r for r in everything if _rejects(r)}
    counts = outcome.deliveries
    assert max(c for _, _, c in counts) <= DELIVERY_LIMIT
    for partition, offset, _ in held:
        assert (partition, offset, 2) in counts  # redelivered after the kill
    released = {(p, o) for p, o, c in counts if c == 1 and _releases(p, o) and not _rejects((p, o))}
    assert {(p, o) for p, o, c in counts if c == 2} == released | {(p, o) for p, o, _ in held}


class _Outcome:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted: list[tuple[int, int]] = []
        self.rejected: list[tuple[int, int]] = []
        self.deliveries: list[Delivery] = []

    def finished(self, records: int) -> bool:
        with self.lock:
            return len(self.accepted) + len(self.rejected) >= records


def _releases(partition: int, offset: int) -> bool:
    return (partition * 100 + offset) % 5 == 0


def _rejects(record: tuple[int, int]) -> bool:
    return (record[0] * 100 + record[1]) % 7 == 0


def _hold_and_die(servers: str) -> list[Delivery]:
    with _holder(servers) as (child, held):
        _kill(child)
    return held


def _busy_member(servers: str, outcome: _Outcome) -> None:
    with _member(servers) as consumer:
        deadline = time.monotonic() + WAIT_S
        while not outcome.finished(300) and time.monotonic() < deadline:
            messages = _poll(consumer, 0.2)
            for message in messages:
                record = (message.partition(), message.offset())
                count = message.delivery_count()
                with outcome.lock:
                    outcome.deliveries.append((*record, count))
                    if _rejects(record):
                        outcome.rejected.append(record)
                        ack = AcknowledgeType.REJECT
                    elif count == 1 and _releases(*record):
                        ack = AcknowledgeType.RELEASE
                    else:
                        outcome.accepted.append(record)
                        ack = AcknowledgeType.ACCEPT
                consumer.acknowledge(message, ack)
            if messages:
                _commit(consumer)


async def test_no_more_records_in_flight_than_the_partition_max_record_locks() -> None:
    configs = {**BROKER_CONFIGS, "group.share.partition.max.record.locks": "100"}
    async with running_cluster(1, **configs) as brokers:
        loop = asyncio.get_running_loop()

        async def acquired() -> int:
            share_partition = _share_partition(brokers)
            return -1 if share_partition is None else share_partition.acquired_count

        def acquired_now() -> int:  # read on the brokers' loop, from the test's thread
            return asyncio.run_coroutine_threadsafe(acquired(), loop).result(WAIT_S)

        await asyncio.to_thread(_window_full, bootstrap(brokers), acquired_now)


def _window_full(servers: str, acquired_now: Callable[[], int]) -> None:
    _prepare(servers, 1, 250, share_record_lock_duration_ms="60000")
    with _member(servers) as first, _member(servers) as second:
        held = _poll_until_given(first)
        assert sorted(m.offset() for m in held) == list(range(100))
        assert acquired_now() == 100
        # The window is full until the first member acknowledges: nothing for the second.
        assert _poll(second, 1.0) == []
        accepted: list[int] = []
        _accept(first, held, accepted)
        given = _poll_until_given(second)
        assert sorted(m.offset() for m in given) == list(range(100, 200))
        _accept(second, given, accepted)


async def test_by_default_a_group_starts_at_the_end_of_the_log() -> None:
    """share.auto.offset.reset's default, latest: the records written before the group's
    first fetch of a partition are not delivered, those after are."""
    async with running_cluster(1, **BROKER_CONFIGS) as brokers:
        loop = asyncio.get_running_loop()

        async def started() -> int | None:
            share_partition = _share_partition(brokers)
            return None if share_partition is None else share_partition.start_offset

        def start_offset() -> int | None:  # read on the brokers' loop, from the test's thread
            return asyncio.run_coroutine_threadsafe(started(), loop).result(WAIT_S)

        given = await asyncio.to_thread(_from_latest, bootstrap(brokers), start_offset)
    assert given == [(0, offset, 1) for offset in range(5, 10)]


def _from_latest(servers: str, start_offset: Callable[[], int | None]) -> list[Delivery]:
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(WAIT_S)
    _produce(servers, 0, 5)
    with _member(servers) as consumer:
        deadline = time.monotonic() + WAIT_S
        while start_offset() is None:
            assert time.monotonic() < deadline, "the member never fetched"
            assert _poll(consumer, 0.2) == []
        assert start_offset() == 5
        _produce(servers, 5, 5)
        given: list[Any] = []
        accepted: list[int] = []
        while len(given) < 5 and time.monotonic() < deadline:
            messages = _poll(consumer)
            given += messages
            _accept(consumer, messages, accepted)
        return sorted(map(_delivery, given))
