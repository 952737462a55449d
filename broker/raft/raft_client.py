"""What a member of the metadata quorum offers the metadata layer and needs from the
network (Kafka's RaftClient interface and its LeaderAndEpoch)."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from purgatory.broker.raft.log_store import Snapshot
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

LEADER_CHANGE = b"\x00"  # the leader's first entry of its epoch (Kafka's LeaderChangeMessage)


class LeaderAndEpoch(NamedTuple):
    leader_id: int  # -1: none known
    epoch: int


class RaftListener(Protocol):
    """What the quorum tells the metadata layer, always in log order."""

    def handle_commit(self, entries: list[rm.RaftEntry]) -> None: ...

    def handle_load_snapshot(self, snapshot: Snapshot) -> None: ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...

    def snapshot_records(self) -> list[bytes]: ...


class RaftChannel(Protocol):
    """How a member reaches another (the network, or a simulated one)."""

    async def send(self, destination: int, key: ApiKey, request: Any, timeout_ms: int) -> Any: ...


class NotLeader(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)
