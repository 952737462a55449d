"""MetadataLoader: the metadata quorum's listener on every member (Kafka's MetadataLoader).
It replays committed records, and only committed ones, into the next image, hands each
image to the publishers (this broker's cache and replicas), and makes the member's
controller active or standby as the quorum's leadership moves."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from purgatory.broker.controller.quorum_controller import QuorumController
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import decode_record, encode_record
from purgatory.broker.raft.log_store import Snapshot
from purgatory.broker.raft.raft_client import LeaderAndEpoch
from purgatory.protocol.raft_messages import RaftEntry

# A new image and the topics changed since the last (None: all of them, a snapshot).
Publisher = Callable[[MetadataImage, "set[str] | None"], None]


class MetadataLoader:
    def __init__(
        self,
        node_id: int,
        controller: QuorumController | None,
        former_leader: Callable[[], tuple[int, int] | None],
        publish: Publisher,
        leader_changed: Callable[[LeaderAndEpoch], None],
    ) -> None:
        self.node_id = node_id
        self.controller = controller
        self.former_leader = former_leader
        self.publish = publish
        self.leader_changed = leader_changed
        self.image = MetadataImage()
        self.leader = LeaderAndEpoch(-1, 0)
        self.log = structlog.get_logger("metadata_loader").bind(broker_id=node_id)

    def handle_commit(self, entries: list[RaftEntry]) -> None:
        delta = MetadataDelta(self.image)
        for entry in entries:
            record = decode_record(entry.data)
            if record is not None:
                delta.replay(record, entry.offset)
            else:
                delta.offset = entry.offset
        self.image = delta.apply()
        self.publish(self.image, delta.changed_topics)
        if self.controller is not None:
            self.controller.committed(self.image.offset)

    def handle_load_snapshot(self, snapshot: Snapshot) -> None:
        delta = MetadataDelta(MetadataImage())
        for data in snapshot.records:
            record = decode_record(data)
            if record is not None:
                delta.replay(record, snapshot.end_offset - 1)
        delta.offset = snapshot.end_offset - 1
        self.image = delta.apply()
        self.log.info("metadata_snapshot_loaded", offset=self.image.offset)
        self.publish(self.image, None)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        controller = self.controller
        if controller is not None:
            if leader.leader_id == self.node_id:
                controller.activate(leader.epoch, self.image, self.former_leader())
            else:
                controller.deactivate()
        self.leader_changed(leader)

    def snapshot_records(self) -> list[bytes]:
        return [encode_record(r) for r in self.image.records()]
