"""Share partition state kept by a persister (KIP-932's share coordinator, Kafka's
SharePartition initialize/writeShareGroupState): a SharePartition initializing from the state
read back, what is written after acknowledgements, releases and lock expiries, a failed
write, fencing; and the persister itself (DefaultStatePersister) finding the key's share
coordinator, here or on another broker, retrying while it moves. Fakes stand for the share
coordinator; the clock is manual."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import pytest

from purgatory.broker.coordinator.share.share_group_offset import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)
from purgatory.broker.purgatory import ManualScheduler
from purgatory.broker.share.persister import DefaultStatePersister
from purgatory.broker.share.share_partition import (
    AcknowledgeType,
    AcquiredRecords,
    PersistedState,
    RecordState,
    SharePartition,
    SharePartitionState,
    StateBatch,
)
from purgatory.broker.share.share_partition_manager import SharePartitionManager
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode as E
from tests.harness import Harness

GAP, ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)
AV, AK, AR = int(RecordState.AVAILABLE), int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED)


class Written(NamedTuple):
    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[StateBatch]


class FakePersister:
    """The share coordinator as the manager sees it: reads answer ``states`` (or wait on
    ``read_gate``), writes are recorded and answered by ``answer_writes`` (or at once)."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, int], tuple[int, PersistedState | None]] = {}
        self.reads: list[tuple[str, str, int, int]] = []
        self.read_gate: asyncio.Future[None] | None = None
        self.written: list[Written] = []
        self.hold_writes = False
        self._held: list[asyncio.Future[int]] = []
        self.write_code = E.NONE

    def read_now(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None] | None:
        return None  # as a share coordinator on another broker: read waits

    async def read(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int
    ) -> tuple[int, PersistedState | None]:
        self.reads.append((group_id, topic_id, partition, leader_epoch))
        if self.read_gate is not None:
            await self.read_gate
        return self.states.get((group_id, partition), (E.NONE, None))

    async def write(
        self,
        group_id: str,
        topic_id: str,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> int:
        self.written.append(
            Written(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches)
        )
        if not self.hold_writes:
            return self.write_code
        held: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._held.append(held)
        return await held

    def answer_writes(self, code: int = E.NONE) -> None:
        held, self._held = self._held, []
        for future in held:
            future.set_result(code)


async def until(condition: Callable[[], Any], steps: int = 100) -> None:
    """Let the event loop run the manager's reads and writes until ``condition`` holds
    (bounded: the fakes answer without any time passing)."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


class Leader:
    def __init__(self) -> None:
        self.h = Harness()
        self.h.create("t", 1)
        self.h.set_partition("t", 0, isr=[0], leader_epoch=3)
        self.persister = FakePersister()
        self.group_configs: dict[str, dict[str, str]] = {}
        self.manager = SharePartitionManager(
            self.h.config,
            self.h.replica_manager,
            self.h.clock,
            lambda group_id: self.group_configs.get(group_id, {}),
            self.persister,
        )
        self.woken: list[SharePartition] = []
        self.manager.on_acquirable = self.woken.append

    def sp(self) -> SharePartition:
        share_partition = self.manager.share_partition("g", "t", 0)
        assert isinstance(share_partition, SharePartition), share_partition
        return share_partition

    async def active(self) -> SharePartition:
        share_partition = self.sp()
        await until(lambda: share_partition.state is SharePartitionState.ACTIVE)
        return share_partition

    @property
    def topic_id(self) -> str:
        return str(self.h.topics["t"].topic_id)


@pytest.fixture
async def leader() -> AsyncIterator[Leader]:
    made = Leader()
    await made.h.produce("t", [b"r%d" % i for i in range(20)], acks=1)
    yield made
    made.manager.shutdown()
    await made.h.shutdown()


async def test_a_new_share_partition_acquires_nothing_until_its_state_is_read(
    leader: Leader,
) -> None:
    leader.persister.read_gate = asyncio.get_running_loop().create_future()
    sp = leader.sp()
    await until(lambda: leader.persister.reads)
    assert leader.persister.reads == [("g", leader.topic_id, 0, 3)]  # the leader's epoch
    assert sp.state is SharePartitionState.INITIALIZING and not sp.can_acquire()
    assert sp.acknowledge("a", [(0, 0, [ACCEPT])]) is E.INVALID_RECORD_STATE
    assert leader.sp() is sp and len(leader.persister.reads) == 1  # read once
    leader.persister.read_gate.set_result(None)
    await until(lambda: sp.state is SharePartitionState.ACTIVE)
    assert sp.can_acquire() and leader.woken == [sp]  # a waiting ShareFetch is told


async def test_nothing_persisted_starts_at_the_reset_offset_and_writes_it(
    leader: Leader,
) -> None:
    sp = await leader.active()
    assert (sp.start_offset, sp.end_offset) == (20, 20)  # latest: the high watermark
    await until(lambda: leader.persister.written)
    assert leader.persister.written == [Written("g", leader.topic_id, 0, 0, 3, 20, [])]


async def test_initialization_restores_the_start_offset_batches_and_delivery_counts(
    leader: Leader,
) -> None:
    leader.persister.states[("g", 0)] = (
        E.NONE,
        PersistedState(
            2,
            5,
            [(5, 6, AV, 2), (7, 7, AK, 1), (8, 9, AR, 5), (10, 11, AV, 1), (14, 14, AK, 3)],
        ),
    )
    sp = await leader.active()
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (5, 15, 2)
    assert [sp.record_state(o) for o in range(5, 15)] == [
        RecordState.AVAILABLE,
        RecordState.AVAILABLE,
        RecordState.ACKNOWLEDGED,
        RecordState.ARCHIVED,
        RecordState.ARCHIVED,
        RecordState.AVAILABLE,
        RecordState.AVAILABLE,
        None,  # 12, 13: never acquired (gaps), not delivered
        None,
        RecordState.ACKNOWLEDGED,
    ]
    assert leader.persister.written == []  # the state read is the state stored
    # The available ones are delivered again with their counts, then the log past 15.
    offsets = list(range(5, 20))
    assert sp.acquire("a", offsets, 100) == [
        AcquiredRecords(5, 6, 3),
        AcquiredRecords(10, 11, 2),
        AcquiredRecords(15, 19, 1),
    ]


async def test_a_start_offset_past_every_batch_leaves_nothing_in_flight(leader: Leader) -> None:
    leader.persister.states[("g", 0)] = (E.NONE, PersistedState(1, 12, [(3, 4, AV, 1)]))
    sp = await leader.active()
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (12, 12, 12)
    assert sp.acquire("a", list(range(10, 14)), 10) == [AcquiredRecords(12, 13, 1)]


async def test_each_kind_of_acknowledgement_writes_the_state_it_leaves(leader: Leader) -> None:
    leader.group_configs["g"] = {"share.auto.offset.reset": "earliest"}
    sp = await leader.active()
    await until(lambda: leader.persister.written)
    leader.persister.written.clear()
    sp.acquire("a", list(range(0, 10)), 10)
    written = leader.persister.written

    async def acknowledge(batches: list[Any]) -> Written:
        assert sp.acknowledge("a", batches) is E.NONE
        assert await leader.manager.write_state(sp) == E.NONE
        return written[-1]

    # ACCEPT of the first two moves the start; acquired ones are written AVAILABLE (count 1).
    assert await acknowledge([(0, 1, [ACCEPT])]) == Written(
        "g", leader.topic_id, 0, 0, 3, 2, [(2, 9, AV, 1)]
    )
    # REJECT and GAP archive, ACCEPT in the middle is kept as ACKNOWLEDGED.
    state = await acknowledge([(3, 3, [REJECT]), (4, 4, [ACCEPT]), (5, 5, [GAP])])
    assert (state.start_offset, state.batches) == (
        2,
        [(2, 2, AV, 1), (3, 3, AR, 1), (4, 4, AK, 1), (5, 5, AR, 1), (6, 9, AV, 1)],
    )
    # RELEASE: AVAILABLE with its count; delivered again, the count is 2.
    await acknowledge([(2, 2, [RELEASE])])
    assert sp.acquire("b", [2], 1) == [AcquiredRecords(2, 2, 2)]
    state = await acknowledge([(6, 9, [ACCEPT])])
    assert (state.start_offset, state.batches) == (
        2,
        [(2, 2, AV, 2), (3, 3, AR, 1), (4, 4, AK, 1), (5, 5, AR, 1), (6, 9, AK, 1)],
    )


async def test_one_write_at_a_time_and_the_next_carries_every_later_change(
    leader: Leader,
) -> None:
    leader.group_configs["g"] = {"share.auto.offset.reset": "earliest"}
    sp = await leader.active()
    await until(lambda: leader.persister.written)
    persister = leader.persister
    persister.written.clear()
    persister.hold_writes = True
    sp.acquire("a", list(range(0, 6)), 10)
    sp.acknowledge("a", [(0, 0, [ACCEPT])])
    first = leader.manager.write_state(sp)
    await until(lambda: len(persister.written) == 1)
    sp.acknowledge("a", [(1, 1, [ACCEPT])])
    second = leader.manager.write_state(sp)
    sp.acknowledge("a", [(2, 2, [ACCEPT])])
    third = leader.manager.write_state(sp)
    await asyncio.sleep(0)
    assert len(persister.written) == 1 and not first.done()  # the second waits for the first
    persister.answer_writes()
    await until(lambda: first.done() and len(persister.written) == 2)
    assert not second.done() and not third.done()  # not stored before their write is
    assert persister.written[1].start_offset == 3  # both changes in one write
    persister.answer_writes()
    await until(lambda: third.done())
    assert (first.result(), second.result(), third.result()) == (E.NONE, E.NONE, E.NONE)
    assert len(persister.written) == 2


async def test_releases_and_lock_expiries_write_the_state(leader: Leader) -> None:
    leader.group_configs["g"] = {
        "share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "1000",
    }
    sp = await leader.active()
    await until(lambda: leader.persister.written)
    written = leader.persister.written
    written.clear()
    sp.acquire("a", [0, 1], 10)
    sp.acquire("b", [2, 3], 10)
    [write] = leader.manager.release_member("g", "a")
    assert await write == E.NONE
    assert written[-1].batches == [(0, 3, AV, 1)]  # b's acquired ones written AVAILABLE
    assert leader.manager.release_member("g", "a") == []  # holds nothing: nothing to write
    assert sp.acquire("a", [0, 1], 10) == [AcquiredRecords(0, 1, 2)]
    leader.h.clock.advance(1000)  # both locks expire
    await until(lambda: len(written) == 2)
    assert written[-1].batches == [(0, 1, AV, 2), (2, 3, AV, 1)]


async def test_a_failed_write_is_the_acknowledgements_error(leader: Leader) -> None:
    sp = await leader.active()
    await until(lambda: leader.persister.written)
    leader.persister.write_code = E.COORDINATOR_NOT_AVAILABLE
    sp.acquire("a", [20], 1)
    assert sp.acknowledge("a", [(20, 20, [ACCEPT])]) is E.NONE
    assert await leader.manager.write_state(sp) == E.COORDINATOR_NOT_AVAILABLE
    assert leader.manager.get("g", "t", 0) is sp  # kept: a later write may store it


async def test_a_fenced_write_drops_the_share_partition(leader: Leader) -> None:
    sp = await leader.active()
    await until(lambda: leader.persister.written)
    sp.acquire("a", [0], 1)
    leader.persister.write_code = E.FENCED_LEADER_EPOCH
    assert await leader.manager.write_state(sp) == E.FENCED_LEADER_EPOCH
    assert leader.manager.get("g", "t", 0) is None
    assert len(leader.manager.timer) == 0  # its locks cancelled


async def test_a_failed_read_drops_the_share_partition_to_be_made_again(leader: Leader) -> None:
    leader.persister.states[("g", 0)] = (E.COORDINATOR_NOT_AVAILABLE, None)
    sp = leader.sp()
    await until(lambda: leader.manager.get("g", "t", 0) is None)
    assert leader.woken == [sp]  # a waiting fetch looks again (and makes it anew)
    del leader.persister.states[("g", 0)]
    again = await leader.active()
    assert again is not sp and len(leader.persister.reads) == 2


async def test_losing_the_leadership_while_reading_drops_the_share_partition(
    leader: Leader,
) -> None:
    leader.persister.read_gate = asyncio.get_running_loop().create_future()
    sp = leader.sp()
    await until(lambda: leader.persister.reads)
    leader.h.set_partition("t", 0, leader_id=1, leader_epoch=4)
    assert leader.manager.get("g", "t", 0) is None
    leader.persister.read_gate.set_result(None)
    await asyncio.sleep(0)
    assert sp.state is SharePartitionState.INITIALIZING and leader.persister.written == []


# -- DefaultStatePersister: finding the share coordinator, retrying, fencing ----------------


class FakeCoordinator:
    """ShareCoordinator as the persister calls it: where each key's coordinator is, and its
    answers when it is this broker."""

    def __init__(self) -> None:
        self.found: list[tuple[int, int]] = []  # find_coordinator's answers, in turn
        self.stored: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.write_codes: list[int] = []  # write_state's answers, in turn (then NONE)

    def find_coordinator(self, key: SharePartitionKey) -> tuple[int, int]:
        return self.found.pop(0) if len(self.found) > 1 else self.found[0]

    def read_state(
        self, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[int, ShareGroupOffset | None]:
        return E.NONE, self.stored.get(key)

    def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[PersisterStateBatch],
    ) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        code = self.write_codes.pop(0) if self.write_codes else E.NONE
        if code == E.NONE:
            self.stored[key] = ShareGroupOffset(state_epoch, leader_epoch, start_offset, batches)
        future.set_result(code)
        return future


class Persisting:
    def __init__(self) -> None:
        self.clock = ManualScheduler()
        self.coordinator = FakeCoordinator()
        self.sent: list[tuple[int, ApiKey, Any]] = []
        self.answers: list[Any] = []
        self.persister = DefaultStatePersister(
            0,
            self.coordinator,  # type: ignore[arg-type]
            self.send,
            self.clock,
            timeout_ms=1000,
            backoff_ms=100,
        )

    async def send(self, node: int, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        self.sent.append((node, key, request))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def run(self, coroutine: Any) -> Any:
        """Run a read or write to its end, moving the clock through its backoffs."""
        task = asyncio.ensure_future(coroutine)
        for _ in range(100):
            await until(lambda: task.done() or self.clock.pending_timers, steps=50)
            if task.done():
                return task.result()
            self.clock.advance(100)
        raise AssertionError("never ended")


KEY = SharePartitionKey("g", "ab" * 16, 3)


async def test_the_persister_calls_its_own_share_coordinator_when_it_leads_the_key() -> None:
    p = Persisting()
    p.coordinator.found = [(E.NONE, 0)]
    assert await p.run(p.persister.read("g", KEY.topic_id, 3, 5)) == (E.NONE, None)
    assert p.persister.read_now("g", KEY.topic_id, 3, 5) == (E.NONE, None)
    batches = [(4, 6, AV, 2), (7, 7, AK, 1)]
    assert await p.run(p.persister.write("g", KEY.topic_id, 3, 0, 5, 4, batches)) == E.NONE
    stored = p.coordinator.stored[KEY]
    assert stored == ShareGroupOffset(0, 5, 4, [PersisterStateBatch(4, 6, AV, 2), (7, 7, AK, 1)])
    assert isinstance(stored.state_batches[0], PersisterStateBatch)
    assert p.persister.read_now("g", KEY.topic_id, 3, 5) == (
        E.NONE,
        PersistedState(0, 4, batches),
    )
    assert p.sent == []


async def test_the_persister_asks_another_brokers_share_coordinator_over_the_wire() -> None:
    p = Persisting()
    p.coordinator.found = [(E.NONE, 2)]
    assert p.persister.read_now("g", KEY.topic_id, 3, 5) is None  # it would have to wait
    p.answers = [ib.ReadShareGroupStateResponse(E.NONE)]  # nothing written: start -1
    assert await p.run(p.persister.read("g", KEY.topic_id, 3, 5)) == (E.NONE, None)
    p.answers = [ib.ReadShareGroupStateResponse(E.NONE, 1, 5, 4, [(4, 6, AV, 2)])]
    assert await p.run(p.persister.read("g", KEY.topic_id, 3, 5)) == (
        E.NONE,
        PersistedState(1, 4, [(4, 6, AV, 2)]),
    )
    p.answers = [ib.WriteShareGroupStateResponse(E.NONE)]
    assert await p.run(p.persister.write("g", KEY.topic_id, 3, 1, 5, 7, [])) == E.NONE
    assert [(node, key) for node, key, _ in p.sent] == [
        (2, ApiKey.READ_SHARE_GROUP_STATE),
        (2, ApiKey.READ_SHARE_GROUP_STATE),
        (2, ApiKey.WRITE_SHARE_GROUP_STATE),
    ]
    assert p.sent[0][2] == ib.ReadShareGroupStateRequest("g", KEY.topic_id, 3, 5)
    assert p.sent[2][2] == ib.WriteShareGroupStateRequest("g", KEY.topic_id, 3, 1, 5, 7, [])


async def test_the_persister_retries_a_moving_coordinator_until_its_deadline() -> None:
    p = Persisting()
    # Not there yet, then on broker 2 (unreachable, then loading), then here.
    p.coordinator.found = [(E.COORDINATOR_NOT_AVAILABLE, -1), (E.NONE, 2), (E.NONE, 2), (E.NONE, 0)]
    p.answers = [ConnectionError("gone"), ib.WriteShareGroupStateResponse(E.NOT_COORDINATOR)]
    assert await p.run(p.persister.write("g", KEY.topic_id, 3, 0, 5, 4, [])) == E.NONE
    assert p.clock.now_ms() == 300 and KEY in p.coordinator.stored  # three backoffs
    # Never found within the deadline: the last error.
    p.coordinator.found = [(E.COORDINATOR_LOAD_IN_PROGRESS, -1)]
    start = p.clock.now_ms()
    assert await p.run(p.persister.read("g", KEY.topic_id, 3, 5)) == (
        E.COORDINATOR_LOAD_IN_PROGRESS,
        None,
    )
    assert p.clock.now_ms() - start == 1000


async def test_a_fenced_leader_epoch_ends_the_persisters_write_at_once() -> None:
    p = Persisting()
    p.coordinator.found = [(E.NONE, 0)]
    p.coordinator.write_codes = [E.FENCED_LEADER_EPOCH]
    assert await p.run(p.persister.write("g", KEY.topic_id, 3, 0, 4, 4, [])) == (
        E.FENCED_LEADER_EPOCH
    )
    assert p.clock.now_ms() == 0 and KEY not in p.coordinator.stored
