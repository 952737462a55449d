"""ElectLeaders (43) on the Kafka listener, through confluent-kafka's and kafka-python's
AdminClient against 3 in-process brokers: a preferred election brings leadership back to
the first replica, an unclean one leads a partition whose in-sync replicas are all gone
with a live out-of-sync replica (losing what only they held), and the errors Kafka
answers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.ops.faults import parse_spec
from purgatory.broker.server import Broker, start_broker
from purgatory.protocol.api import ApiKey
from tests.differential.harness import body
from tests.integration.test_cli_tools import cli
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FAST = {
    "auto.leader.rebalance.enable": False,
    "broker.heartbeat.interval.ms": 50,
    "broker.session.timeout.ms": 1000,
    "replica.lag.time.max.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
}


@pytest.fixture
async def three() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **FAST) as brokers:
        yield brokers


def state(brokers: list[Broker], topic: str, partition: int = 0) -> Any:
    return brokers[0].metadata.partition(topic, partition)


def everywhere(brokers: list[Broker], topic: str, check: Any) -> bool:
    """``check`` holds of ``topic``-0 on every broker, and they agree."""
    states = [b.metadata.partition(topic, 0) for b in brokers]
    return states[0] is not None and all(s == states[0] for s in states) and check(states[0])


def create(brokers: list[Broker], topic: str, assignment: list[int] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    new = (
        NewTopic(topic, num_partitions=1, replica_assignment=[assignment])
        if assignment
        else NewTopic(topic, num_partitions=1, replication_factor=3)
    )
    admin.create_topics([new])[topic].result(15)


def elect(brokers: list[Broker], kind: Any, partitions: list[tuple[str, int]] | None) -> dict:
    """confluent-kafka's elect_leaders: (topic, partition) -> error name or None."""
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    asked = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    done = admin.elect_leaders(kind, asked).result(30)
    return {(tp.topic, tp.partition): (e.name() if e else None) for tp, e in done.items()}


def produce(brokers: list[Broker], topic: str, *values: bytes) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all"})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(20) == 0


def consume_all(brokers: list[Broker], topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap(brokers), "group.id": f"read-{time.monotonic_ns()}"}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


async def restart(brokers: list[Broker], broker_id: int) -> None:
    """Stop a broker and start it again, its replicas lost (logs are in memory)."""
    index = next(i for i, b in enumerate(brokers) if b.broker_id == broker_id)
    config = brokers[index].config
    await brokers[index].stop()
    brokers[index] = await start_broker(config)


async def test_a_preferred_election_brings_leadership_back_to_the_first_replica(
    three: list[Broker],
) -> None:
    await asyncio.to_thread(create, three, "pref")
    await wait_until(lambda: everywhere(three, "pref", lambda s: len(s.isr) == 3), message="isr")
    preferred = state(three, "pref").replicas[0]
    await asyncio.to_thread(produce, three, "pref", b"one")
    await restart(three, preferred)  # leadership moves away; it comes back empty
    await wait_until(
        lambda: everywhere(three, "pref", lambda s: s.leader_id not in (-1, preferred)),
        message="a new leader",
    )
    await wait_until(
        lambda: everywhere(three, "pref", lambda s: preferred in s.isr),
        timeout=20,
        message="the preferred replica back in the ISR",
    )
    before = state(three, "pref").leader_epoch
    answer = await asyncio.to_thread(elect, three, ElectionType.PREFERRED, [("pref", 0)])
    assert answer == {("pref", 0): None}
    after = state(three, "pref")  # the brokers hold it once answered
    assert (after.leader_id, after.leader_epoch) == (preferred, before + 1)
    again = await asyncio.to_thread(elect, three, ElectionType.PREFERRED, [("pref", 0)])
    assert again == {("pref", 0): "ELECTION_NOT_NEEDED"}
    # Every partition: those that need no election are left out, as Kafka does.
    assert await asyncio.to_thread(elect, three, ElectionType.PREFERRED, None) == {}
    await asyncio.to_thread(produce, three, "pref", b"two")
    assert await asyncio.to_thread(consume_all, three, "pref", 2) == [b"one", b"two"]


async def test_an_unclean_election_leads_with_a_live_out_of_sync_replica(
    three: list[Broker],
) -> None:
    """Replicas x, y (neither the quorum's leader): y is cut off from x and leaves the
    ISR, x takes a record alone and stops. The partition has no leader (its ISR, x, is
    gone); an unclean election makes y lead, and the record only x held is lost."""
    controller = next(b.broker_id for b in three if b.controller and b.controller.active)
    x, y = (b.broker_id for b in three if b.broker_id != controller)
    await asyncio.to_thread(create, three, "u", [x, y])
    await wait_until(lambda: everywhere(three, "u", lambda s: s.isr == [x, y]), message="isr")
    await asyncio.to_thread(produce, three, "u", b"kept")
    await wait_until(
        lambda: all(
            b.replica_manager.partitions[("u", 0)].log.log_end_offset == 1
            for b in three
            if b.broker_id in (x, y)
        ),
        message="both replicas hold the first record",
    )
    broker_y = next(b for b in three if b.broker_id == y)
    broker_y.faults.add(parse_spec({"name": "cut", "kind": "partition", "peers": [x]}))
    await wait_until(lambda: everywhere(three, "u", lambda s: s.isr == [x]), message="y out")
    await asyncio.to_thread(produce, three, "u", b"lost")
    answer = await asyncio.to_thread(elect, three, ElectionType.UNCLEAN, [("u", 0)])
    assert answer == {("u", 0): "ELECTION_NOT_NEEDED"}  # it has a leader
    broker_x = next(b for b in three if b.broker_id == x)
    await broker_x.stop()
    three.remove(broker_x)
    broker_y.faults.remove("cut")
    await wait_until(
        lambda: everywhere(three, "u", lambda s: (s.leader_id, s.isr) == (-1, [x])),
        message="the partition offline",
    )
    answer = await asyncio.to_thread(elect, three, ElectionType.PREFERRED, [("u", 0)])
    assert answer == {("u", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}
    answer = await asyncio.to_thread(elect, three, ElectionType.UNCLEAN, [("u", 0)])
    assert answer == {("u", 0): None}
    assert (state(three, "u").leader_id, state(three, "u").isr) == (y, [y])
    await asyncio.to_thread(produce, three, "u", b"after")
    assert await asyncio.to_thread(consume_all, three, "u", 2) == [b"kept", b"after"]


async def test_elections_of_unknown_partitions_and_unavailable_leaders_fail_as_in_kafka(
    three: list[Broker],
) -> None:
    lonely = three[2].broker_id
    await asyncio.to_thread(create, three, "one", [lonely])
    await wait_until(lambda: everywhere(three, "one", lambda s: s.leader_id == lonely), message="")
    await three[2].stop()
    del three[2]
    await wait_until(lambda: everywhere(three, "one", lambda s: s.leader_id == -1), message="")
    answer = await asyncio.to_thread(
        elect, three, ElectionType.UNCLEAN, [("one", 0), ("one", 5), ("nope", 0)]
    )
    assert answer == {
        ("one", 0): "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        ("one", 5): "UNKNOWN_TOPIC_OR_PART",  # librdkafka's name
        ("nope", 0): "UNKNOWN_TOPIC_OR_PART",
    }
    # Every partition: the offline one is listed, with its error.
    every = await asyncio.to_thread(elect, three, ElectionType.UNCLEAN, None)
    assert every == {("one", 0): "ELIGIBLE_LEADERS_NOT_AVAILABLE"}


async def test_the_wire_answer_carries_kafka_s_messages_and_refuses_an_unknown_type(
    three: list[Broker],
) -> None:
    wire = await KafkaWire.open(three[1].port)
    try:

        async def ask(version: int, **values: Any) -> Any:
            return await wire.call(
                ApiKey.ELECT_LEADERS,
                version,
                body(ApiKey.ELECT_LEADERS, version, timeout=5000, **values),
            )

        named = [{"topic": "nope", "partitions": [0]}]
        answer = await ask(2, election_type=7, topic_partitions=named)
        assert answer.error_code.value == 42  # INVALID_REQUEST
        [p] = answer.replica_election_results[0].partition_result
        assert (p.error_code.value, p.error_message) == (42, "Unknown election type 7")
        for version in (0, 1, 2):
            values = {} if version == 0 else {"election_type": 0}
            answer = await ask(version, topic_partitions=named, **values)
            [p] = answer.replica_election_results[0].partition_result
            assert (p.error_code.value, p.error_message) == (3, "No such topic as nope")
    finally:
        await wire.close()


async def test_kafka_python_elects_the_preferred_leader(three: list[Broker]) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    await asyncio.to_thread(create, three, "kp")
    await wait_until(lambda: everywhere(three, "kp", lambda s: len(s.isr) == 3), message="isr")

    def elect_with_kafka_python() -> Any:
        admin = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap(three))
        try:
            return admin.elect_leaders(0, {"kp": [0]}, raise_errors=False)
        finally:
            admin.close()

    answer = await asyncio.to_thread(elect_with_kafka_python)
    assert "84" in repr(answer) or "ELECTION_NOT_NEEDED" in repr(answer), answer


# -- purgatory leader-election -----------------------------------------------------------------


async def test_the_cli_elects_with_kafka_s_options_and_output(
    three: list[Broker], tmp_path: Path
) -> None:
    await asyncio.to_thread(create, three, "c")
    await wait_until(lambda: everywhere(three, "c", lambda s: len(s.isr) == 3), message="isr")
    preferred = state(three, "c").replicas[0]
    await restart(three, preferred)
    await wait_until(
        lambda: everywhere(three, "c", lambda s: s.leader_id != preferred and preferred in s.isr),
        timeout=20,
        message="leadership away, the preferred replica back in the ISR",
    )
    asked = tmp_path / "election.json"
    asked.write_text(
        json.dumps(
            {"partitions": [{"topic": "c", "partition": 0}, {"topic": "nope", "partition": 0}]}
        )
    )
    where = ("--bootstrap-server", bootstrap(three))
    code, out, err = await cli(
        "leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(asked), *where
    )
    assert code == 1 and "Traceback" not in err
    assert out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions c-0",
        "Error completing leader election (PREFERRED) for partition: nope-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as nope",
    ]
    assert "1 replica(s) could not be elected" in err
    assert state(three, "c").leader_id == preferred
    code, out, err = await cli(
        "leader-election",
        "--election-type",
        "preferred",
        "--topic",
        "c",
        "--partition",
        "0",
        *where,
    )
    assert (code, out) == (0, "Valid replica already elected for partitions c-0\n"), err
    code, out, err = await cli(
        "leader-election", "--election-type", "unclean", "--all-topic-partitions", "--json", *where
    )
    assert (code, json.loads(out)) == (0, []), err  # nothing needs an election


async def test_the_cli_says_what_is_wrong_with_its_options_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}'
    )
    cases = {
        ("--topic", "t"): "Missing required option(s): --partition",
        ("--topic", "t", "--partition", "0", "--all-topic-partitions"): "One and only one of",
        ("--partition", "0"): "One and only one of the following options is required",
        ("--partition", "0", "--all-topic-partitions"): "Option --partition is only allowed if",
        ("--path-to-json-file", str(bad)): "Replica election data contains duplicate partitions",
        ("--path-to-json-file", str(tmp_path / "none")): "No such file",
    }
    for argv, says in cases.items():
        code, _, err = await cli("leader-election", "--election-type", "preferred", *argv)
        assert code == 1 and says in err and "Traceback" not in err, (argv, err)
    code, _, err = await cli("leader-election", "--election-type", "fair", "--all-topic-partitions")
    assert code == 1 and "PREFERRED or UNCLEAN" in err
