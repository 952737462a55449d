"""QuorumElections: how the metadata quorum chooses and keeps a leader (KIP-595, KIP-996):
pre-votes and votes, the new leader's BeginQuorumEpoch, a resigning leader's
EndQuorumEpoch, and check-quorum."""

from __future__ import annotations

import asyncio
from typing import Any

from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.quorum_member import QuorumMember
from purgatory.broker.raft.quorum_state import (
    NO_LEADER,
    CandidateState,
    FollowerState,
    ProspectiveState,
    UnattachedState,
)
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode


class QuorumElections(QuorumMember):
    async def resign(self) -> None:
        """A leader stopping on purpose: tell the voters, so one of them takes over at once
        instead of after a fetch timeout (Kafka's EndQuorumEpoch). What it appended is
        first given a request timeout to commit: a broker's controlled shutdown that came
        in as this one stopped is answered, not failed with NOT_CONTROLLER (with two
        brokers stopping together, the other would otherwise retry against a quorum that
        can no longer elect anyone)."""
        if not isinstance(self.quorum.state, LeaderState) or len(self.voters) == 1:
            return
        await self.committed_to_end(self.config.request_timeout_ms)
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return
        successors = sorted(
            (v for v in self.voters if v != self.node_id),
            key=lambda v: -state.voters[v].end_offset,
        )
        request = rm.EndQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch, successors)
        self._change_role(self.quorum.to_resigned)
        sends = [
            asyncio.ensure_future(
                self.channel.send(
                    v, ApiKey.END_QUORUM_EPOCH, request, self.config.retry_backoff_ms * 10
                )
            )
            for v in successors
        ]
        await asyncio.gather(*sends, return_exceptions=True)

    # -- elections -------------------------------------------------------------------------

    def _request_votes(self) -> None:
        state = self.quorum.state
        assert isinstance(state, ProspectiveState | CandidateState)
        pre_vote = isinstance(state, ProspectiveState)
        request = rm.VoteRequest(
            self.cluster_id,
            self.node_id,
            state.epoch + 1 if pre_vote else state.epoch,
            self.log.last_epoch,
            self.log.end_offset,
            pre_vote,
        )
        for voter in sorted(self.voters - {self.node_id}):
            self._send_vote(voter, request)

    def _send_vote(self, voter: int, request: rm.VoteRequest) -> None:
        def answered(result: Any) -> None:
            if isinstance(result, BaseException):
                self._retry_later(lambda: self._send_vote(voter, request))
                return
            self._handle_vote_response(voter, result)

        self._rpc(voter, ApiKey.VOTE, request, answered)

    def _handle_vote_response(self, voter: int, response: rm.VoteResponse) -> None:
        if response.error_code:
            return
        if self._transition_if_newer(response.leader_epoch, response.leader_id):
            return
        state = self.quorum.state
        if not isinstance(state, ProspectiveState | CandidateState):
            return
        (state.granted if response.vote_granted else state.rejected).add(voter)
        if len(state.rejected) > len(self.voters) - self.quorum.majority:
            self._election_lost()  # a majority said no: this election cannot be won
            return
        self._maybe_won()

    def _maybe_won(self) -> None:
        state = self.quorum.state
        if not isinstance(state, ProspectiveState | CandidateState):
            return
        if len(state.granted) < self.quorum.majority:
            return
        if isinstance(state, ProspectiveState):
            self._become_candidate()
        else:
            self._become_leader()

    def handle_vote(self, request: rm.VoteRequest) -> rm.VoteResponse:
        refused = self._refuse_foreign(request.cluster_id)
        if refused is not None:
            return rm.VoteResponse(refused, NO_LEADER, self.epoch, False)
        if not self.quorum.is_voter or request.candidate_id not in self.voters:
            return rm.VoteResponse(
                ErrorCode.INCONSISTENT_VOTER_SET, self.quorum.leader_id, self.epoch, False
            )
        log_ok = (request.last_offset_epoch, request.last_offset) >= (
            self.log.last_epoch,
            self.log.end_offset,
        )
        if request.pre_vote:
            granted = (
                request.candidate_epoch > self.epoch and log_ok and not self._hears_from_leader()
            )
            return rm.VoteResponse(ErrorCode.NONE, self.quorum.leader_id, self.epoch, granted)
        if request.candidate_epoch < self.epoch:
            return rm.VoteResponse(ErrorCode.NONE, self.quorum.leader_id, self.epoch, False)
        if request.candidate_epoch > self.epoch:
            self._change_role(self.quorum.to_unattached, request.candidate_epoch)
        state = self.quorum.state
        granted = self.quorum.voted_id == request.candidate_id
        if (
            not granted
            and isinstance(state, UnattachedState | ProspectiveState)
            and state.voted_id == NO_LEADER
            and log_ok
        ):
            self._change_role(self.quorum.to_voted, request.candidate_id)
            granted = True
        return rm.VoteResponse(ErrorCode.NONE, self.quorum.leader_id, self.epoch, granted)

    def _hears_from_leader(self) -> bool:
        """KIP-996: a voter refuses pre-votes while it is the leader or fetched from one
        within the fetch timeout."""
        state = self.quorum.state
        if isinstance(state, LeaderState):
            return True
        return (
            isinstance(state, FollowerState)
            and state.last_fetch_ms >= 0
            and self.scheduler.now_ms() - state.last_fetch_ms < self.config.fetch_timeout_ms
        )

    # -- a new leader's announcement ---------------------------------------------------------

    def _begin_epoch(self) -> None:
        state = self.quorum.state
        assert isinstance(state, LeaderState)
        request = rm.BeginQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch)
        for voter in sorted(self.voters - {self.node_id}):
            self._send_begin_epoch(voter, request)

    def _send_begin_epoch(self, voter: int, request: rm.BeginQuorumEpochRequest) -> None:
        def answered(result: Any) -> None:
            state = self.quorum.state
            if not isinstance(state, LeaderState) or voter in state.acknowledged:
                return
            if isinstance(result, BaseException) or result.error_code:
                if not isinstance(result, BaseException) and self._transition_if_newer(
                    result.leader_epoch, result.leader_id
                ):
                    return
                self._retry_later(lambda: self._send_begin_epoch(voter, request))
                return
            state.acknowledged.add(voter)

        self._rpc(voter, ApiKey.BEGIN_QUORUM_EPOCH, request, answered)

    def handle_begin_quorum_epoch(
        self, request: rm.BeginQuorumEpochRequest
    ) -> rm.BeginQuorumEpochResponse:
        refused = self._refuse_foreign(request.cluster_id)
        if refused is not None:
            return rm.BeginQuorumEpochResponse(refused, NO_LEADER, self.epoch)
        if request.leader_epoch < self.epoch:
            return rm.BeginQuorumEpochResponse(
                ErrorCode.FENCED_LEADER_EPOCH, self.quorum.leader_id, self.epoch
            )
        state = self.quorum.state
        if not (isinstance(state, FollowerState) and state.leader_id == request.leader_id):
            if isinstance(state, LeaderState) and state.epoch == request.leader_epoch:
                self.logger.error(
                    "two_leaders_in_one_epoch", epoch=state.epoch, other=request.leader_id
                )
            else:
                self._change_role(self.quorum.to_follower, request.leader_epoch, request.leader_id)
        return rm.BeginQuorumEpochResponse(ErrorCode.NONE, self.quorum.leader_id, self.epoch)

    def handle_end_quorum_epoch(
        self, request: rm.EndQuorumEpochRequest
    ) -> rm.EndQuorumEpochResponse:
        refused = self._refuse_foreign(request.cluster_id)
        if refused is not None:
            return rm.EndQuorumEpochResponse(refused, NO_LEADER, self.epoch)
        state = self.quorum.state
        if (
            isinstance(state, FollowerState)
            and state.epoch == request.leader_epoch
            and state.leader_id == request.leader_id
        ):
            self._change_role(self.quorum.to_unattached, state.epoch)
            # The most caught-up successors stand first; the others wait their turn.
            successors = request.preferred_successors
            rank = successors.index(self.node_id) if self.node_id in successors else len(successors)
            self._set_timer(
                rank * self.config.election_timeout_ms // max(len(successors), 1)
                + self.rng.randrange(max(self.config.retry_backoff_ms, 1)),
                self._election_timed_out,
            )
        elif request.leader_epoch > state.epoch:
            self._change_role(self.quorum.to_unattached, request.leader_epoch)
        return rm.EndQuorumEpochResponse(ErrorCode.NONE, self.quorum.leader_id, self.epoch)

    # -- leadership health (check-quorum) --------------------------------------------------------

    def _check_quorum(self) -> None:
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return
        timeout = self._check_quorum_ms()
        now = self.scheduler.now_ms()
        deadline = state.contact_deadline(timeout, self.quorum.majority)
        if deadline <= now:
            self.logger.warning(
                "quorum_leader_resigned",
                epoch=state.epoch,
                reason="no fetch from a majority of voters within 1.5 fetch timeouts",
            )
            self._change_role(self.quorum.to_resigned)
            return
        self._set_timer(deadline - now, self._check_quorum)
