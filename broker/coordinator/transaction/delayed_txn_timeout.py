"""DelayedTxnTimeout: an open transaction's ``transaction.timeout.ms``, waiting in the
"TransactionTimeout" purgatory, watched on its transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from purgatory.broker.coordinator.transaction.transaction_metadata import TransactionState
from purgatory.broker.purgatory import DelayedOperation

if TYPE_CHECKING:
    from purgatory.broker.coordinator.transaction.transaction_coordinator import (
        TransactionCoordinator,
    )
    from purgatory.broker.coordinator.transaction.transaction_metadata import (
        TransactionMetadata,
    )


class DelayedTxnTimeout(DelayedOperation):
    """The transaction ``txn`` began at ``started`` (ms). It completes when:

    A. the transaction ended (EndTxn, or an abort by the coordinator), or another began;
    B. this broker no longer coordinates the id (the next coordinator times it again);
    C. its timeout passes first: the coordinator aborts it, fencing the producer.
    """

    __slots__ = ("coordinator", "started", "txn")

    def __init__(
        self, coordinator: TransactionCoordinator, txn: TransactionMetadata, started: int
    ) -> None:
        remaining = started + txn.txn_timeout_ms - coordinator.scheduler.wall_ms()
        super().__init__(max(remaining, 0))
        self.coordinator = coordinator
        self.txn = txn
        self.started = started

    def _over(self) -> bool:
        txn = self.txn
        return (
            txn.state != TransactionState.ONGOING
            or txn.txn_start_timestamp != self.started
            or self.coordinator.state.transactions.get(txn.transactional_id) is not txn
        )

    def try_complete(self) -> bool:  # cases A and B
        return self._over() and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:  # case C
        if not self._over():
            self.coordinator.abort_timed_out(self.txn)
