"""Our producer is idempotent with acks=all (as Kafka's is by default): a batch retried
after its answer was lost is acknowledged with its first offset, never written twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from purgatory.broker.server import Broker
from purgatory.clients import Consumer, Producer
from purgatory.protocol import kafka_records
from purgatory.protocol.errors import KafkaError
from purgatory.protocol.records import is_kafka_batch
from tests.integration.test_dynamic_config import call
from tests.support import bootstrap, running_cluster, wait_until


@pytest.fixture
async def pair() -> AsyncIterator[list[Broker]]:
    settings = {"default.replication.factor": 2, "min.insync.replicas": 2}
    async with running_cluster(2, **settings) as brokers:
        yield brokers


def leader_of(brokers: list[Broker], topic: str) -> Broker:
    return next(b for b in brokers if b.replica_manager.partitions[(topic, 0)].is_leader)


async def values_in(brokers: list[Broker], topic: str) -> list[bytes | None]:
    async with Consumer(bootstrap(brokers), auto_offset_reset="earliest") as consumer:
        await consumer.assign_topics([topic])
        await consumer.seek_to_beginning()
        got: list[bytes | None] = []
        while batch := await consumer.poll(timeout_ms=300):
            got.extend(r.value for r in batch)
    return got


async def produce_with_lost_answers(brokers: list[Broker], topic: str, idempotent: bool) -> None:
    """acks=all while the follower's fetches reach the leader 1.2 s late: the first
    request's append waits for the follower past the producer's 300 ms request timeout, so
    the producer retries a batch the leader already has (maybe several times)."""
    leader = leader_of(brokers, topic)
    follower = next(b for b in brokers if b is not leader)
    fault = {
        "name": "slow-follower",
        "kind": "latency",
        "delay_ms": 1200,
        "peers": [follower.broker_id],
        "duration_ms": 2500,
    }
    status, body = await call(leader, "POST", "/v1/faults", fault)
    assert status in (200, 201), body
    async with Producer(
        bootstrap(brokers),
        acks="all",
        enable_idempotence=idempotent,
        request_timeout_ms=300,
        delivery_timeout_ms=20000,
        linger_ms=0,
    ) as producer:
        sent = await producer.send_and_wait(topic, b"once", partition=0)
        assert sent.offset >= 0
        await producer.send_and_wait(topic, b"after", partition=0)
    await wait_until(lambda: leader.faults.faults == {}, timeout=10, message="fault over")


async def test_a_retried_batch_of_the_idempotent_producer_is_written_once(
    pair: list[Broker],
) -> None:
    async with Producer(bootstrap(pair), acks="all") as producer:
        await producer.send_and_wait("idem", b"first", partition=0)  # topic and leader ready
        assert producer.transactions is not None  # on by default with acks=all
    await produce_with_lost_answers(pair, "idem", idempotent=True)
    assert await values_in(pair, "idem") == [b"first", b"once", b"after"]
    # The batches are Kafka's v2, numbered: producer id, epoch, sequences 0, 0, 1.
    leader = leader_of(pair, "idem")
    log = leader.replica_manager.partitions[("idem", 0)].log
    stored = [bytes(b) for s in log.segments for b in s.batches]
    assert all(is_kafka_batch(b) for b in stored)
    infos = [kafka_records.validate(b) for b in stored]
    assert [i.base_sequence for i in infos] == [0, 0, 1]
    assert infos[0].producer_id != infos[1].producer_id == infos[2].producer_id >= 0


async def test_without_idempotence_the_same_retry_writes_the_record_again(
    pair: list[Broker],
) -> None:
    async with Producer(bootstrap(pair), acks="all", enable_idempotence=False) as producer:
        await producer.send_and_wait("plain", b"first", partition=0)
    await produce_with_lost_answers(pair, "plain", idempotent=False)
    values = await values_in(pair, "plain")
    assert values.count(b"once") >= 2  # what the idempotent producer prevents
    assert values[-1] == b"after"


def test_idempotence_needs_acks_all() -> None:
    with pytest.raises(ValueError, match=r"enable\.idempotence needs acks=all"):
        Producer("127.0.0.1:1", acks=1, enable_idempotence=True)


async def test_a_batch_refused_for_its_sequence_is_reported_and_the_epoch_bumped(
    pair: list[Broker],
) -> None:
    async with Producer(bootstrap(pair), acks="all", linger_ms=0) as producer:
        await producer.send_and_wait("bump", b"first", partition=0)
        assert producer.transactions is not None
        epoch = producer.transactions.producer_epoch
        leader = leader_of(pair, "bump")
        fault = {
            "name": "seq",
            "kind": "error",
            "api": "Produce",
            "error_code": "OUT_OF_ORDER_SEQUENCE_NUMBER",
            "times": 1,
        }
        status, body = await call(leader, "POST", "/v1/faults", fault)
        assert status in (200, 201), body
        with pytest.raises(KafkaError, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
            await producer.send_and_wait("bump", b"refused", partition=0)
        after = await producer.send_and_wait("bump", b"next", partition=0)
        assert producer.transactions.producer_epoch == epoch + 1
    assert after.offset == 1
    assert await values_in(pair, "bump") == [b"first", b"next"]
