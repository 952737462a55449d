"""The transaction coordinator's state machine on a manual clock: a ReplicaManager holding
``__transaction_state`` and the transaction's partitions (the harness's broker 0 leads
every partition, alone in its ISR), markers written by the partition leader's own
WriteTxnMarkers path, no sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from purgatory.broker.coordinator.producer_id_manager import ProducerIdManager
from purgatory.broker.coordinator.transaction import transaction_log
from purgatory.broker.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
)
from purgatory.broker.coordinator.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from purgatory.broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)
from purgatory.broker.coordinator.transaction.txn_marker_writer import TxnMarkerWriter
from purgatory.protocol.errors import ErrorCode as E
from purgatory.protocol.kafka_records import CONTROL_FLAG, parse_end_txn_marker
from purgatory.protocol.records import iter_batches
from tests.harness import Harness

TXN = "tx"
TIMEOUT = 60_000
S = TransactionState


class Txns:
    def __init__(self, **config: Any) -> None:
        self.h = Harness(
            **{"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
            | config
        )
        for topic, partitions in (("t", 2), (TRANSACTION_STATE_TOPIC, 1), (OFFSETS_TOPIC, 1)):
            self.h.create(topic, partitions)
            for index in range(partitions):
                self.h.set_partition(topic, index, isr=[0])
        self.offsets_markers: list[tuple[int, int, bool]] = []
        writer = TxnMarkerWriter(self.h.replica_manager, self._offsets_marker)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.coordinator = TransactionCoordinator(
            self.h.config,
            self.h.replica_manager,
            self.h.metadata,
            self.h.clock,
            ProducerIdManager(0),
            TransactionMarkerChannelManager(0, self.h.metadata, self._unreachable, writer.write),
            lambda: None,
            self._spawn,
        )
        self.coordinator.state.leadership_changed(
            0, self.h.partition(TRANSACTION_STATE_TOPIC).leader_epoch, True
        )

    def _offsets_marker(self, index: int, producer_id: int, committed: bool) -> None:
        self.offsets_markers.append((index, producer_id, committed))

    async def _unreachable(self, *_: Any) -> Any:
        raise ConnectionError("one broker here")

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def settle(self) -> None:
        for _ in range(5):
            await self.h.settle()
            if self.tasks:
                await asyncio.wait(set(self.tasks), timeout=5)

    @property
    def txn(self) -> TransactionMetadata:
        return self.coordinator.state.transactions[TXN]

    async def init(self, producer_id: int = -1, epoch: int = -1, timeout: int = TIMEOUT) -> Any:
        return await self.coordinator.init_producer_id(TXN, timeout, producer_id, epoch)

    async def add(self, pid: int, epoch: int, *partitions: tuple[str, int]) -> int:
        return await self.coordinator.add_partitions(TXN, pid, epoch, frozenset(partitions))

    async def end(self, pid: int, epoch: int, commit: bool) -> int:
        return await self.coordinator.end_transaction(TXN, pid, epoch, commit)

    def markers(self, topic: str = "t", index: int = 0) -> list[tuple[int, bool]]:
        """(producer id, committed) of each control batch in the partition's log."""
        log = self.h.partition(topic, index).log
        found = []
        for batch in iter_batches(b"".join(log.read(0, 1 << 20))):
            if batch[22] & CONTROL_FLAG:
                producer_id = int.from_bytes(batch[43:51], "big", signed=True)
                found.append((producer_id, parse_end_txn_marker(batch)[0]))
        return found


@pytest.fixture
async def txns() -> AsyncIterator[Txns]:
    t = Txns()
    await t.settle()  # the __transaction_state partition loads
    yield t
    t.coordinator.shutdown()
    await t.h.shutdown()


async def test_init_gives_a_new_id_at_epoch_0_and_each_init_after_fences_the_one_before(
    txns: Txns,
) -> None:
    first = await txns.init()
    assert (first.error_code, first.producer_epoch) == (E.NONE, 0) and first.producer_id >= 0
    second = await txns.init()
    assert (second.error_code, second.producer_id, second.producer_epoch) == (
        E.NONE,
        first.producer_id,
        1,
    )
    assert await txns.add(first.producer_id, 0, ("t", 0)) == E.PRODUCER_FENCED
    assert await txns.add(first.producer_id + 1, 1, ("t", 0)) == E.INVALID_PRODUCER_ID_MAPPING


async def test_bad_ids_and_timeouts_are_refused(txns: Txns) -> None:
    assert (await txns.coordinator.init_producer_id("", TIMEOUT)).error_code == E.INVALID_REQUEST
    too_long = txns.h.config["transaction.max.timeout.ms"] + 1
    assert (await txns.init(timeout=too_long)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert (await txns.init(timeout=0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    idempotent = await txns.coordinator.init_producer_id(None, TIMEOUT)
    assert (idempotent.error_code, idempotent.producer_epoch) == (E.NONE, 0)
    assert TXN not in txns.coordinator.state.transactions


async def test_a_commit_writes_prepare_then_markers_everywhere_then_complete(txns: Txns) -> None:
    p = await txns.init()
    pid = p.producer_id
    assert await txns.add(pid, 0, ("t", 0), ("t", 1)) == E.NONE
    assert txns.txn.state is S.ONGOING and txns.txn.partitions == {("t", 0), ("t", 1)}
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE  # already in: nothing written
    assert await txns.end(pid, 0, commit=True) == E.NONE
    assert txns.txn.state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_COMMIT and not txns.txn.partitions
    assert txns.markers("t", 0) == [(pid, True)] and txns.markers("t", 1) == [(pid, True)]
    # A retried EndTxn of the same outcome succeeds; the other is refused.
    assert await txns.end(pid, 0, commit=True) == E.NONE
    assert await txns.end(pid, 0, commit=False) == E.INVALID_TXN_STATE
    # The next transaction starts afresh.
    assert await txns.add(pid, 0, ("t", 1)) == E.NONE
    assert txns.txn.partitions == {("t", 1)}
    assert await txns.end(pid, 0, commit=False) == E.NONE
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_ABORT
    assert txns.markers("t", 1) == [(pid, True), (pid, False)] and txns.markers("t", 0) == [
        (pid, True)
    ]


async def test_end_without_a_transaction_is_an_invalid_state(txns: Txns) -> None:
    p = await txns.init()
    assert await txns.end(p.producer_id, 0, commit=True) == E.INVALID_TXN_STATE


async def test_the_offsets_partition_of_a_group_joins_and_hears_its_marker(txns: Txns) -> None:
    p = await txns.init()
    assert await txns.add(p.producer_id, 0, (OFFSETS_TOPIC, 0)) == E.NONE
    assert await txns.end(p.producer_id, 0, commit=True) == E.NONE
    await txns.settle()
    assert txns.offsets_markers == [(0, p.producer_id, True)]


async def test_a_new_producer_of_the_id_aborts_the_open_transaction_and_fences_the_old(
    txns: Txns,
) -> None:
    old = await txns.init()
    pid = old.producer_id
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE
    retry = await txns.init()
    assert retry.error_code == E.CONCURRENT_TRANSACTIONS  # the abort goes first
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_ABORT and txns.txn.producer_epoch == 1
    assert txns.markers() == [(pid, False)]
    new = await txns.init()
    assert (new.error_code, new.producer_id, new.producer_epoch) == (E.NONE, pid, 2)
    assert await txns.end(pid, 0, commit=True) == E.PRODUCER_FENCED


async def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(
    txns: Txns,
) -> None:
    p = await txns.init(timeout=5_000)
    pid = p.producer_id
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE
    await txns.h.advance(4_999)
    assert txns.txn.state is S.ONGOING
    await txns.h.advance(1)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_ABORT and txns.txn.producer_epoch == 1
    assert txns.markers() == [(pid, False)]
    assert await txns.end(pid, 0, commit=True) == E.PRODUCER_FENCED
    # A transaction that ends in time is not aborted by its old timer.
    q = await txns.init(timeout=5_000)
    assert await txns.add(pid, q.producer_epoch, ("t", 0)) == E.NONE
    assert await txns.end(pid, q.producer_epoch, commit=True) == E.NONE
    await txns.h.advance(10_000)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_COMMIT


async def test_a_new_coordinator_finishes_a_prepared_commit_from_the_log(txns: Txns) -> None:
    p = await txns.init()
    pid = p.producer_id
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE
    # The coordinator's markers never get out: it writes PrepareCommit and loses the
    # partition before sending them (here: the markers' partition has no leader yet).
    txns.h.set_partition("t", 0, leader_id=-1)
    assert await txns.end(pid, 0, commit=True) == E.NONE
    await txns.h.settle()
    state = txns.coordinator.state
    epoch = txns.h.partition(TRANSACTION_STATE_TOPIC).leader_epoch
    state.leadership_changed(0, epoch, False)
    assert TXN not in state.transactions
    assert (await txns.init()).error_code == E.NOT_COORDINATOR
    txns.h.set_partition("t", 0, leader_id=0)
    state.leadership_changed(0, epoch + 1, True)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_COMMIT
    assert txns.markers() == [(pid, True)]


async def test_a_load_replays_the_ids_state(txns: Txns) -> None:
    p = await txns.init()
    assert await txns.add(p.producer_id, 0, ("t", 0), ("t", 1)) == E.NONE
    state = txns.coordinator.state
    epoch = txns.h.partition(TRANSACTION_STATE_TOPIC).leader_epoch
    state.leadership_changed(0, epoch, False)
    state.leadership_changed(0, epoch + 1, True)
    assert (await txns.init()).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    await txns.settle()
    loaded = txns.txn
    assert (loaded.producer_id, loaded.producer_epoch, loaded.state) == (
        p.producer_id,
        0,
        S.ONGOING,
    )
    assert loaded.partitions == {("t", 0), ("t", 1)} and loaded.txn_timeout_ms == TIMEOUT


def test_transaction_log_records_read_back_as_written() -> None:
    txn = TransactionMetadata(TXN, 1234, 7, TIMEOUT, 5_000)
    transit = txn.prepare_add_partitions(frozenset({("a", 0), ("a", 3), ("b", 1)}), 6_000)
    assert transaction_log.read_key(transaction_log.key(TXN)) == TXN
    back = transaction_log.read_value(transaction_log.value(transit))
    assert back.producer_id == 1234 and back.producer_epoch == 7
    assert back.state is S.ONGOING and back.partitions == transit.partitions
    assert (back.txn_start_timestamp, back.txn_last_update_timestamp) == (6_000, 6_000)


async def test_a_timeout_during_a_change_being_written_aborts_after_it(txns: Txns) -> None:
    p = await txns.init(timeout=5_000)
    pid = p.producer_id
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE
    # Partitions being added when the timeout fires: the append is held (no ISR ack yet).
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0, 1])
    adding = asyncio.ensure_future(txns.add(pid, 0, ("t", 1)))
    await txns.h.settle()
    assert txns.txn.pending is not None
    await txns.h.advance(5_000)
    assert txns.txn.state is S.ONGOING  # not aborted under the pending change
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0])  # the follower drops out
    await txns.h.advance(100)
    await txns.settle()
    assert adding.done()
    await txns.h.advance(100)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_ABORT and txns.txn.producer_epoch == 1


async def test_a_producer_gone_while_its_end_txn_is_written_still_gets_its_markers(
    txns: Txns,
) -> None:
    # The request is cancelled when its connection closes (a producer killed after
    # sending EndTxn); what it started must finish, as Kafka's append callbacks do.
    p = await txns.init()
    pid = p.producer_id
    assert await txns.add(pid, 0, ("t", 0)) == E.NONE
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0, 1])  # the append is held
    ending = asyncio.ensure_future(txns.end(pid, 0, commit=True))
    await txns.h.settle()
    assert txns.txn.pending is not None
    ending.cancel()
    await txns.h.settle()
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0])  # the follower drops out
    await txns.h.advance(100)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_COMMIT and txns.txn.pending is None
    assert txns.markers("t", 0) == [(pid, True)]
    # The producer's successor is served at once, not CONCURRENT_TRANSACTIONS for ever.
    successor = await txns.init()
    assert (successor.error_code, successor.producer_epoch) == (E.NONE, 1)


async def test_a_producer_gone_while_its_init_or_add_is_written_leaves_no_change_pending(
    txns: Txns,
) -> None:
    p = await txns.init(timeout=5_000)
    pid = p.producer_id
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0, 1])
    adding = asyncio.ensure_future(txns.add(pid, 0, ("t", 0)))
    await txns.h.settle()
    adding.cancel()
    await txns.h.settle()
    txns.h.set_partition(TRANSACTION_STATE_TOPIC, 0, isr=[0])
    await txns.h.advance(100)
    await txns.settle()
    assert txns.txn.state is S.ONGOING and txns.txn.pending is None
    # Its timeout is watched: the transaction is aborted when it passes.
    await txns.h.advance(5_000)
    await txns.settle()
    assert txns.txn.state is S.COMPLETE_ABORT


async def test_a_transactional_id_too_long_for_the_log_is_an_invalid_request(txns: Txns) -> None:
    too_long = "x" * 32768  # a flexible request's compact string may carry it
    result = await txns.coordinator.init_producer_id(too_long, TIMEOUT)
    assert result.error_code == E.INVALID_REQUEST
