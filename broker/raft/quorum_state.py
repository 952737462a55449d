"""QuorumState: which role this member plays in the metadata quorum, in which epoch, and
the rules for moving between roles (Kafka's QuorumState with its EpochState classes).

Roles (a voter may hold any; an observer, a broker that is not a voter, only Unattached
and Follower):

- ``UnattachedState``: no leader known in the epoch; it may have voted in it.
- ``ProspectiveState``: asking the voters whether they would vote for it (KIP-996's
  pre-vote), without changing the epoch: a member cut off from the others cannot raise
  the epoch and depose a healthy leader when it returns.
- ``CandidateState``: the epoch raised by one, voted for itself, asking for votes.
- ``LeaderState``: won the epoch; the only member that appends (``leader_state``).
- ``FollowerState``: knows the epoch's leader and fetches from it.
- ``ResignedState``: led the epoch and gave it up (it lost its majority, or is shutting
  down); it neither appends nor votes in that epoch.

Every transition that changes the epoch, the vote or the leader is written to the store
before it takes effect, so a restarted voter never votes twice in one epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.log_store import ElectionState, LogStore

NO_LEADER = -1


@dataclass
class UnattachedState:
    epoch: int
    voted_id: int = NO_LEADER

    name = "unattached"
    leader_id = NO_LEADER


@dataclass
class ProspectiveState:
    epoch: int
    voted_id: int
    # The leader it followed and lost, if any: others still naming it in this epoch do
    # not send it back to following (they have not noticed yet), as Kafka's
    # ProspectiveState keeps its leader.
    former_leader_id: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    name = "prospective"
    leader_id = NO_LEADER


@dataclass
class CandidateState:
    epoch: int
    retries: int  # elections lost in a row: the backoff before the next grows
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    name = "candidate"
    leader_id = NO_LEADER


@dataclass
class FollowerState:
    epoch: int
    leader_id: int
    voted_id: int = NO_LEADER
    last_fetch_ms: int = -1  # the last successful fetch from the leader

    name = "follower"


@dataclass
class ResignedState:
    epoch: int
    node_id: int

    name = "resigned"

    @property
    def leader_id(self) -> int:
        return self.node_id


EpochState = (
    UnattachedState
    | ProspectiveState
    | CandidateState
    | LeaderState
    | FollowerState
    | ResignedState
)


class QuorumState:
    def __init__(self, node_id: int, voters: frozenset[int], store: LogStore) -> None:
        self.node_id = node_id
        self.voters = voters
        self.store = store
        self.state: EpochState = UnattachedState(0)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def voted_id(self) -> int:
        state = self.state
        if isinstance(state, UnattachedState | ProspectiveState | FollowerState):
            return state.voted_id
        return self.node_id  # candidate, leader, resigned: voted for itself

    def initialize(self, election: ElectionState) -> None:
        """The role after a (re)start, from the election state the store kept: a former
        leader resigns its epoch (it may have lost entries it had not written), a
        follower follows its leader again, a voter keeps its vote."""
        if election.leader_id == self.node_id:
            self.state = ResignedState(election.epoch, self.node_id)
        elif election.leader_id >= 0:
            self.state = FollowerState(election.epoch, election.leader_id, election.voted_id)
        else:
            self.state = UnattachedState(election.epoch, election.voted_id)

    def _persist(self, epoch: int, voted_id: int, leader_id: int) -> None:
        self.store.write_election(ElectionState(epoch, voted_id, leader_id))

    # -- transitions ---------------------------------------------------------------------

    def to_unattached(self, epoch: int) -> UnattachedState:
        """A newer epoch without a known leader (or this one, given up)."""
        voted = self.voted_id if epoch == self.epoch else NO_LEADER
        self._persist(epoch, voted, NO_LEADER)
        self.state = UnattachedState(epoch, voted)
        return self.state

    def to_voted(self, candidate_id: int) -> UnattachedState:
        """Vote for ``candidate_id`` in the current epoch (written before it is answered)."""
        self._persist(self.epoch, candidate_id, NO_LEADER)
        self.state = UnattachedState(self.epoch, candidate_id)
        return self.state

    def to_prospective(self) -> ProspectiveState:
        state = self.state
        leader = state.leader_id if isinstance(state, FollowerState) else NO_LEADER
        self.state = ProspectiveState(self.epoch, self.voted_id, leader, {self.node_id})
        return self.state

    def to_candidate(self, retries: int) -> CandidateState:
        epoch = self.epoch + 1
        self._persist(epoch, self.node_id, NO_LEADER)
        self.state = CandidateState(epoch, retries, {self.node_id})
        return self.state

    def to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        self._persist(self.epoch, self.node_id, self.node_id)
        self.state = LeaderState(self.node_id, self.epoch, epoch_start_offset, self.voters, now_ms)
        return self.state

    def to_follower(self, epoch: int, leader_id: int) -> FollowerState:
        voted = self.voted_id if epoch == self.epoch else NO_LEADER
        self._persist(epoch, voted, leader_id)
        self.state = FollowerState(epoch, leader_id, voted)
        return self.state

    def to_resigned(self) -> ResignedState:
        self.state = ResignedState(self.epoch, self.node_id)
        return self.state
