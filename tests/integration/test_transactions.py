"""Transactions from real Kafka clients against three in-process brokers: commits and
aborts as read_committed and read_uncommitted consumers see them, offsets sent to a
transaction, a zombie fenced by a new producer of its transactional id, a transaction
left open past its timeout, and the coordinator's broker stopped mid-transaction."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from purgatory.broker.controller.internal_topics import TRANSACTION_STATE_TOPIC
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.broker.server import Broker
from purgatory.clients import Consumer as OurConsumer
from tests.integration.test_console_producer import cli
from tests.integration.test_kafka_clients import create, in_thread
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
TOPIC = "txn"
TXN_PARTITIONS = 3  # of __transaction_state, so a test can find an id's coordinator


@pytest.fixture
async def brokers() -> AsyncIterator[list[Broker]]:
    async with running_cluster(
        3,
        **{
            "default.replication.factor": 3,
            "min.insync.replicas": 2,
            "transaction.state.log.num.partitions": TXN_PARTITIONS,
            "offsets.topic.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
        },
    ) as b:
        await create(b, TOPIC, 1)
        yield b


def producer(servers: str, transactional_id: str, **config: Any) -> Producer:
    p = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id, **config})
    p.init_transactions(30)
    return p


def read_all(servers: str, isolation: str, topic: str = TOPIC, expect: int = 0) -> list[bytes]:
    """Every record of the topic's partition 0 a consumer of ``isolation`` is given, read
    until its position reaches the partition's end as that isolation sees it."""
    c = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and len(values) >= expect:  # _PARTITION_EOF
                    return values
                continue
            values.append(m.value())
        raise AssertionError(f"no end of partition within 20 s; read {values}")
    finally:
        c.close()


def commit_ten_abort_five(servers: str) -> None:
    p = producer(servers, "committer")
    p.begin_transaction()
    for i in range(10):
        p.produce(TOPIC, value=b"committed-%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(TOPIC, value=b"aborted-%d" % i)
    p.flush(30)  # sent: the abort must hide records the log holds
    p.abort_transaction(30)


async def test_read_committed_sees_the_committed_records_and_read_uncommitted_all(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(commit_ten_abort_five, servers)
    committed = await in_thread(read_all, servers, "read_committed", TOPIC, 10)
    assert committed == [b"committed-%d" % i for i in range(10)]
    everything = await in_thread(read_all, servers, "read_uncommitted", TOPIC, 15)
    assert everything == committed + [b"aborted-%d" % i for i in range(5)]
    leader = next(b for b in brokers if b.replica_manager.partitions[(TOPIC, 0)].is_leader)
    partition = leader.replica_manager.partitions[(TOPIC, 0)]
    assert partition.log.log_end_offset == partition.last_stable_offset == 17  # 2 markers
    coordinator = next(
        b for b in brokers if "committer" in b.transaction_coordinator.state.transactions
    )
    await wait_until(
        lambda: coordinator.transaction_coordinator.ended == {"commit": 1, "abort": 1},
        message="both transactions completed",
    )
    completions = coordinator.transaction_coordinator.completion
    assert sum(completions["commit"].counts) == sum(completions["abort"].counts) == 1


def send_offsets(servers: str, group: str, commit: bool) -> dict[str, Any]:
    """Consume 3 records in ``group`` and send their offsets to a transaction that then
    commits or aborts; returns the group's committed offset before and after."""
    c = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    p = producer(servers, f"offsets-{group}")
    try:
        c.subscribe([TOPIC])
        read = []
        deadline = time.monotonic() + 20
        while len(read) < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                read.append(m)
        assert len(read) == 3, read
        before = c.committed([TopicPartition(TOPIC, 0)], 10)[0].offset
        p.begin_transaction()
        p.produce(TOPIC, value=b"derived")
        position = [TopicPartition(TOPIC, 0, read[-1].offset() + 1)]
        p.send_offsets_to_transaction(position, c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        after = c.committed([TopicPartition(TOPIC, 0)], 10)[0].offset
        return {"before": before, "after": after, "next": read[-1].offset() + 1}
    finally:
        c.close()


async def test_offsets_sent_to_a_transaction_are_committed_only_if_it_commits(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(commit_ten_abort_five, servers)
    aborted = await in_thread(send_offsets, servers, "g-abort", False)
    assert aborted["before"] < 0 and aborted["after"] < 0  # nothing committed
    committed = await in_thread(send_offsets, servers, "g-commit", True)
    assert committed["before"] < 0 and committed["after"] == committed["next"] == 3


def fence(servers: str) -> str:
    zombie = producer(servers, "fenced")
    zombie.begin_transaction()
    zombie.produce(TOPIC, value=b"zombie")
    zombie.flush(30)
    successor = producer(servers, "fenced")  # aborts the zombie's transaction first
    successor.begin_transaction()
    successor.produce(TOPIC, value=b"successor")
    successor.commit_transaction(30)
    try:
        zombie.commit_transaction(30)
    except KafkaException as exc:
        error = exc.args[0]
        assert error.fatal(), error
        return error.name()
    raise AssertionError("the zombie committed")


async def test_a_second_producer_of_the_id_fences_the_first(brokers: list[Broker]) -> None:
    servers = bootstrap(brokers)
    assert await in_thread(fence, servers) in (
        "_FENCED",
        "PRODUCER_FENCED",
        "INVALID_PRODUCER_EPOCH",
    )
    assert await in_thread(read_all, servers, "read_committed", TOPIC, 1) == [b"successor"]
    assert await in_thread(read_all, servers, "read_uncommitted", TOPIC, 2) == [
        b"zombie",
        b"successor",
    ]


def abandon(servers: str) -> Producer:
    p = producer(servers, "abandoned", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(TOPIC, value=b"never")
    p.flush(30)
    return p


async def test_a_transaction_open_past_its_timeout_is_aborted(brokers: list[Broker]) -> None:
    servers = bootstrap(brokers)
    abandoned = await in_thread(abandon, servers)
    leader = next(b for b in brokers if b.replica_manager.partitions[(TOPIC, 0)].is_leader)
    partition = leader.replica_manager.partitions[(TOPIC, 0)]
    assert partition.last_stable_offset == 0  # held by the open transaction
    await wait_until(
        lambda: partition.last_stable_offset == partition.high_watermark == 2,
        timeout=15,
        message="the coordinator aborts the transaction (its marker at offset 1)",
    )
    assert await in_thread(read_all, servers, "read_committed") == []

    def late_commit() -> str:
        try:
            abandoned.commit_transaction(10)
        except KafkaException as exc:
            return str(exc.args[0].name())
        return "committed"

    assert await in_thread(late_commit) != "committed"


async def test_the_coordinators_broker_stopping_mid_transaction_leaves_no_half_transaction(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    index = partition_for("survivor", TXN_PARTITIONS)

    def coordinator() -> Broker:
        return next(
            b
            for b in brokers
            if (TRANSACTION_STATE_TOPIC, index) in b.replica_manager.partitions
            and b.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, index)].is_leader
        )

    def begin() -> Producer:
        p = producer(servers, "survivor", **{"transaction.timeout.ms": 3000})
        p.begin_transaction()
        for i in range(3):
            p.produce(TOPIC, value=b"open-%d" % i)
        p.flush(30)
        return p

    await in_thread(begin)
    stopped = coordinator()
    await stopped.stop()
    survivors = [b for b in brokers if b is not stopped]
    await wait_until(
        lambda: any(
            (TRANSACTION_STATE_TOPIC, index) in b.replica_manager.partitions
            and b.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, index)].is_leader
            and "survivor" in b.transaction_coordinator.state.transactions
            for b in survivors
        ),
        timeout=15,
        message="a new coordinator loads the transaction",
    )
    servers = bootstrap(survivors)
    # The new coordinator times the open transaction out and aborts it; the partition
    # becomes stable with none of its records visible.
    assert await in_thread(read_all, servers, "read_committed") == []
    leader = next(b for b in survivors if b.replica_manager.partitions[(TOPIC, 0)].is_leader)
    partition = leader.replica_manager.partitions[(TOPIC, 0)]
    await wait_until(
        lambda: partition.last_stable_offset == partition.high_watermark,
        timeout=15,
        message="the open transaction ends",
    )
    assert await in_thread(read_all, servers, "read_uncommitted", TOPIC, 3) == [
        b"open-%d" % i for i in range(3)
    ]


async def our_consumer_reads(brokers: list[Broker], isolation: str, expect: int) -> list[bytes]:
    async with OurConsumer(
        bootstrap(brokers), auto_offset_reset="earliest", isolation_level=isolation
    ) as consumer:
        await consumer.assign_topics([TOPIC])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < expect and time.monotonic() < deadline:
            values += [r.value or b"" for r in await consumer.poll(timeout_ms=100)]
        values += [r.value or b"" for r in await consumer.poll(timeout_ms=200)]  # nothing more
        return values


async def test_our_consumer_and_cli_read_committed_too(brokers: list[Broker]) -> None:
    await in_thread(commit_ten_abort_five, bootstrap(brokers))
    committed = [b"committed-%d" % i for i in range(10)]
    assert await our_consumer_reads(brokers, "read_committed", 10) == committed
    aborted = [b"aborted-%d" % i for i in range(5)]
    assert await our_consumer_reads(brokers, "read_uncommitted", 15) == committed + aborted
    code, out, err = await cli(
        "consume", TOPIC, "--from-beginning", "--isolation-level", "read_committed",
        "--max-records", "10", "--bootstrap", bootstrap(brokers),
    )  # fmt: skip
    assert code == 0, err
    assert out.split() == [v.decode() for v in committed]
    # Kafka's consumer property name works too; a wrong value is refused clearly.
    code, _, err = await cli(
        "consume", TOPIC, "--from-beginning", "--consumer-property", "isolation.level=serial",
        "--max-records", "1", "--bootstrap", bootstrap(brokers),
    )  # fmt: skip
    assert code != 0 and "isolation.level must be" in err and "Traceback" not in err


async def test_our_consumers_position_passes_a_trailing_marker(brokers: list[Broker]) -> None:
    """A partition ending in an abort marker: once every record is read, the position is
    the log end (what a commit stores and lag is counted from), as in Kafka's consumer."""
    await in_thread(commit_ten_abort_five, bootstrap(brokers))
    async with OurConsumer(bootstrap(brokers), auto_offset_reset="earliest") as consumer:
        await consumer.assign_topics([TOPIC])

        async def at_the_end() -> bool:
            await consumer.poll(timeout_ms=50)
            return consumer.position((TOPIC, 0)) == 17

        await wait_until(at_the_end, message="the position past the last marker")
