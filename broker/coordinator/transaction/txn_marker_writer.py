"""WriteTxnMarkers at a partition leader (Kafka's handleWriteTxnMarkersRequest): append
each marker to its partitions with acks=-1 and answer once the in-sync replicas hold it;
a committed or aborted transaction's offsets in ``__consumer_offsets`` then become the
group's committed offsets, or are dropped."""

from __future__ import annotations

from collections.abc import Callable

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode

# (__consumer_offsets partition, producer id, committed) once its marker is replicated
OffsetsMarker = Callable[[int, int, bool], None]


class TxnMarkerWriter:
    def __init__(self, replica_manager: ReplicaManager, offsets_marker: OffsetsMarker) -> None:
        self.replica_manager = replica_manager
        self.offsets_marker = offsets_marker

    async def write(self, request: ib.WriteTxnMarkersRequest) -> ib.WriteTxnMarkersResponse:
        entries = [
            ((topic, index), m.producer_id, m.producer_epoch, m.committed, m.coordinator_epoch)
            for m in request.markers
            for topic, index in m.partitions
        ]
        responses, done = self.replica_manager.append_txn_markers(request.timeout_ms, entries)
        if done is not None:
            responses = await done
        errors = iter([response.error for _, response in responses])
        answers: list[tuple[int, list[tuple[str, int, int]]]] = []
        for marker in request.markers:
            results = []
            for topic, index in marker.partitions:
                error = next(errors)
                if error == ErrorCode.NONE and topic == OFFSETS_TOPIC:
                    self.offsets_marker(index, marker.producer_id, marker.committed)
                results.append((topic, index, error))
            answers.append((marker.producer_id, results))
        return ib.WriteTxnMarkersResponse(answers)
