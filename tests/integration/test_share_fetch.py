"""KIP-932's ShareFetch (78) and ShareAcknowledge (79) on the Kafka wire, against an
in-process broker: share consumers (made-up member ids: the leader does not check the
group's membership, as Kafka's do not) acquire disjoint records, acknowledge them, get
what another member released or left locked past the lock duration, and wait in the
ShareFetch purgatory for records to arrive."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from confluent_kafka import Producer

from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.server import Broker
from purgatory.clients.admin import AdminClient as OurAdminClient
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_records import decode
from purgatory.protocol.records import iter_batches
from tests.integration.test_acl_group_checks import secured_broker
from tests.kafka_wire import KafkaWire, request, schema
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOPIC = "share-orders"
GROUP = "share-group"
LOCK_MS = 1000
ACCEPT, RELEASE, REJECT = 1, 2, 3


@contextlib.asynccontextmanager
async def broker() -> AsyncIterator[Broker]:
    async with running_cluster(1, **{"group.share.record.lock.duration.ms": LOCK_MS}) as brokers:
        admin = OurAdminClient(bootstrap(brokers))
        try:
            await admin.create_topic(TOPIC, 1, 1)
        finally:
            await admin.close()
        await wait_until(lambda: (TOPIC, 0) in brokers[0].replica_manager.partitions)
        await share_state_loaded(brokers[0])
        yield brokers[0]


async def share_state_loaded(b: Broker) -> None:
    """Make __share_group_state and wait until this broker's share coordinator has loaded it:
    a new SharePartition is then ACTIVE at once (its state read without waiting), so a
    ShareFetch that does not wait finds records as soon as the session opens."""
    b.forwarding.create_share_state_topic()
    coordinator = b.share_coordinator
    await wait_until(lambda: len(coordinator.owned) == coordinator.num_partitions)


def produce(b: Broker, values: Sequence[bytes]) -> None:
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{b.port}", "linger.ms": 5})
    for value in values:
        producer.produce(TOPIC, value, partition=0)
    assert producer.flush(10) == 0


class ShareMember:
    """One share consumer's session with the broker, on its own connection."""

    def __init__(self, wire: KafkaWire, topic_id: uuid.UUID, version: int = 1) -> None:
        self.wire = wire
        self.topic_id = topic_id
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.version = version

    async def fetch(
        self,
        acks: Sequence[tuple[int, int, Sequence[int]]] = (),
        max_wait_ms: int = 0,
        max_records: int = 500,
        epoch: int | None = None,
    ) -> Any:
        s = schema(ApiKey.SHARE_FETCH, self.version)
        partition = s.FetchPartition(
            partition_index=0,
            acknowledgement_batches=tuple(
                s.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=tuple(t))
                for f, last, t in acks
            ),
        )
        body = request(
            ApiKey.SHARE_FETCH,
            self.version,
            group_id=GROUP,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait=max_wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            topics=(s.FetchTopic(topic_id=self.topic_id, partitions=(partition,)),),
            forgotten_topics_data=(),
        )
        response = await self.wire.call(ApiKey.SHARE_FETCH, self.version, body)
        if epoch is None and response.error_code == 0:
            self.epoch = 1 if self.epoch == 0 else self.epoch + 1
        return response

    async def acknowledge(
        self, acks: Sequence[tuple[int, int, Sequence[int]]], epoch: int | None = None
    ) -> Any:
        s = schema(ApiKey.SHARE_ACKNOWLEDGE, self.version)
        body = request(
            ApiKey.SHARE_ACKNOWLEDGE,
            self.version,
            group_id=GROUP,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=(
                s.AcknowledgeTopic(
                    topic_id=self.topic_id,
                    partitions=(
                        s.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=tuple(
                                s.AcknowledgementBatch(
                                    first_offset=f, last_offset=last, acknowledge_types=tuple(t)
                                )
                                for f, last, t in acks
                            ),
                        ),
                    ),
                ),
            ),
        )
        response = await self.wire.call(ApiKey.SHARE_ACKNOWLEDGE, self.version, body)
        if epoch is None and response.error_code == 0:
            self.epoch += 1
        return response


def partition_of(response: Any) -> Any:
    assert response.error_code == 0, response
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def acquired(response: Any) -> dict[int, int]:
    """Offset -> delivery count of what a ShareFetch acquired (none: empty)."""
    if not response.responses:
        return {}
    p = partition_of(response)
    assert p.error_code == 0, p
    return {
        o: a.delivery_count
        for a in p.acquired_records
        for o in range(a.first_offset, a.last_offset + 1)
    }


def values(response: Any) -> dict[int, bytes | None]:
    """The records the response carries for its acquired offsets, by offset."""
    if not response.responses:
        return {}
    p = partition_of(response)
    owned = acquired(response)
    records = [r for batch in iter_batches(p.records) for r in decode(batch)]
    return {r.offset: r.value for r in records if r.offset in owned}


@contextlib.asynccontextmanager
async def members(b: Broker, n: int, version: int = 1) -> AsyncIterator[list[ShareMember]]:
    topic_id = uuid.UUID(hex=b.metadata.topics[TOPIC].topic_id)
    wires = [await KafkaWire.open(b.port) for _ in range(n)]
    try:
        yield [ShareMember(w, topic_id, version) for w in wires]
    finally:
        for w in wires:
            await w.close()


async def test_two_members_acquire_disjoint_records_and_acknowledge_them() -> None:
    async with broker() as b, members(b, 2) as (m1, m2):
        for m in (m1, m2):  # open the sessions: the group starts at the end of the log
            opened = await m.fetch()
            assert partition_of(opened).error_code == 0
            assert acquired(opened) == {}
            assert opened.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        await asyncio.to_thread(produce, b, [b"v%d" % i for i in range(20)])
        await wait_until(lambda: b.replica_manager.partitions[(TOPIC, 0)].high_watermark == 20)

        first = await m1.fetch(max_records=10)
        second = await m2.fetch(max_records=10)
        assert acquired(first) == dict.fromkeys(range(10), 1)
        assert acquired(second) == dict.fromkeys(range(10, 20), 1)
        assert values(first) == {i: b"v%d" % i for i in range(10)}
        assert values(second) == {i: b"v%d" % i for i in range(10, 20)}

        # m1: ACCEPT 0-4, RELEASE 5-7, REJECT 8 and 9 (one type per offset).
        answer = await m1.acknowledge([(0, 4, [ACCEPT]), (5, 9, [2, 2, 2, 3, 3])])
        assert answer.error_code == 0
        assert [p.error_code for t in answer.responses for p in t.partitions] == [0]
        # m2 accepts its own with its next fetch and gets the released 5-7, delivered twice.
        again = await m2.fetch(acks=[(10, 19, [ACCEPT])])
        assert partition_of(again).acknowledge_error_code == 0
        assert acquired(again) == dict.fromkeys(range(5, 8), 2)
        assert values(again) == {i: b"v%d" % i for i in range(5, 8)}
        # Records m1 does not hold (m2's, or done with) are INVALID_RECORD_STATE.
        refused = await m1.acknowledge([(5, 5, [ACCEPT])])
        assert [p.error_code for t in refused.responses for p in t.partitions] == [
            ErrorCode.INVALID_RECORD_STATE
        ]
        refused = await m1.acknowledge([(12, 12, [ACCEPT])])
        assert [p.error_code for t in refused.responses for p in t.partitions] == [
            ErrorCode.INVALID_RECORD_STATE
        ]
        done = await m2.fetch(acks=[(5, 7, [ACCEPT])])
        assert partition_of(done).acknowledge_error_code == 0
        assert acquired(done) == {}
        share_partition = b.share_partitions.get(GROUP, TOPIC, 0)
        assert share_partition is not None
        assert share_partition.start_offset == 20  # everything accepted or rejected


async def test_a_stopped_members_records_are_redelivered_after_the_lock_duration() -> None:
    async with broker() as b, members(b, 2) as (m1, m2):
        for m in (m1, m2):
            await m.fetch()
        await asyncio.to_thread(produce, b, [b"r%d" % i for i in range(30)])
        await wait_until(lambda: b.replica_manager.partitions[(TOPIC, 0)].high_watermark == 30)
        taken = await m1.fetch()
        assert acquired(taken) == dict.fromkeys(range(30), 1)
        # m1 stops: no acknowledgement, its session never closes. m2's fetch waits in the
        # purgatory and gets them once their locks expire.
        waiting = asyncio.ensure_future(m2.fetch(max_wait_ms=20_000))
        await asyncio.sleep(0)
        redelivered = await asyncio.wait_for(waiting, 15)
        assert acquired(redelivered) == dict.fromkeys(range(30), 2)
        assert values(redelivered) == {i: b"r%d" % i for i in range(30)}
        # m2 stops too; they come back to m2's next session a third time.
        m2.epoch = 0
        await m2.fetch()
        third = await asyncio.wait_for(m2.fetch(max_wait_ms=20_000), 15)
        assert acquired(third) == dict.fromkeys(range(30), 3)
        # m1's late acknowledgement of records m2 now holds is refused.
        late = await m1.acknowledge([(0, 29, [ACCEPT])])
        assert [p.error_code for t in late.responses for p in t.partitions] == [
            ErrorCode.INVALID_RECORD_STATE
        ]
        accepted = await m2.fetch(acks=[(0, 29, [ACCEPT])])
        assert partition_of(accepted).acknowledge_error_code == 0
        # Nothing lost, nothing left: every record accepted once.
        share_partition = b.share_partitions.get(GROUP, TOPIC, 0)
        assert share_partition is not None
        assert share_partition.start_offset == 30


async def test_session_epochs_and_their_errors() -> None:
    async with broker() as b, members(b, 2) as (m1, m2):
        # No session yet: any epoch but 0 is SHARE_SESSION_NOT_FOUND.
        for epoch in (1, 7, -1):
            answer = await m1.fetch(epoch=epoch)
            assert answer.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
            assert not answer.responses
        answer = await m1.acknowledge([], epoch=1)
        assert answer.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        # An initial ShareFetch cannot acknowledge.
        answer = await m1.fetch(acks=[(0, 0, [ACCEPT])], epoch=0)
        assert answer.error_code == ErrorCode.INVALID_REQUEST
        await m1.fetch()
        await m2.fetch()
        assert m1.epoch == 1
        for epoch in (0, 2, 3):
            answer = await m1.acknowledge([], epoch=epoch)
            assert answer.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        answer = await m1.fetch(epoch=2)
        assert answer.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert (await m1.fetch()).error_code == 0  # epoch 1 still expected: refusals change nothing
        assert (await m1.acknowledge([])).error_code == 0  # epoch 2
        assert m1.epoch == 3
        # Closing the session (epoch -1) releases what the member holds, at once.
        await asyncio.to_thread(produce, b, [b"c%d" % i for i in range(5)])
        await wait_until(lambda: b.replica_manager.partitions[(TOPIC, 0)].high_watermark == 5)
        assert acquired(await m1.fetch()) == dict.fromkeys(range(5), 1)
        closed = await m1.acknowledge([(0, 0, [ACCEPT])], epoch=-1)
        assert closed.error_code == 0
        assert b.share_sessions.get(GROUP, m1.member_id) is None
        assert (await m1.fetch(epoch=m1.epoch)).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert acquired(await m2.fetch()) == dict.fromkeys(range(1, 5), 2)
        # ShareFetch with epoch -1 acknowledges and closes too.
        final = await m2.fetch(acks=[(1, 4, [ACCEPT])], epoch=-1)
        assert final.error_code == 0
        assert partition_of(final).acknowledge_error_code == 0
        assert not partition_of(final).acquired_records
        assert b.share_sessions.get(GROUP, m2.member_id) is None


async def test_a_waiting_share_fetch_is_answered_when_records_arrive() -> None:
    async with broker() as b, members(b, 1, version=2) as (m1,):
        await m1.fetch()
        purgatory = b.replica_manager.share_fetch_purgatory
        waiting = asyncio.ensure_future(m1.fetch(max_wait_ms=60_000))
        await wait_until(lambda: purgatory.watched > 0, message="the ShareFetch parked")
        assert not waiting.done()
        await asyncio.to_thread(produce, b, [b"late"])
        answer = await asyncio.wait_for(waiting, 15)  # long before its 60 s
        assert values(answer) == {0: b"late"}
        assert acquired(answer) == {0: 1}
        assert purgatory.watched == 0


async def test_records_are_shared_among_members_without_loss_or_overlap() -> None:
    async with broker() as b, members(b, 2) as (m1, m2):
        for m in (m1, m2):
            await m.fetch()
        total = 200
        await asyncio.to_thread(produce, b, [b"x%d" % i for i in range(total)])
        await wait_until(lambda: b.replica_manager.partitions[(TOPIC, 0)].high_watermark == total)
        seen: Counter[int] = Counter()
        pending: dict[ShareMember, list[tuple[int, int, Sequence[int]]]] = {m1: [], m2: []}
        for _ in range(40):
            for m in (m1, m2):
                answer = await m.fetch(acks=pending[m], max_records=7)
                got = values(answer)
                seen.update(list(got))
                pending[m] = [(o, o, [ACCEPT]) for o in sorted(got)]
            if sum(seen.values()) == total:
                break
        assert seen == Counter(range(total))


async def test_members_assigned_by_share_group_heartbeat_fetch_from_the_leader() -> None:
    """The whole path: two members join the share group through its coordinator
    (ShareGroupHeartbeat v1), both are assigned the topic's one partition, and share its
    records through the leader."""
    async with broker() as b, members(b, 2) as (m1, m2):
        find = request(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(GROUP,))
        await m1.wire.call(ApiKey.FIND_COORDINATOR, 4, find)
        await wait_until(
            lambda: b.group_coordinator.manager.ownership_error(GROUP) == ErrorCode.NONE,
            timeout=30,
            message="the share group's coordinator",
        )
        for m in (m1, m2):
            joined = await m.wire.call(
                ApiKey.SHARE_GROUP_HEARTBEAT,
                1,
                request(
                    ApiKey.SHARE_GROUP_HEARTBEAT,
                    1,
                    group_id=GROUP,
                    member_id=m.member_id,
                    member_epoch=0,
                    rack_id=None,
                    subscribed_topic_names=(TOPIC,),
                ),
            )
            assert joined.error_code == ErrorCode.NONE, joined.error_message
            assert joined.heartbeat_interval.total_seconds() > 0
            assigned = [
                (tp.topic_id, list(tp.partitions)) for tp in joined.assignment.topic_partitions
            ]
            assert assigned == [(m.topic_id, [0])]
            assert partition_of(await m.fetch()).error_code == 0
        await asyncio.to_thread(produce, b, [b"j%d" % i for i in range(10)])
        await wait_until(lambda: b.replica_manager.partitions[(TOPIC, 0)].high_watermark == 10)
        first = await m1.fetch(max_records=6)
        second = await m2.fetch(max_records=6)
        assert acquired(first) == dict.fromkeys(range(6), 1)
        assert acquired(second) == dict.fromkeys(range(6, 10), 1)


async def test_a_follower_answers_not_leader_with_the_leader_and_an_unknown_id_is_refused() -> None:
    async with running_cluster(2) as brokers:
        admin = OurAdminClient(bootstrap(brokers))
        try:
            await admin.create_topic(TOPIC, 1, 1)
        finally:
            await admin.close()
        await wait_until(
            lambda: all(b.metadata.partition(TOPIC, 0) is not None for b in brokers),
            message="the topic in every broker's metadata",
        )
        state = brokers[0].metadata.partition(TOPIC, 0)
        assert state is not None
        leader = next(b for b in brokers if b.broker_id == state.leader_id)
        other = next(b for b in brokers if b is not leader)
        async with members(other, 1) as (m,):
            answer = await m.fetch()
            p = partition_of(answer)
            assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (
                leader.broker_id,
                state.leader_epoch,
            )
            assert [(e.node_id, e.port) for e in answer.node_endpoints] == [
                (leader.broker_id, leader.port)
            ]
            # A topic no broker has: added to the session, answered UNKNOWN_TOPIC_ID (and
            # the session's partition still NOT_LEADER_OR_FOLLOWER).
            known, m.topic_id = m.topic_id, uuid.uuid4()
            answer = await m.fetch()
            errors = {t.topic_id: [p.error_code for p in t.partitions] for t in answer.responses}
            assert errors == {
                known: [ErrorCode.NOT_LEADER_OR_FOLLOWER],
                m.topic_id: [ErrorCode.UNKNOWN_TOPIC_ID],
            }


async def test_share_fetch_needs_read_on_the_group_and_the_topic() -> None:
    async with secured_broker(TOPIC) as secured, members(secured.broker, 1) as (m,):
        refused = await m.fetch()
        assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert not refused.responses
        refused = await m.acknowledge([], epoch=1)
        assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        await secured.allow(ResourceType.GROUP, GROUP, AclOperation.READ)
        answer = await m.fetch()
        assert partition_of(answer).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        await secured.allow(ResourceType.TOPIC, TOPIC, AclOperation.READ)
        m.epoch = 0  # a new session: its answer lists every partition
        answer = await m.fetch()
        assert partition_of(answer).error_code == ErrorCode.NONE
