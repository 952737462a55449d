"""TransactionStateManager: which transactional ids this broker coordinates, their states
read back from ``__transaction_state`` and every change appended to it (Kafka's
TransactionStateManager).

Transactional id T lives in partition hash(T) mod ``transaction.state.log.num.partitions``
and is coordinated by that partition's leader, whose leader epoch is the coordinator
epoch its markers carry (a partition leader refuses markers of an older one). A broker
that becomes leader replays the partition before it answers (COORDINATOR_LOAD_IN_PROGRESS
meanwhile); one that stops leading forgets the partition's ids. A change is appended with
acks=-1 and applied in memory only once the in-sync replicas hold it, and only if this
broker still leads the partition in the same epoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.internal_topics import TRANSACTION_STATE_TOPIC
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.broker.coordinator.transaction import transaction_log
from purgatory.broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from purgatory.broker.purgatory import Scheduler
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import CorruptRecordError, decode_records, encode_batch

_LOAD_BATCH_BYTES = 1 << 20  # replayed per loop turn
APPEND_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms, which its appends here use

# How an append's error reads to a producer (Kafka's appendTransactionToLog).
_APPEND_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class TransactionStateManager:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        on_loaded: Callable[[int, int, list[TransactionMetadata]], None],
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.on_loaded = on_loaded  # (partition, coordinator epoch, its ids): markers to resume
        self.transactions: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}  # partition led and loaded -> its leader epoch
        self.loading: dict[int, int] = {}  # partition being loaded -> its leader epoch
        self.num_partitions = config["transaction.state.log.num.partitions"]
        self.log = structlog.get_logger("transaction_state").bind(broker_id=config.broker_id)

    # -- ownership ------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def ownership_error(self, transactional_id: str) -> int:
        """NONE if this broker coordinates the id now, else why not."""
        p = self.partition_for(transactional_id)
        if p in self.owned:
            return ErrorCode.NONE
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        """The leader epoch of the id's partition while this broker owns it."""
        return self.owned.get(self.partition_for(transactional_id))

    def owned_transactions(self) -> Iterator[TransactionMetadata]:
        return iter(list(self.transactions.values()))

    def leadership_changed(self, index: int, leader_epoch: int, is_leader: bool) -> None:
        """The replica manager's news about a ``__transaction_state`` partition."""
        if is_leader:
            if self.owned.get(index, self.loading.get(index)) == leader_epoch:
                return  # still leading in the same epoch (an ISR change)
            self._unload(index)
            self.loading[index] = leader_epoch
            self.scheduler.call_soon(lambda: self._load(index, leader_epoch, 0, {}))
        elif index in self.owned or index in self.loading:
            self._unload(index)

    def _unload(self, index: int) -> None:
        self.owned.pop(index, None)
        self.loading.pop(index, None)
        for txn in self.owned_transactions():
            if self.partition_for(txn.transactional_id) == index:
                del self.transactions[txn.transactional_id]

    def shutdown(self) -> None:
        for index in list(self.owned) + list(self.loading):
            self._unload(index)

    # -- loading --------------------------------------------------------------------------

    def _load(
        self, index: int, epoch: int, offset: int, states: dict[str, TxnTransitMetadata | None]
    ) -> None:
        """Replay the partition from ``offset`` one chunk at a time, then own its ids."""
        if self.loading.get(index) != epoch:
            return  # leadership moved on meanwhile
        partition = self.replica_manager.partitions.get((TRANSACTION_STATE_TOPIC, index))
        if partition is None or not partition.is_leader:
            self._unload(index)
            return
        log = partition.log
        offset = max(offset, log.local_log_start_offset)
        if offset < log.log_end_offset:
            try:
                records = decode_records(b"".join(log.read(offset, _LOAD_BATCH_BYTES)))
            except CorruptRecordError as exc:
                self.log.error("transaction_state_unreadable", partition=index, error=str(exc))
                records = []
            for record in records:
                try:
                    transactional_id = transaction_log.read_key(record.key or b"")
                    states[transactional_id] = (
                        None if record.value is None else transaction_log.read_value(record.value)
                    )
                except CorruptRecordError as exc:
                    self.log.error(
                        "transaction_record_unreadable", offset=record.offset, error=str(exc)
                    )
            if records:
                next_offset = records[-1].offset + 1
                self.scheduler.call_soon(lambda: self._load(index, epoch, next_offset, states))
                return
        loaded = [
            TransactionMetadata.from_transit(transactional_id, state)
            for transactional_id, state in states.items()
            if state is not None and state.state != TransactionState.DEAD
        ]
        self.loading.pop(index, None)
        self.owned[index] = epoch
        for txn in loaded:
            self.transactions[txn.transactional_id] = txn
        self.log.info("transaction_state_partition_loaded", partition=index, ids=len(loaded))
        self.on_loaded(index, epoch, loaded)

    # -- storing --------------------------------------------------------------------------

    def append(self, txn: TransactionMetadata, transit: TxnTransitMetadata) -> asyncio.Future[int]:
        """Append ``transit`` (prepared on ``txn``) with acks=-1; once the in-sync replicas
        have it, and this broker still coordinates the id in the same epoch, it becomes
        the id's state. The future resolves to NONE, or the error a producer is told (the
        pending change dropped)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        transactional_id = txn.transactional_id
        index = self.partition_for(transactional_id)
        epoch = self.owned.get(index)
        if epoch is None:  # not (or no longer) coordinator of the id
            if txn.pending == transit:
                txn.pending = None
            future.set_result(ErrorCode.NOT_COORDINATOR)
            return future
        record_value = (
            None if transit.state == TransactionState.DEAD else transaction_log.value(transit)
        )
        batch = encode_batch(
            [(transaction_log.key(transactional_id), record_value)],
            timestamp_ms=self.scheduler.wall_ms(),
        )
        responses, done = self.replica_manager.append_records(
            APPEND_TIMEOUT_MS,
            -1,
            [((TRANSACTION_STATE_TOPIC, index), batch)],
            internal_topics_allowed=True,
        )

        def settle(code: int) -> None:
            if future.done():
                return
            if not code and self.owned.get(index) != epoch:
                code = ErrorCode.NOT_COORDINATOR  # it moved while the append waited
            if code:
                if txn.pending == transit:
                    txn.pending = None
                future.set_result(_APPEND_ERRORS.get(code, code))
                return
            if txn.pending == transit:
                txn.complete_transition(transit)
            if transit.state == TransactionState.DEAD:
                self.transactions.pop(transactional_id, None)
            future.set_result(ErrorCode.NONE)

        if done is None:
            settle(responses[0][1].error)
        else:
            done.add_done_callback(lambda d: settle(d.result()[0][1].error))
        return future
