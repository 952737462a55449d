"""Share group state that outlives its partition leader (KIP-932's persister and share
coordinator), on the Kafka wire against in-process brokers: a ShareAcknowledge is answered
only once the share coordinator stored the state (and with the write's error when it could
not be); on three brokers, records a member accepted or rejected are not delivered again
after the data partition's leader (the state partition's leader too) stops, and the others
keep their delivery counts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import SHARE_GROUP_STATE_TOPIC
from purgatory.broker.coordinator.share.share_group_offset import SharePartitionKey
from purgatory.broker.server import Broker
from purgatory.broker.share.share_partition import SharePartitionState
from purgatory.clients.admin import AdminClient as OurAdminClient
from purgatory.protocol.errors import ErrorCode as E
from tests.integration.test_share_fetch import (
    ACCEPT,
    GROUP,
    REJECT,
    RELEASE,
    TOPIC,
    ShareMember,
    acquired,
    broker,
    members,
    partition_of,
    produce,
)
from tests.kafka_wire import KafkaWire
from tests.support import bootstrap, running_cluster, wait_until
from tests.unit.test_share_state import FakePersister

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def acknowledge_errors(response: Any) -> list[int]:
    assert response.error_code == 0, response
    return [p.error_code for t in response.responses for p in t.partitions]


async def fetch_until_acquired(member: ShareMember, **kwargs: Any) -> dict[int, int]:
    """ShareFetch (waiting up to a second each time) until records are acquired: a new
    leader first reads the state back from the share coordinator."""
    got: list[dict[int, int]] = []

    async def fetched() -> bool:
        response = await member.fetch(max_wait_ms=1000, **kwargs)
        if response.responses and partition_of(response).error_code != 0:
            return False  # the leader moving: asked again
        got.append(acquired(response))
        return bool(got[-1])

    await wait_until(fetched, timeout=30, message="records acquired")
    return got[-1]


async def test_an_acknowledgement_is_answered_once_stored_and_with_a_failed_writes_error() -> None:
    async with broker() as b, members(b, 2) as (m, other):
        persister = FakePersister()
        b.share_partitions.persister = persister  # the share coordinator, held by the test
        assert acquired(await m.fetch()) == {}
        await asyncio.to_thread(produce, b, [b"v%d" % i for i in range(4)])
        assert await fetch_until_acquired(m) == dict.fromkeys(range(4), 1)

        persister.hold_writes = True
        written = len(persister.written)
        answer = asyncio.ensure_future(m.acknowledge([(0, 1, [ACCEPT])]))
        await wait_until(lambda: len(persister.written) > written, message="the write")
        assert persister.written[-1].start_offset == 2
        # Another member's round trip completes meanwhile; the acknowledgement waits.
        assert partition_of(await other.fetch()).error_code == 0
        assert not answer.done()
        persister.answer_writes()
        assert acknowledge_errors(await answer) == [E.NONE]

        # A write that fails is the partition's error, on ShareAcknowledge and on ShareFetch.
        persister.hold_writes = False
        persister.write_code = E.COORDINATOR_NOT_AVAILABLE
        assert acknowledge_errors(await m.acknowledge([(2, 2, [ACCEPT])])) == [
            E.COORDINATOR_NOT_AVAILABLE
        ]
        piggybacked = await m.fetch(acks=[(3, 3, [ACCEPT])])
        assert partition_of(piggybacked).acknowledge_error_code == E.COORDINATOR_NOT_AVAILABLE
        # A fenced write: this broker's SharePartition goes (a newer leader has the group).
        persister.write_code = E.FENCED_LEADER_EPOCH
        await asyncio.to_thread(produce, b, [b"late"])
        assert await fetch_until_acquired(m) == {4: 1}
        fenced = await m.acknowledge([(4, 4, [ACCEPT])])
        assert acknowledge_errors(fenced) == [E.FENCED_LEADER_EPOCH]
        assert b.share_partitions.get(GROUP, TOPIC, 0) is None


def leader_of(brokers: list[Broker], topic: str, index: int) -> int:
    return brokers[0].metadata.topics[topic].partitions[index].leader_id


async def test_acknowledged_records_are_not_delivered_again_after_the_leader_stops() -> None:
    async with running_cluster(3, **{"share.coordinator.state.topic.num.partitions": 3}) as brokers:
        admin = OurAdminClient(bootstrap(brokers))
        try:
            await admin.create_topic(TOPIC, 1, 3)
        finally:
            await admin.close()
        await wait_until(lambda: all(TOPIC in b.metadata.topics for b in brokers))
        topic_id = brokers[0].metadata.topics[TOPIC].topic_id
        key = SharePartitionKey(GROUP, topic_id, 0)
        coordinators = brokers[0].share_coordinator
        state_index = coordinators.partition_for(key)
        found: list[tuple[int, int]] = []

        def state_leader_known() -> bool:
            found.append(coordinators.find_coordinator(key))  # makes the state topic
            return found[-1][0] == E.NONE

        await wait_until(state_leader_known, message="the state partition's leader")
        # The data partition's leader is the state partition's too: stopping it stops both.
        state_leader = found[-1][1]

        def in_sync() -> bool:
            data = brokers[0].metadata.topics[TOPIC].partitions[0]
            state = brokers[0].metadata.topics[SHARE_GROUP_STATE_TOPIC].partitions[state_index]
            return len(data.isr) == 3 and len(state.isr) == 3

        await wait_until(in_sync, message="every replica in sync")
        if leader_of(brokers, TOPIC, 0) != state_leader:
            error, _ = await brokers[0].forwarding.move_leader(TOPIC, 0, state_leader, 10_000)
            assert error == E.NONE
        old = next(b for b in brokers if b.broker_id == state_leader)
        await wait_until(lambda: all(leader_of([b], TOPIC, 0) == old.broker_id for b in brokers))
        await wait_until(lambda: old.replica_manager.partitions[(TOPIC, 0)].is_leader)

        wire = await KafkaWire.open(old.port)
        try:
            member = ShareMember(wire, uuid.UUID(hex=topic_id))
            assert acquired(await member.fetch()) == {}  # the group starts at the log end: 0
            await asyncio.to_thread(produce, old, [b"v%d" % i for i in range(20)])
            assert await fetch_until_acquired(member, max_records=10) == dict.fromkeys(range(10), 1)
            # ACCEPT 0-3 and 7, RELEASE 4-5, REJECT 6; 8 and 9 stay acquired.
            answer = await member.acknowledge(
                [(0, 3, [ACCEPT]), (4, 7, [RELEASE, RELEASE, REJECT, ACCEPT])]
            )
            assert acknowledge_errors(answer) == [E.NONE]
            # 4 and 5 delivered again (count 2) and released again.
            assert await fetch_until_acquired(member, max_records=2) == {4: 2, 5: 2}
            answer = await member.acknowledge([(4, 5, [RELEASE])])
            assert acknowledge_errors(answer) == [E.NONE]
            held = old.share_partitions.get(GROUP, TOPIC, 0)
            assert held is not None and held.start_offset == 4
        finally:
            await wire.close()

        await old.stop()
        survivors = [b for b in brokers if b is not old]
        await wait_until(
            lambda: all(leader_of([b], TOPIC, 0) not in (-1, old.broker_id) for b in survivors),
            timeout=30,
            message="a new leader of the data partition",
        )
        new = next(b for b in survivors if b.broker_id == leader_of(survivors, TOPIC, 0))
        assert leader_of(survivors, SHARE_GROUP_STATE_TOPIC, state_index) != old.broker_id
        wire = await KafkaWire.open(new.port)
        try:
            member = ShareMember(wire, uuid.UUID(hex=topic_id))
            # Only what was not accepted or rejected, with its delivery count kept: 4 and 5
            # released twice, 8 and 9 held once when the leader stopped, the rest new.
            again = await fetch_until_acquired(member)
            assert again == {4: 3, 5: 3, 8: 2, 9: 2, **dict.fromkeys(range(10, 20), 1)}
            share_partition = new.share_partitions.get(GROUP, TOPIC, 0)
            assert share_partition is not None
            assert share_partition.state is SharePartitionState.ACTIVE
            answer = await member.acknowledge([(4, 5, [ACCEPT]), (8, 19, [ACCEPT])])
            assert acknowledge_errors(answer) == [E.NONE]
            assert share_partition.start_offset == 20
        finally:
            await wire.close()
