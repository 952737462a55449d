"""One transactional id's state (Kafka's TransactionMetadata and TransactionState).

A transactional id has one producer id and epoch at a time and at most one transaction in
flight. The coordinator changes it in two steps, as Kafka does: it prepares the next
state (``prepare_*``, which sets ``pending``), appends that state to
``__transaction_state``, and only once the in-sync replicas have it applies it
(``complete_transition``); while a change is pending, every other request for the id is
answered CONCURRENT_TRANSACTIONS. Nothing here reads a clock: callers pass ``now_ms``.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32766  # Short.MaxValue - 1: one more bump and the id must change


class TransactionState(enum.IntEnum):
    """Kafka's states, with the ids its ``__transaction_state`` records carry."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """As DescribeTransactions and ListTransactions name it (``CompleteCommit``)."""
        return "".join(w.capitalize() for w in self.name.split("_"))


# Which state each may follow (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: frozenset(
        {
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        }
    ),
    TransactionState.ONGOING: frozenset(
        {
            TransactionState.ONGOING,
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        }
    ),
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    TransactionState.PREPARE_ABORT: frozenset(
        {TransactionState.ONGOING, TransactionState.PREPARE_EPOCH_FENCE}
    ),
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: frozenset(
        {
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        }
    ),
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.ONGOING}),
}

COMPLETED = frozenset({TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})


class TxnTransitMetadata(NamedTuple):
    """The state a transactional id is about to have: what is appended to the log."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class TransactionMetadata:
    __slots__ = (
        "last_producer_epoch",
        "last_producer_id",
        "partitions",
        "pending",
        "producer_epoch",
        "producer_id",
        "state",
        "transactional_id",
        "txn_last_update_timestamp",
        "txn_start_timestamp",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        now_ms: int,
        *,
        state: TransactionState = TransactionState.EMPTY,
        last_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        partitions: frozenset[TopicPartition] = frozenset(),
        txn_start_timestamp: int = -1,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions = partitions
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = now_ms
        self.pending: TxnTransitMetadata | None = None

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransitMetadata) -> TransactionMetadata:
        """The state a loaded (or appended) record describes."""
        metadata = cls(transactional_id, t.producer_id, t.producer_epoch, t.txn_timeout_ms, 0)
        metadata.apply(t)
        return metadata

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, {self.state.name}, {sorted(self.partitions)})"
        )

    # -- questions ----------------------------------------------------------------------

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    def current(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            self.partitions,
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    # -- preparing a change (Kafka's prepare* methods) ------------------------------------

    def _transit(self, **changes: object) -> TxnTransitMetadata:
        transit = self.current()._replace(**changes)  # type: ignore[arg-type]
        if self.state not in VALID_PREVIOUS[transit.state]:
            raise IllegalStateTransition(self, transit.state)
        self.pending = transit
        return transit

    def prepare_incomplete_transition(
        self, now_ms: int, *, new_epoch: int, new_producer_id: int | None, timeout_ms: int
    ) -> TxnTransitMetadata:
        """InitProducerId: the id at a new epoch (or a new id at epoch 0), no transaction."""
        if new_producer_id is None:
            return self._transit(
                producer_epoch=new_epoch,
                last_producer_epoch=self.producer_epoch,
                txn_timeout_ms=timeout_ms,
                state=TransactionState.EMPTY,
                partitions=frozenset(),
                txn_start_timestamp=-1,
                txn_last_update_timestamp=now_ms,
            )
        return self._transit(
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=new_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=timeout_ms,
            state=TransactionState.EMPTY,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now_ms: int
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn (and AddOffsetsToTxn): the transaction starts, or grows."""
        starts = self.state in (TransactionState.EMPTY, *COMPLETED)
        return self._transit(
            state=TransactionState.ONGOING,
            partitions=(frozenset() if starts else self.partitions) | partitions,
            txn_start_timestamp=now_ms if starts else self.txn_start_timestamp,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_abort_or_commit(
        self, commit: bool, now_ms: int, *, fence: bool = False
    ) -> TxnTransitMetadata:
        """EndTxn: PrepareCommit or PrepareAbort. ``fence``: the coordinator aborts on its
        own (the transaction timed out, or a new producer of the id came), bumping the
        epoch first so that the old producer is fenced (Kafka's prepareFenceProducerEpoch
        and the abort after it, in one step here); an exhausted epoch stays as it is, and
        the next InitProducerId changes the id."""
        state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if not fence:
            return self._transit(state=state, txn_last_update_timestamp=now_ms)
        bumped = self.producer_epoch if self.epoch_exhausted else self.producer_epoch + 1
        return self._transit(
            state=state,
            producer_epoch=bumped,
            last_producer_epoch=self.producer_epoch,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """The markers are written: the transaction is complete, its partitions forgotten."""
        state = (
            TransactionState.COMPLETE_COMMIT
            if self.state == TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        return self._transit(state=state, partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """The id expired: a tombstone forgets it."""
        return self._transit(state=TransactionState.DEAD, partitions=frozenset())

    # -- applying it ----------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The log holds ``transit``: it is the state now."""
        if self.pending != transit:
            raise IllegalStateTransition(self, transit.state)
        self.pending = None
        self.apply(transit)

    def apply(self, t: TxnTransitMetadata) -> None:
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = t.partitions
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp


class IllegalStateTransition(Exception):
    def __init__(self, metadata: TransactionMetadata, target: TransactionState) -> None:
        super().__init__(
            f"transactional id {metadata.transactional_id!r} cannot go from "
            f"{metadata.state.name} to {target.name}"
            + (" (another change is pending)" if metadata.pending else "")
        )
