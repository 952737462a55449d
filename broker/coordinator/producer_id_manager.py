"""ProducerIdManager: hands idempotent producers their id and epoch (InitProducerId, on
both protocols)."""

from __future__ import annotations

import time
from typing import NamedTuple

from purgatory.protocol.errors import ErrorCode

_BROKER_BITS = 10  # the low bits of a producer id: the broker that gave it
_MAX_EPOCH = 32766  # Kafka's Short.MaxValue - 1: one more and the id must change


class ProducerIdAndEpoch(NamedTuple):
    error_code: int
    producer_id: int
    producer_epoch: int


class ProducerIdManager:
    """Producer ids unique across the cluster and across restarts, without asking the
    controller (Kafka allocates blocks of them through it): the id is a millisecond
    timestamp (never reused: at least one more than the last) above the broker id's 10
    bits. A restarted broker starts from the clock, after every id it gave before."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id % (1 << _BROKER_BITS)
        self.last = 0

    def next_id(self) -> int:
        self.last = max(self.last + 1, int(time.time() * 1000))
        return (self.last << _BROKER_BITS) | self.broker_id

    def init_producer_id(
        self, transactional_id: str | None, producer_id: int = -1, producer_epoch: int = -1
    ) -> ProducerIdAndEpoch:
        """A new id at epoch 0; or, for a producer that gives its current id and epoch
        (KIP-360: it lost track of its sequences), the same id at the next epoch, which
        fences the old epoch and restarts its sequences at 0. Transactions are not served."""
        if transactional_id is not None:
            return ProducerIdAndEpoch(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
        if producer_id >= 0 and 0 <= producer_epoch < _MAX_EPOCH:
            return ProducerIdAndEpoch(ErrorCode.NONE, producer_id, producer_epoch + 1)
        return ProducerIdAndEpoch(ErrorCode.NONE, self.next_id(), 0)
