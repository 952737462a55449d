"""LeaderState: what the quorum's leader knows of each replica in its epoch (Kafka's
LeaderState): how far each voter's log reaches, when each last fetched, the high
watermark that follows from them, and whether a majority still hears from it.

Invariants: a voter's ``end_offset`` is -1 until it fetches in this epoch (a fetch at
offset N says it holds everything below N); the high watermark is the largest offset
below which a majority of voters (the leader included) hold every entry, and it moves
only once that includes the leader's first entry of this epoch (``epoch_start_offset``):
entries of earlier epochs are committed by committing one of this epoch, never by
counting their copies (Raft's rule, the reason for the leader's first entry).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReplicaProgress:
    end_offset: int = -1  # the replica's log end, as its latest fetch told
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1  # it had everything the leader had at this time
    applied_offset: int = -1  # the high watermark it reported having applied


class LeaderState:
    name = "leader"

    def __init__(
        self,
        node_id: int,
        epoch: int,
        epoch_start_offset: int,
        voters: frozenset[int],
        now_ms: int,
    ) -> None:
        self.node_id = node_id
        self.epoch = epoch
        self.epoch_start_offset = epoch_start_offset
        self.voters = {v: ReplicaProgress() for v in sorted(voters)}
        self.observers: dict[int, ReplicaProgress] = {}
        self.high_watermark = -1
        self.acknowledged: set[int] = {node_id}  # voters known to know this leadership
        self.announced = False  # the listener was told this node leads (once committed)
        self.elected_ms = now_ms
        if node_id in self.voters:
            self.voters[node_id].last_fetch_ms = now_ms

    @property
    def leader_id(self) -> int:
        return self.node_id

    @property
    def voted_id(self) -> int:
        return self.node_id

    def replica(self, replica_id: int) -> ReplicaProgress:
        """A voter's progress, or an observer's (seen first now)."""
        progress = self.voters.get(replica_id)
        if progress is None:
            progress = self.observers.setdefault(replica_id, ReplicaProgress())
        return progress

    def update_local(self, end_offset: int, now_ms: int) -> bool:
        """The leader's own log reaches ``end_offset`` (written); True if the high
        watermark moved."""
        own = self.voters.get(self.node_id)
        if own is None:
            return False
        own.end_offset = end_offset
        own.last_fetch_ms = own.last_caught_up_ms = now_ms
        return self._advance()

    def update_replica(
        self,
        replica_id: int,
        fetch_offset: int,
        applied_offset: int,
        leader_end_offset: int,
        now_ms: int,
    ) -> bool:
        """A replica fetched at ``fetch_offset``; True if the high watermark moved."""
        progress = self.replica(replica_id)
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_ms = now_ms
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.applied_offset = applied_offset
        if replica_id in self.voters:
            self.acknowledged.add(replica_id)
            return self._advance()
        return False

    def _advance(self) -> bool:
        ends = sorted((p.end_offset for p in self.voters.values()), reverse=True)
        candidate = ends[len(ends) // 2]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def voters_in_contact(self, now_ms: int, timeout_ms: int) -> int:
        """Voters (this leader included) that fetched within ``timeout_ms`` (a voter has
        that long from the election to fetch a first time)."""
        return sum(
            1
            for v, p in self.voters.items()
            if v == self.node_id or now_ms - max(p.last_fetch_ms, self.elected_ms) < timeout_ms
        )

    def contact_deadline(self, timeout_ms: int, majority: int) -> int:
        """When, without another fetch, fewer than a majority would still be in contact:
        the ``majority``-th latest fetch (the leader's own being now) plus the timeout."""
        times = sorted(
            (p.last_fetch_ms for v, p in self.voters.items() if v != self.node_id),
            reverse=True,
        )
        needed = majority - (1 if self.node_id in self.voters else 0)
        if needed <= 0:
            return 2**62  # a quorum of one: it never loses its majority
        latest = times[needed - 1] if len(times) >= needed else -1
        return max(latest, self.elected_ms) + timeout_ms
