"""Transactions from kafka-python and aiokafka against three in-process brokers: a
transactional producer commits 10 records and aborts 5, and the client's own consumer sees
the 10 read_committed and all 15 read_uncommitted; consumed offsets sent to a transaction
are the group's only once it commits; a second producer of a transactional id fences the
first. (confluent-kafka's are in test_transactions.py, whose cluster this file shares.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from purgatory.broker.server import Broker
from tests.integration.test_kafka_clients import in_thread
from tests.integration.test_transactions import TOPIC, brokers
from tests.support import bootstrap, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
__all__ = ["brokers"]  # the fixture: test_transactions.py's cluster and its topic

COMMITTED = [b"committed-%d" % i for i in range(10)]
ABORTED = [b"aborted-%d" % i for i in range(5)]
CONSUMED = 3  # records a consume-transform-produce step reads before its transaction


async def settled(brokers: list[Broker]) -> None:
    """Wait until every transaction on the topic has ended: EndTxn is answered before the
    coordinator has its markers written (as in Kafka), and until then the last stable
    offset, where read_committed stops, is short of the high watermark."""
    leader = next(b for b in brokers if b.replica_manager.partitions[(TOPIC, 0)].is_leader)
    partition = leader.replica_manager.partitions[(TOPIC, 0)]
    await wait_until(
        lambda: partition.last_stable_offset == partition.high_watermark,
        message="the last stable offset at the high watermark",
    )


# -- kafka-python -------------------------------------------------------------------------------


def kafka_python_producer(servers: str, transactional_id: str) -> Any:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=servers, transactional_id=transactional_id, max_block_ms=30000
    )
    p.init_transactions()
    return p


def kafka_python_commit_ten_abort_five(servers: str) -> None:
    p = kafka_python_producer(servers, "kafka-python-committer")
    try:
        p.begin_transaction()
        for value in COMMITTED:
            p.send(TOPIC, value, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for value in ABORTED:
            p.send(TOPIC, value, partition=0)
        p.flush(timeout=30)  # sent: the abort must hide records the log holds
        p.abort_transaction()
    finally:
        p.close(timeout=10)


def kafka_python_read(servers: str, isolation: str) -> list[bytes]:
    """Every value of partition 0 a consumer of ``isolation`` is given, read until its
    position reaches the end it is shown (for read_committed, the last stable offset)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=servers, isolation_level=isolation, enable_auto_commit=False
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"read {values} of {end} offsets in 20 s"
            for records in c.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        return values
    finally:
        c.close()


async def test_kafka_python_read_committed_sees_only_the_committed_transaction(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(kafka_python_commit_ten_abort_five, servers)
    await settled(brokers)
    assert await in_thread(kafka_python_read, servers, "read_committed") == COMMITTED
    assert await in_thread(kafka_python_read, servers, "read_uncommitted") == COMMITTED + ABORTED


def kafka_python_send_offsets(servers: str, group: str, commit: bool) -> dict[str, Any]:
    """A group member reads CONSUMED records and sends its position to a transaction
    (with its group metadata, KIP-447) that then commits or aborts; the group's committed
    offset after it. (Not in it: a read_committed member asks for stable offsets, which
    the coordinator refuses, UNSTABLE_OFFSET_COMMIT, while the transaction is open.)"""
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    c = KafkaConsumer(
        TOPIC,
        bootstrap_servers=servers,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_poll_records=CONSUMED,
    )
    p = kafka_python_producer(servers, f"kafka-python-{group}")
    tp = TopicPartition(TOPIC, 0)
    try:
        read: list[Any] = []
        deadline = time.monotonic() + 20
        while len(read) < CONSUMED:
            assert time.monotonic() < deadline, f"read {len(read)} records in 20 s"
            for records in c.poll(timeout_ms=200, max_records=CONSUMED - len(read)).values():
                read.extend(records)
        p.begin_transaction()
        p.send(TOPIC, b"derived", partition=0)
        position = {tp: OffsetAndMetadata(read[-1].offset + 1, "", -1)}
        p.send_offsets_to_transaction(position, c.group_metadata())
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
        return {"after": c.committed(tp), "next": read[-1].offset + 1}
    finally:
        p.close(timeout=10)
        c.close()


async def test_kafka_python_offsets_sent_to_a_transaction_are_committed_only_if_it_commits(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await in_thread(kafka_python_commit_ten_abort_five, servers)
    aborted = await in_thread(kafka_python_send_offsets, servers, "kafka-python-abort", False)
    assert aborted == {"after": None, "next": CONSUMED}
    committed = await in_thread(kafka_python_send_offsets, servers, "kafka-python-commit", True)
    assert committed == {"after": CONSUMED, "next": CONSUMED}


def kafka_python_fence(servers: str) -> str:
    """A zombie's open transaction, a successor of its id committing; what the zombie's
    commit raises."""
    zombie = kafka_python_producer(servers, "kafka-python-fenced")
    successor = None
    try:
        zombie.begin_transaction()
        zombie.send(TOPIC, b"zombie", partition=0)
        zombie.flush(timeout=30)
        successor = kafka_python_producer(servers, "kafka-python-fenced")
        successor.begin_transaction()
        successor.send(TOPIC, b"successor", partition=0)
        successor.commit_transaction()
        try:
            zombie.commit_transaction()
        except Exception as exc:  # the test names the class
            return type(exc).__name__
        return "committed"
    finally:
        if successor is not None:
            successor.close(timeout=10)
        zombie.close(timeout=0)


async def test_kafka_python_a_second_producer_of_the_id_fences_the_first(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    assert await in_thread(kafka_python_fence, servers) == "ProducerFencedError"
    await settled(brokers)
    assert await in_thread(kafka_python_read, servers, "read_committed") == [b"successor"]
    assert await in_thread(kafka_python_read, servers, "read_uncommitted") == [
        b"zombie",
        b"successor",
    ]


# -- aiokafka -----------------------------------------------------------------------------------


async def aiokafka_producer(servers: str, transactional_id: str) -> Any:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=transactional_id)
    async with asyncio.timeout(30):
        await p.start()  # InitProducerId for the transactional id
    return p


async def aiokafka_commit_ten_abort_five(servers: str) -> None:
    p = await aiokafka_producer(servers, "aiokafka-committer")
    try:
        async with asyncio.timeout(30):
            async with p.transaction():
                for value in COMMITTED:
                    await p.send(TOPIC, value, partition=0)
            await p.begin_transaction()
            sent = [await p.send(TOPIC, value, partition=0) for value in ABORTED]
            await asyncio.gather(*sent)  # in the log: the abort must hide them
            await p.abort_transaction()
    finally:
        await p.stop()


async def aiokafka_read(servers: str, isolation: str) -> list[bytes]:
    """``kafka_python_read`` with aiokafka's consumer."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=servers, isolation_level=isolation, enable_auto_commit=False
    )
    await c.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        end = (await c.end_offsets([tp]))[tp]
        values: list[bytes] = []
        async with asyncio.timeout(20):
            while await c.position(tp) < end:
                for records in (await c.getmany(tp, timeout_ms=200)).values():
                    values.extend(r.value for r in records)
        return values
    finally:
        await c.stop()


async def test_aiokafka_read_committed_sees_only_the_committed_transaction(
    brokers: list[Broker],
) -> None:
    servers = bootstrap(brokers)
    await aiokafka_commit_ten_abort_five(servers)
    await settled(brokers)
    assert await aiokafka_read(servers, "read_committed") == COMMITTED
    assert await aiokafka_read(servers, "read_uncommitted") == COMMITTED + ABORTED


def pending_offsets(brokers: list[Broker], group: str) -> list[Any]:
    """The offsets of ``group`` pending in open transactions, on whichever broker holds it."""
    return [
        offsets
        for b in brokers
        if (held := b.group_coordinator.groups.get(group)) is not None
        for offsets in held.pending_txn_offsets.values()
    ]


async def aiokafka_send_offsets(brokers: list[Broker], group: str, commit: bool) -> dict[str, Any]:
    """``kafka_python_send_offsets`` with aiokafka, whose send_offsets_to_transaction takes
    the group's id (TxnOffsetCommit without member or generation). The group's committed
    offset in the transaction too: aiokafka does not ask for stable offsets, so it is
    answered at once, and the offset pending in the transaction is not yet the group's.
    After the transaction, the committed offset once the coordinator has its marker (EndTxn
    is answered before the markers are written, as in Kafka)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    servers = bootstrap(brokers)
    c = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=servers,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await c.start()
    p = await aiokafka_producer(servers, f"aiokafka-{group}")
    tp = TopicPartition(TOPIC, 0)
    try:
        async with asyncio.timeout(30):
            read: list[Any] = []
            while len(read) < CONSUMED:
                batches = await c.getmany(timeout_ms=200, max_records=CONSUMED - len(read))
                for records in batches.values():
                    read.extend(records)
            await p.begin_transaction()
            await p.send_and_wait(TOPIC, b"derived", partition=0)
            await p.send_offsets_to_transaction({tp: read[-1].offset + 1}, group)
            pending = pending_offsets(brokers, group)
            during = await c.committed(tp)
            if commit:
                await p.commit_transaction()
            else:
                await p.abort_transaction()
            await wait_until(
                lambda: not pending_offsets(brokers, group),
                message="the transaction's marker at the group's coordinator",
            )
            return {
                "pending": [{t[1]: o.offset for t, o in x.items()} for x in pending],
                "during": during,
                "after": await c.committed(tp),
                "next": read[-1].offset + 1,
            }
    finally:
        await p.stop()
        await c.stop()


async def test_aiokafka_offsets_sent_to_a_transaction_are_committed_only_if_it_commits(
    brokers: list[Broker],
) -> None:
    await aiokafka_commit_ten_abort_five(bootstrap(brokers))
    aborted = await aiokafka_send_offsets(brokers, "aiokafka-abort", False)
    assert aborted == {"pending": [{0: 3}], "during": None, "after": None, "next": CONSUMED}
    committed = await aiokafka_send_offsets(brokers, "aiokafka-commit", True)
    assert committed == {"pending": [{0: 3}], "during": None, "after": CONSUMED, "next": CONSUMED}


async def test_aiokafka_a_second_producer_of_the_id_fences_the_first(
    brokers: list[Broker],
) -> None:
    from aiokafka.errors import KafkaError

    servers = bootstrap(brokers)
    zombie = await aiokafka_producer(servers, "aiokafka-fenced")
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(TOPIC, b"zombie", partition=0)
        successor = await aiokafka_producer(servers, "aiokafka-fenced")
        try:
            async with asyncio.timeout(30), successor.transaction():
                await successor.send(TOPIC, b"successor", partition=0)
        finally:
            await successor.stop()
        async with asyncio.timeout(30):
            with pytest.raises(KafkaError) as fenced:
                await zombie.commit_transaction()
        # EndTxn v0 is answered INVALID_PRODUCER_EPOCH, which aiokafka raises as fenced.
        assert type(fenced.value).__name__ == "ProducerFenced"
    finally:
        await zombie.stop()
    await settled(brokers)
    assert await aiokafka_read(servers, "read_committed") == [b"successor"]
    assert await aiokafka_read(servers, "read_uncommitted") == [b"zombie", b"successor"]
