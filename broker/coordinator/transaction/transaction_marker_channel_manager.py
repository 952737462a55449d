"""TransactionMarkerChannelManager: a coordinator's markers reach every partition of a
transaction (Kafka's TransactionMarkerChannelManager).

Markers go, one WriteTxnMarkers per partition leader, over the inter-broker listener (or
straight to this broker's own partitions); a partition whose leader moved, is being
elected or did not answer is tried again after ``RETRY_BACKOFF_MS`` with the leader the
metadata names then, until every partition has its marker. A partition of a deleted topic
needs none. Sending stops when this broker stops coordinating the transaction in the
epoch it started in (the next coordinator sends them again from its loaded state), or a
leader refuses the marker's epochs (a newer coordinator or producer epoch exists).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import structlog

from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]
RETRY_BACKOFF_MS = 50
REQUEST_TIMEOUT_MS = 30000

# (destination node, request, timeout ms) -> its WriteTxnMarkers response
Send = Callable[[int, ib.WriteTxnMarkersRequest, int], Awaitable[ib.WriteTxnMarkersResponse]]
WriteLocally = Callable[[ib.WriteTxnMarkersRequest], Awaitable[ib.WriteTxnMarkersResponse]]

# Errors that end the sending: these markers are of an old coordinator or producer epoch.
_ABANDON = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class TransactionMarkerChannelManager:
    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        send: Send,
        write_locally: WriteLocally,
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.send = send
        self.write_locally = write_locally
        self.in_flight = 0  # transactions whose markers are being sent
        self.log = structlog.get_logger("txn_markers").bind(broker_id=broker_id)

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
        still_coordinator: Callable[[], bool],
    ) -> bool:
        """Until every partition holds the marker: True; False if sending was abandoned."""
        remaining = set(partitions)
        self.in_flight += 1
        try:
            while remaining:
                if not still_coordinator():
                    return False
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in sorted(remaining):
                    if tp[0] not in self.metadata.topics:
                        remaining.discard(tp)  # deleted: nothing to end there
                        continue
                    state = self.metadata.partition(*tp)
                    if state is None:
                        remaining.discard(tp)
                    elif state.leader_id >= 0:
                        by_leader.setdefault(state.leader_id, []).append(tp)
                answers = await asyncio.gather(
                    *(
                        self._write(
                            leader,
                            ib.WritableTxnMarker(
                                producer_id, producer_epoch, commit, coordinator_epoch, tps
                            ),
                        )
                        for leader, tps in by_leader.items()
                    )
                )
                for results in answers:
                    for topic, index, error in results:
                        if error == ErrorCode.NONE:
                            remaining.discard((topic, index))
                        elif error in _ABANDON:
                            self.log.info(
                                "txn_markers_abandoned",
                                producer_id=producer_id,
                                partition=f"{topic}-{index}",
                                error=ErrorCode(error).name,
                            )
                            return False
                if remaining:
                    await asyncio.sleep(RETRY_BACKOFF_MS / 1000)
            return True
        finally:
            self.in_flight -= 1

    async def _write(self, leader: int, marker: ib.WritableTxnMarker) -> list[tuple[str, int, int]]:
        """(topic, partition, error) per partition of ``marker`` sent to ``leader``."""
        request = ib.WriteTxnMarkersRequest([marker], REQUEST_TIMEOUT_MS)
        try:
            if leader == self.broker_id:
                response = await self.write_locally(request)
            else:
                response = await self.send(leader, request, REQUEST_TIMEOUT_MS)
        except (TimeoutError, ConnectionError, KafkaError) as exc:
            self.log.debug("txn_markers_unsent", leader=leader, error=str(exc))
            return [(t, p, ErrorCode.NETWORK_EXCEPTION) for t, p in marker.partitions]
        [(_, results)] = response.markers
        return results
