"""TransactionCoordinator: transactional producers' ids, epochs and transactions (Kafka's
TransactionCoordinator, transaction version 1).

- InitProducerId with a transactional id gives the id's producer id at the next epoch
  (a new id once the epoch is exhausted), which fences every older producer of the id; a
  transaction left open by one is aborted first (the answer meanwhile:
  CONCURRENT_TRANSACTIONS, and the client retries).
- AddPartitionsToTxn and AddOffsetsToTxn start the transaction or add to it.
- EndTxn writes PrepareCommit or PrepareAbort and answers; the markers then go to every
  partition of the transaction, and CompleteCommit or CompleteAbort is written after them.
- A transaction open past its timeout is aborted with a bumped epoch (its producer fenced);
  each one's timeout is a ``DelayedTxnTimeout`` in the "TransactionTimeout" purgatory.
- A coordinator that takes over a partition of ``__transaction_state`` sends again the
  markers of every transaction it finds prepared, so none ends half done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NamedTuple

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.internal_topics import TRANSACTION_STATE_TOPIC
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.producer_id_manager import ProducerIdManager
from purgatory.broker.coordinator.transaction.delayed_txn_timeout import DelayedTxnTimeout
from purgatory.broker.coordinator.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from purgatory.broker.coordinator.transaction.transaction_metadata import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from purgatory.broker.coordinator.transaction.transaction_state_manager import (
    TransactionStateManager,
)
from purgatory.broker.purgatory import (
    DelayedOperationPurgatory,
    Periodic,
    Scheduler,
    SystemTimer,
)
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.common.histogram import Histogram
from purgatory.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
_COMPLETE_RETRY_MS = 100
# A transactional id's bytes in __transaction_state's key (an int16 length, as Kafka's); a
# flexible request's compact string could carry more.
MAX_ID_BYTES = 32767


class InitProducerIdResult(NamedTuple):
    error_code: int
    producer_id: int
    producer_epoch: int


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        metadata: MetadataCache,
        scheduler: Scheduler,
        producer_ids: ProducerIdManager,
        markers: TransactionMarkerChannelManager,
        create_topic: Callable[[], None],
        spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.scheduler = scheduler
        self.producer_ids = producer_ids
        self.markers = markers
        self.create_topic = create_topic
        self.spawn = spawn
        self.state = TransactionStateManager(config, replica_manager, scheduler, self._loaded)
        replica_manager.leadership_listeners.append(self._leadership)
        self.timeouts: DelayedOperationPurgatory[DelayedTxnTimeout] = DelayedOperationPurgatory(
            "TransactionTimeout", SystemTimer(scheduler)
        )
        self.expiration = Periodic(
            scheduler,
            lambda: config["transaction.remove.expired.transaction.cleanup.interval.ms"],
            self.remove_expired_transactional_ids,
        )
        self.ended = {"commit": 0, "abort": 0}  # transactions completed here, by outcome
        self.timed_out = 0
        self.completion = {"commit": Histogram(), "abort": Histogram()}  # prepare -> complete
        self.log = structlog.get_logger("txn_coordinator").bind(broker_id=config.broker_id)

    def start(self) -> None:
        self.expiration.start()

    def shutdown(self) -> None:
        self.expiration.cancel()
        self.timeouts.cancel_all()
        self.state.shutdown()

    def _now(self) -> int:
        return self.scheduler.wall_ms()

    def _leadership(self, key: TopicPartition, leader_epoch: int, leads: bool) -> None:
        if key[0] == TRANSACTION_STATE_TOPIC:
            self.state.leadership_changed(key[1], leader_epoch, leads)

    # -- where transactional ids live ----------------------------------------------------

    def find_coordinator(self, transactional_id: str) -> tuple[int, int]:
        """(error, broker id) of the id's coordinator: the leader of its partition of
        ``__transaction_state``, which is created on the first ask."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1
        return self.metadata.coordinator_of(
            TRANSACTION_STATE_TOPIC, self.state.partition_for(transactional_id), self.create_topic
        )

    def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata | int:
        """The id's metadata if the producer is its current one, else the error."""
        error = self.state.ownership_error(transactional_id)
        if error:
            return error
        txn = self.state.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return txn

    # -- InitProducerId ------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitProducerIdResult:
        if transactional_id is None:  # an idempotent producer: the id manager's
            return InitProducerIdResult(*self.producer_ids.init_producer_id(None))
        if not transactional_id or len(transactional_id.encode()) > MAX_ID_BYTES:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST, -1, -1)
        if not 0 < timeout_ms <= self.config["transaction.max.timeout.ms"]:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1)
        error = self.state.ownership_error(transactional_id)
        if error:
            return InitProducerIdResult(error, -1, -1)
        txn = self.state.transactions.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(
                transactional_id,
                self.producer_ids.next_id(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                self._now(),
            )
            self.state.transactions[transactional_id] = txn
        if txn.pending is not None:
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
        if producer_id >= 0:  # KIP-360: the producer says which id and epoch it has
            if (producer_id, producer_epoch) == (txn.last_producer_id, txn.producer_epoch) or (
                producer_id == txn.producer_id and producer_epoch == txn.last_producer_epoch
            ):  # a retry of the bump it already got
                return InitProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)
            if (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                return InitProducerIdResult(ErrorCode.PRODUCER_FENCED, -1, -1)
        if txn.state == TransactionState.ONGOING:
            # A new producer of the id: abort the old one's transaction, fencing its epoch.
            self.spawn(self._abort(txn, fence=True))
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
        if txn.state not in (TransactionState.EMPTY, *COMPLETED):
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
        if txn.epoch_exhausted:
            transit = txn.prepare_incomplete_transition(
                self._now(),
                new_epoch=0,
                new_producer_id=self.producer_ids.next_id(),
                timeout_ms=timeout_ms,
            )
        else:
            transit = txn.prepare_incomplete_transition(
                self._now(),
                new_epoch=txn.producer_epoch + 1,
                new_producer_id=None,
                timeout_ms=timeout_ms,
            )
        # Shielded: the client going away (its request cancelled) must not leave the
        # change half made (txn.pending for ever: CONCURRENT_TRANSACTIONS to every call).
        error = await asyncio.shield(self.state.append(txn, transit))
        if error:
            return InitProducerIdResult(error, -1, -1)
        return InitProducerIdResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)

    # -- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> int:
        found = self._current(transactional_id, producer_id, producer_epoch)
        if isinstance(found, int):
            return found
        txn = found
        if txn.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state == TransactionState.ONGOING and partitions <= txn.partitions:
            return ErrorCode.NONE
        starts = txn.state != TransactionState.ONGOING
        transit = txn.prepare_add_partitions(partitions, self._now())
        return await self._carried_on(self._add_partitions(txn, transit, starts))

    async def _add_partitions(
        self, txn: TransactionMetadata, transit: TxnTransitMetadata, starts: bool
    ) -> int:
        error = await self.state.append(txn, transit)
        if not error and starts:
            self._watch_timeout(txn)
        return error

    def _carried_on(self, work: Coroutine[Any, Any, int]) -> Awaitable[int]:
        """``work`` (a change written, then what follows it) as the coordinator's own task:
        a request is cancelled when its client goes away, but what it started carries on,
        as Kafka's append callbacks do. Else a producer killed while its EndTxn is being
        written leaves the transaction in Prepare* for ever (no markers, every later
        InitProducerId answered CONCURRENT_TRANSACTIONS), or one killed while its
        AddPartitionsToTxn is written leaves an open transaction no timeout aborts."""
        return asyncio.shield(self.spawn(work))

    def _watch_timeout(self, txn: TransactionMetadata) -> None:
        operation = DelayedTxnTimeout(self, txn, txn.txn_start_timestamp)
        self.timeouts.try_complete_else_watch(operation, (txn.transactional_id,))

    # -- EndTxn --------------------------------------------------------------------------

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        found = self._current(transactional_id, producer_id, producer_epoch)
        if isinstance(found, int):
            return found
        txn = found
        state = txn.state
        if state == TransactionState.ONGOING:
            transit = txn.prepare_abort_or_commit(commit, self._now())
            return await self._carried_on(self._prepare_end(txn, transit))
        finished = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        finishing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state == finished:
            return ErrorCode.NONE  # a retry of an EndTxn that was done
        if state == finishing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_end(self, txn: TransactionMetadata, transit: TxnTransitMetadata) -> int:
        """PrepareCommit or PrepareAbort written, then the markers sent."""
        error = await self.state.append(txn, transit)
        if not error:
            self.timeouts.check_and_complete(txn.transactional_id)
            self._send_markers(txn)
        return error

    async def _abort(self, txn: TransactionMetadata, *, fence: bool) -> None:
        """The coordinator aborts on its own (timed out, or a new producer of the id)."""
        if txn.state != TransactionState.ONGOING:
            return
        if txn.pending is not None:  # a change being written (partitions added): after it
            self.scheduler.call_at(
                self.scheduler.now_ms() + _COMPLETE_RETRY_MS,
                lambda: self._abort_if_current(txn, fence),
            )
            return
        transit = txn.prepare_abort_or_commit(False, self._now(), fence=fence)
        error = await self.state.append(txn, transit)
        if error:
            self.log.info(
                "txn_abort_not_written",
                transactional_id=txn.transactional_id,
                error=ErrorCode(error).name,
            )
            return
        self.log.info(
            "txn_aborted_by_coordinator",
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
        )
        self.timeouts.check_and_complete(txn.transactional_id)
        self._send_markers(txn)

    def _abort_if_current(self, txn: TransactionMetadata, fence: bool) -> None:
        if self.state.transactions.get(txn.transactional_id) is txn:
            self.spawn(self._abort(txn, fence=fence))

    def abort_timed_out(self, txn: TransactionMetadata) -> None:
        """A transaction's timeout passed while it was still open."""
        if self.state.transactions.get(txn.transactional_id) is txn:
            self.timed_out += 1
            self.spawn(self._abort(txn, fence=True))

    # -- markers -------------------------------------------------------------------------

    def _send_markers(self, txn: TransactionMetadata) -> None:
        epoch = self.state.coordinator_epoch(txn.transactional_id)
        if epoch is not None:
            self.spawn(self._complete(txn, epoch))

    async def _complete(self, txn: TransactionMetadata, coordinator_epoch: int) -> None:
        """Write the markers of a prepared transaction, then its CompleteCommit or
        CompleteAbort (retried while this broker still coordinates it)."""
        transactional_id = txn.transactional_id

        def still_coordinator() -> bool:
            return (
                self.state.coordinator_epoch(transactional_id) == coordinator_epoch
                and self.state.transactions.get(transactional_id) is txn
            )

        commit = txn.state == TransactionState.PREPARE_COMMIT
        started = self.scheduler.precise_s()
        written = await self.markers.write_markers(
            txn.producer_id,
            txn.producer_epoch,
            commit,
            coordinator_epoch,
            txn.partitions,
            still_coordinator,
        )
        while written and still_coordinator():
            if txn.pending is None:
                error = await self.state.append(txn, txn.prepare_complete(self._now()))
                if not error:
                    outcome = "commit" if commit else "abort"
                    self.ended[outcome] += 1
                    self.completion[outcome].observe(self.scheduler.precise_s() - started)
                    return
            await asyncio.sleep(_COMPLETE_RETRY_MS / 1000)

    def _loaded(
        self, index: int, coordinator_epoch: int, loaded: list[TransactionMetadata]
    ) -> None:
        """A partition taken over: finish what its last coordinator left prepared, and
        time the open transactions again."""
        for txn in loaded:
            if txn.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                self.spawn(self._complete(txn, coordinator_epoch))
            elif txn.state == TransactionState.ONGOING:
                self._watch_timeout(txn)

    # -- expiration ----------------------------------------------------------------------

    def remove_expired_transactional_ids(self) -> None:
        """Forget ids unused for ``transactional.id.expiration.ms`` with nothing in flight."""
        horizon = self._now() - self.config["transactional.id.expiration.ms"]
        for txn in self.state.owned_transactions():
            if (
                txn.pending is None
                and txn.state in (TransactionState.EMPTY, *COMPLETED)
                and txn.txn_last_update_timestamp <= horizon
            ):
                self.state.append(txn, txn.prepare_dead())
