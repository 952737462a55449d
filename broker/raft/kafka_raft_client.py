"""KafkaRaftClient: one member of the metadata quorum (Kafka's KafkaRaftClient, KIP-595,
with KIP-996's pre-vote and check-quorum).

It keeps the log (``RaftLog``), plays its role (``QuorumState``) and tells a listener, in
order, which entries are committed and who leads. The rules:

- A voter that hears from no leader for ``controller.quorum.fetch.timeout.ms`` (or, with
  none known, for a random election timeout) first asks the voters whether they would
  vote for it (pre-vote); only with a majority of yeses does it raise the epoch and ask
  for votes. A voter grants one vote per epoch, to a candidate whose log is at least as
  up to date as its own, and refuses a pre-vote while it still hears from a leader.
- The winner appends an entry of its own epoch, tells the voters (BeginQuorumEpoch), and
  answers their fetches. An entry is committed once a majority of voters hold it and
  the leader's first entry of its epoch (the high watermark); only committed entries
  reach the listener, and the leader tells the listener it leads only once everything
  before its epoch is committed.
- A leader that does not hear from a majority within 1.5 fetch timeouts resigns
  (check-quorum): cut off, it stops acting before a new leader can be elected elsewhere.
- A fetch names the fetcher's position (offset, and the epoch of its last entry); the
  leader answers with entries, or where the fetcher's log diverges (it truncates and
  fetches again), or the snapshot to fetch when it is behind the log start. Fetches that
  find nothing new wait in the Fetch purgatory (``DelayedRaftFetch``).
- A request or answer from a later epoch moves a member to that epoch at once.

Everything runs on one event loop: transitions are plain method calls; network requests
are tasks whose answers are dropped if the role changed meanwhile (``_generation``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import structlog

from purgatory.broker.purgatory import DelayedOperationPurgatory, Scheduler
from purgatory.broker.purgatory.clock import Cancellable
from purgatory.broker.raft.delayed_raft_fetch import METADATA_PARTITION, DelayedRaftFetch
from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.log_store import LogStore, Snapshot
from purgatory.broker.raft.quorum_state import (
    NO_LEADER,
    CandidateState,
    FollowerState,
    ProspectiveState,
    QuorumState,
    ResignedState,
    UnattachedState,
)
from purgatory.broker.raft.raft_log import NO_EPOCH, CorruptLog, Diverging, RaftLog, SnapshotNeeded
from purgatory.broker.raft.raft_metrics import RaftMetrics
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

LEADER_CHANGE = b"\x00"  # the leader's first entry of its epoch (Kafka's LeaderChangeMessage)


@dataclass(frozen=True)
class QuorumConfig:
    """Kafka's ``controller.quorum.*`` timings, in milliseconds."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 << 20
    snapshot_bytes: int = 20 << 20  # metadata.log.max.record.bytes.between.snapshots


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


class KafkaRaftClient:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        cluster_id: str,
        store: LogStore,
        scheduler: Scheduler,
        channel: RaftChannel,
        purgatory: DelayedOperationPurgatory[Any],
        config: QuorumConfig,
        listener: RaftListener,
        rng: random.Random | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.cluster_id = cluster_id
        self.store = store
        self.scheduler = scheduler
        self.channel = channel
        self.purgatory = purgatory
        self.config = config
        self.listener = listener
        self.rng = rng or random.Random()
        loaded = store.load()
        self._loaded_election = loaded.election
        self.log = RaftLog(store, loaded)
        self.quorum = QuorumState(node_id, voters, store)
        self.high_watermark = 0  # every entry below it is committed, as this member knows
        self._listener_offset = 0  # the next offset the listener is to be given
        self._firing = False
        self._notified: LeaderAndEpoch | None = None
        self._timer: Cancellable | None = None
        self._generation = 0  # grows with every role change: older answers are dropped
        self._inflight: set[asyncio.Future[Any]] = set()
        self._closed = False
        self._first_timeout = True
        self._election_retries = 0  # elections lost in a row: the next backoff grows
        self._retries: set[Cancellable] = set()  # pending retries of this role's requests
        self.metrics = RaftMetrics()
        # The leader this member stopped hearing from (a fetch timeout), and when it was
        # last known up: a new active controller counts that broker's session from then.
        # None while it follows a leader.
        self.former_leader: tuple[int, int] | None = None
        self.on_fetch: Callable[[], None] | None = None  # the active controller's hook
        self.truncations_below_high_watermark = 0  # must stay 0: the safety net's count
        self.logger = structlog.get_logger("raft").bind(broker_id=node_id)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        snapshot = self.log.snapshot
        if snapshot is not None:
            self.high_watermark = self._listener_offset = snapshot.end_offset
            self.listener.handle_load_snapshot(snapshot)
        self.quorum.initialize(self._loaded_election)
        self._enter_role()
        if self.quorum.is_voter and self.voters == {self.node_id}:
            self._become_candidate()  # a quorum of one elects itself at once

    async def close(self) -> None:
        self._closed = True
        self._leave_role()
        self.store.close()

    async def resign(self) -> None:
        """A leader stopping on purpose: tell the voters, so one of them takes over at once
        instead of after a fetch timeout (Kafka's EndQuorumEpoch)."""
        state = self.quorum.state
        if not isinstance(state, LeaderState) or len(self.voters) == 1:
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

    # -- what others read ------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.quorum.leader_id, self.quorum.epoch)

    def is_active_leader(self, epoch: int | None = None) -> bool:
        """This member leads (in ``epoch``, if given) and everything before its epoch is
        committed: the controller may act."""
        state = self.quorum.state
        return (
            isinstance(state, LeaderState)
            and state.announced
            and (epoch is None or state.epoch == epoch)
        )

    # -- the leader's appends ----------------------------------------------------------------

    def append(self, epoch: int, records: list[bytes]) -> int:
        """Append ``records`` as the leader of ``epoch``; the offset of the last one. Raises
        NotLeader when this member does not lead that epoch (any more)."""
        state = self.quorum.state
        if not isinstance(state, LeaderState) or state.epoch != epoch:
            raise NotLeader(f"node {self.node_id} does not lead epoch {epoch}")
        entries = self.log.append_as_leader(epoch, records)
        now = self.scheduler.now_ms()
        self.metrics.appended(entries[-1].offset, self.scheduler.precise_s())
        if state.update_local(self.log.end_offset, now):
            self._set_high_watermark(state.high_watermark)
        self.purgatory.check_and_complete(METADATA_PARTITION)
        return entries[-1].offset

    # -- roles ---------------------------------------------------------------------------

    def _change_role(self, transition: Callable[..., Any], *args: Any) -> None:
        was_leader = isinstance(self.quorum.state, LeaderState)
        self._leave_role()
        transition(*args)
        if was_leader:
            # Fetches parked on this leadership answer at once (NOT_LEADER_OR_FOLLOWER).
            self.purgatory.check_and_complete(METADATA_PARTITION)
        self._enter_role()

    def _leave_role(self) -> None:
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._inflight):
            task.cancel()
        self._inflight.clear()
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()

    def _enter_role(self) -> None:
        """Start what the current role does: timers, requests, fetching."""
        if self._closed:
            return
        state = self.quorum.state
        self.metrics.state = state.name
        self.logger.info(
            "quorum_state", state=state.name, epoch=state.epoch, leader=state.leader_id
        )
        self._notify_leader()
        if isinstance(state, FollowerState):
            self._election_retries = 0
            self.former_leader = None
            self._set_timer(self.config.fetch_timeout_ms, self._fetch_timed_out)
            self._fetch()
        elif isinstance(state, UnattachedState):
            if self.quorum.is_voter:
                self._set_timer(self._election_timeout(), self._election_timed_out)
            else:
                self._fetch()  # an observer looks for the leader among the voters
        elif isinstance(state, ProspectiveState | CandidateState):
            self._set_timer(self.config.election_timeout_ms, self._election_lost)
            self._request_votes()
        elif isinstance(state, LeaderState):
            self._election_retries = 0
            if len(self.voters) > 1:
                self._set_timer(self._check_quorum_ms(), self._check_quorum)
            self._begin_epoch()
        elif isinstance(state, ResignedState):
            self._set_timer(self._election_timeout(), self._election_timed_out)

    def _set_timer(self, delay_ms: int, callback: Callable[[], None]) -> None:
        """The role's one timer: a new one replaces (cancels) the one set before."""
        if self._timer is not None:
            self._timer.cancel()

        def fire() -> None:
            self._timer = None
            callback()

        self._timer = self.scheduler.call_at(self.scheduler.now_ms() + delay_ms, fire)

    def _election_timeout(self) -> int:
        """Kafka's randomized election timeout; the first after a start is drawn from
        [0, timeout) instead, so a new cluster elects its first leader at once (pre-vote
        keeps an early candidate from disturbing a leader that exists)."""
        timeout = self.config.election_timeout_ms
        if self._first_timeout:
            self._first_timeout = False
            return self.rng.randrange(max(timeout, 1))
        return timeout + self.rng.randrange(max(timeout, 1))

    def _check_quorum_ms(self) -> int:
        return self.config.fetch_timeout_ms * 3 // 2

    def _notify_leader(self) -> None:
        state = self.quorum.state
        if isinstance(state, LeaderState) and not state.announced:
            current = LeaderAndEpoch(NO_LEADER, state.epoch)  # not yet: catching up
        else:
            current = LeaderAndEpoch(state.leader_id, state.epoch)
        if isinstance(state, ResignedState):
            current = LeaderAndEpoch(NO_LEADER, state.epoch)
        self.metrics.leader = current.leader_id
        self.metrics.epoch = current.epoch
        if current != self._notified:
            self._notified = current
            self.listener.handle_leader_change(current)

    def _transition_if_newer(self, epoch: int, leader_id: int) -> bool:
        """Another member knows a later epoch (or the leader of ours): follow it. True if
        this member's role changed."""
        state = self.quorum.state
        if epoch > state.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._change_role(self.quorum.to_follower, epoch, leader_id)
            else:
                self._change_role(self.quorum.to_unattached, epoch)
            return True
        if (
            epoch == state.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and (
                isinstance(state, UnattachedState | CandidateState)
                or (isinstance(state, ProspectiveState) and state.former_leader_id == NO_LEADER)
            )
        ):
            self._change_role(self.quorum.to_follower, epoch, leader_id)
            return True
        return False

    def _election_timed_out(self) -> None:
        if self.quorum.is_voter:
            self._change_role(self.quorum.to_prospective)
            self._maybe_won()

    def _fetch_timed_out(self) -> None:
        state = self.quorum.state
        self.logger.warning("quorum_leader_unreachable", leader=state.leader_id, epoch=state.epoch)
        if isinstance(state, FollowerState) and state.last_fetch_ms >= 0:
            # It answered its last fetch then, and would have answered the next within a
            # long poll's wait had it been up: it was gone by that time at the latest.
            self.former_leader = (
                state.leader_id,
                state.last_fetch_ms + self.config.fetch_max_wait_ms,
            )
        if self.quorum.is_voter:
            self._change_role(self.quorum.to_prospective)
            self._maybe_won()
        else:
            self._change_role(self.quorum.to_unattached, state.epoch)

    def _election_lost(self) -> None:
        """No majority within the election timeout, or a majority said no. A candidate
        backs off (randomly, longer after each loss, up to
        ``controller.quorum.election.backoff.max.ms``) and asks again; a prospective
        member that could not even win the pre-vote waits a whole election timeout: the
        others still hear from a leader, or cannot hear from it either and will stand."""
        state = self.quorum.state
        self._change_role(self.quorum.to_unattached, state.epoch)
        if isinstance(state, CandidateState):
            self._election_retries += 1
            backoff = min(
                self.config.election_backoff_max_ms,
                self.config.retry_backoff_ms << min(self._election_retries, 16),
            )
            self._set_timer(self.rng.randrange(max(backoff, 1)) + 1, self._election_timed_out)

    def _become_candidate(self) -> None:
        self.metrics.election_started(self.scheduler.precise_s())
        self._change_role(self.quorum.to_candidate, self._election_retries)
        self._maybe_won()

    def _become_leader(self) -> None:
        offset = self.log.end_offset
        self._change_role(self.quorum.to_leader, offset, self.scheduler.now_ms())
        state = self.quorum.state
        assert isinstance(state, LeaderState)
        self.metrics.election_won(self.scheduler.precise_s())
        self.logger.info("quorum_leader_elected", epoch=state.epoch, epoch_start_offset=offset)
        self.append(state.epoch, [LEADER_CHANGE])

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

    # -- fetching: the follower's side -----------------------------------------------------------

    def _fetch_target(self) -> int:
        state = self.quorum.state
        if state.leader_id >= 0 and state.leader_id != self.node_id:
            return state.leader_id
        others = sorted(self.voters - {self.node_id})
        return self.rng.choice(others) if others else NO_LEADER

    def _fetch(self) -> None:
        target = self._fetch_target()
        if target < 0:
            return
        state = self.quorum.state
        epoch = state.epoch if isinstance(state, FollowerState) else -1
        log = self.log
        request = m.FetchRequestV2(
            self.node_id,
            self.config.fetch_max_wait_ms,
            1,
            self.config.fetch_max_bytes,
            [
                m.FetchTopicV2(
                    rm.METADATA_TOPIC,
                    [
                        m.FetchPartitionV2(
                            0,
                            log.end_offset,
                            self.config.fetch_max_bytes,
                            epoch,
                            log.last_epoch,
                            self.high_watermark,
                        )
                    ],
                )
            ],
            self.cluster_id,
        )
        self._rpc(
            target,
            ApiKey.FETCH,
            request,
            lambda result: self._fetched(target, result),
            self.config.fetch_max_wait_ms + self.config.request_timeout_ms,
        )

    def _fetched(self, source: int, result: Any) -> None:
        if isinstance(result, BaseException):
            self._retry_later(self._fetch)
            return
        try:
            data = result.responses[0].partitions[0]
        except (AttributeError, IndexError):
            self._retry_later(self._fetch)
            return
        if self._transition_if_newer(data.leader_epoch, data.leader_id):
            return
        if data.error_code:
            self._retry_later(self._fetch)
            return
        state = self.quorum.state
        if isinstance(state, FollowerState):
            state.last_fetch_ms = self.scheduler.now_ms()
            self._set_timer(self.config.fetch_timeout_ms, self._fetch_timed_out)
        if data.snapshot_end_offset >= 0:
            self._fetch_snapshot(source, data.snapshot_end_offset, data.snapshot_epoch)
            return
        if data.diverging_end_offset >= 0 or data.diverging_epoch != NO_EPOCH:
            self._truncate_diverging(Diverging(data.diverging_epoch, data.diverging_end_offset))
        elif data.records:
            try:
                self.log.append_as_follower(rm.decode_entries(data.records))
            except (CorruptLog, ValueError) as exc:
                self.logger.error("quorum_fetch_refused", source=source, error=str(exc))
                self._retry_later(self._fetch)
                return
        self._set_high_watermark(min(data.high_watermark, self.log.end_offset))
        self._fetch()

    def _truncate_diverging(self, diverging: Diverging) -> None:
        """The leader's log diverges from ours at ``diverging``: cut ours back to where that
        epoch ends on both sides (then the next fetch checks again)."""
        log = self.log
        if diverging.epoch == NO_EPOCH:
            target = diverging.end_offset
        else:
            own = log.end_offset_for_epoch(diverging.epoch)
            target = min(
                diverging.end_offset, own.offset if own.epoch != NO_EPOCH else log.start_offset
            )
        target = max(target, log.start_offset)
        if target < self.high_watermark:
            # Raft never diverges below a committed entry; refuse rather than lose one.
            self.truncations_below_high_watermark += 1
            self.logger.error(
                "quorum_truncation_below_high_watermark",
                to_offset=target,
                high_watermark=self.high_watermark,
            )
            return
        dropped = log.truncate_to(target)
        if dropped:
            self.logger.info("quorum_log_truncated", to_offset=target, entries=dropped)

    def _fetch_snapshot(self, source: int, end_offset: int, epoch: int) -> None:
        request = rm.FetchSnapshotRequest(
            self.cluster_id, self.node_id, self.quorum.epoch, end_offset, epoch
        )

        def answered(result: Any) -> None:
            if isinstance(result, BaseException) or result.error_code:
                self._retry_later(self._fetch)
                return
            if result.snapshot_end_offset < self.log.end_offset:
                self._fetch()  # we moved past it meanwhile
                return
            self.log.install_snapshot(
                Snapshot(result.snapshot_end_offset, result.snapshot_epoch, list(result.records))
            )
            self.logger.info("quorum_snapshot_loaded", end_offset=result.snapshot_end_offset)
            self._set_high_watermark(result.snapshot_end_offset)
            self._fetch()

        self._rpc(source, ApiKey.FETCH_SNAPSHOT, request, answered)

    # -- fetching: the leader's side -------------------------------------------------------------

    def handle_fetch(self, request: m.FetchRequestV2) -> m.FetchResponseV2 | asyncio.Future[Any]:
        """A replica's fetch of the metadata log (one topic, ``__cluster_metadata``, one
        partition): answered now, or parked until there is something new."""
        try:
            (topic,) = request.topics
            (partition,) = topic.partitions
        except ValueError:
            return self.fetch_error(ErrorCode.INVALID_REQUEST)
        if topic.topic != rm.METADATA_TOPIC or partition.partition != 0:
            return self.fetch_error(ErrorCode.INVALID_REQUEST)
        refused = self._refuse_foreign(request.cluster_id or "")
        if refused is not None:
            return self.fetch_error(refused)
        state = self.quorum.state
        if partition.current_leader_epoch > state.epoch:
            self._transition_if_newer(partition.current_leader_epoch, NO_LEADER)
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not isinstance(state, LeaderState):
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if 0 <= partition.current_leader_epoch < state.epoch:
            return self.fetch_error(ErrorCode.FENCED_LEADER_EPOCH)
        if self.log.validate_fetch(partition.fetch_offset, partition.last_fetched_epoch):
            return self.fetch_answer(partition)
        if state.update_replica(
            request.replica_id,
            partition.fetch_offset,
            partition.high_watermark,
            self.log.end_offset,
            self.scheduler.now_ms(),
        ):
            self._set_high_watermark(state.high_watermark)
        if self.on_fetch is not None:
            self.on_fetch()
        if request.max_wait_ms <= 0 or self._fetch_satisfied(partition, state.epoch):
            return self.fetch_answer(partition)
        operation = DelayedRaftFetch(self, partition, state.epoch, request.max_wait_ms)
        if self.purgatory.try_complete_else_watch(operation, (METADATA_PARTITION,)):
            answer: m.FetchResponseV2 = operation.response.result()
            return answer
        return operation.response

    def _fetch_satisfied(self, partition: m.FetchPartitionV2, epoch: int) -> bool:
        """DelayedRaftFetch's cases A-C: the leadership changed, there are entries past the
        fetch offset, or a high watermark the fetcher has not seen."""
        state = self.quorum.state
        return (
            not isinstance(state, LeaderState)
            or state.epoch != epoch
            or self.log.end_offset > partition.fetch_offset
            or self.high_watermark > partition.high_watermark
        )

    def fetch_answer(self, partition: m.FetchPartitionV2, wait_ms: int = 0) -> m.FetchResponseV2:
        """The answer to a fetch from where it stands now: entries, where the fetcher's log
        diverges, or the snapshot to fetch."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        check = log.validate_fetch(partition.fetch_offset, partition.last_fetched_epoch)
        data = m.PartitionDataV2(
            0, ErrorCode.NONE, self.high_watermark, log.start_offset, b"", self.node_id, state.epoch
        )
        if isinstance(check, SnapshotNeeded):
            data.snapshot_end_offset, data.snapshot_epoch = check.end_offset, check.epoch
        elif isinstance(check, Diverging):
            data.diverging_epoch, data.diverging_end_offset = check.epoch, check.end_offset
        elif partition.fetch_offset < log.end_offset:
            data.records = rm.encode_entries(
                log.read(partition.fetch_offset, self.config.fetch_max_bytes)
            )
        return m.FetchResponseV2([m.FetchableTopicResponseV2(rm.METADATA_TOPIC, [data])], wait_ms)

    def fetch_error(self, code: ErrorCode) -> m.FetchResponseV2:
        data = m.PartitionDataV2(0, code, -1, -1, b"", self.quorum.leader_id, self.quorum.epoch)
        return m.FetchResponseV2([m.FetchableTopicResponseV2(rm.METADATA_TOPIC, [data])])

    def handle_fetch_snapshot(self, request: rm.FetchSnapshotRequest) -> rm.FetchSnapshotResponse:
        state = self.quorum.state
        snapshot = self.log.snapshot
        refused = self._refuse_foreign(request.cluster_id)
        if refused is None and not isinstance(state, LeaderState):
            refused = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if refused is None and (
            snapshot is None
            or (snapshot.end_offset, snapshot.epoch)
            != (request.snapshot_end_offset, request.snapshot_epoch)
        ):
            refused = ErrorCode.SNAPSHOT_NOT_FOUND
        if refused is not None or snapshot is None:
            return rm.FetchSnapshotResponse(
                refused or ErrorCode.SNAPSHOT_NOT_FOUND,
                self.quorum.leader_id,
                self.epoch,
                -1,
                -1,
                [],
            )
        return rm.FetchSnapshotResponse(
            ErrorCode.NONE,
            self.node_id,
            self.epoch,
            snapshot.end_offset,
            snapshot.epoch,
            snapshot.records,
        )

    def handle_describe_quorum(self) -> rm.DescribeQuorumResponse:
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return rm.DescribeQuorumResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"node {self.node_id} does not lead the quorum (leader: {state.leader_id})",
                state.leader_id,
                state.epoch,
                -1,
                [],
                [],
            )
        now, wall = self.scheduler.now_ms(), self.scheduler.wall_ms()

        def replica(replica_id: int, progress: Any) -> rm.QuorumReplicaState:
            def stamp(ms: int) -> int:
                return -1 if ms < 0 else wall - (now - ms)

            return rm.QuorumReplicaState(
                replica_id,
                progress.end_offset,
                stamp(progress.last_fetch_ms),
                stamp(progress.last_caught_up_ms),
            )

        return rm.DescribeQuorumResponse(
            ErrorCode.NONE,
            None,
            self.node_id,
            state.epoch,
            self.high_watermark,
            [replica(v, p) for v, p in state.voters.items()],
            [replica(o, p) for o, p in sorted(state.observers.items())],
        )

    def replica_applied_offsets(self) -> dict[int, int]:
        """The leader's view of how far each replica has applied the log (from the high
        watermark its latest fetch reported); this leader's own is its listener's."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return {}
        applied = {
            r: p.applied_offset for r, p in (*state.voters.items(), *state.observers.items())
        }
        applied[self.node_id] = self._listener_offset
        return applied

    # -- commits ---------------------------------------------------------------------------------

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark <= self.high_watermark:
            return
        self.high_watermark = high_watermark
        self.metrics.committed(high_watermark, self.scheduler.precise_s())
        self._fire_commits()
        self.purgatory.check_and_complete(METADATA_PARTITION)

    def _fire_commits(self) -> None:
        """Hand the listener every committed entry it has not had, in order (re-entrant
        calls, from a listener that appends, are folded into the running loop)."""
        if self._firing:
            return
        self._firing = True
        try:
            log = self.log
            while True:
                if self._listener_offset < min(self.high_watermark, log.end_offset):
                    if self._listener_offset < log.start_offset:
                        assert log.snapshot is not None
                        self._listener_offset = log.start_offset
                        self.listener.handle_load_snapshot(log.snapshot)
                        continue
                    start, end = log.start_offset, min(self.high_watermark, log.end_offset)
                    entries = log.entries[self._listener_offset - start : end - start]
                    self._listener_offset = end
                    self.listener.handle_commit(entries)
                    continue
                state = self.quorum.state
                if (
                    isinstance(state, LeaderState)
                    and not state.announced
                    and self._listener_offset > state.epoch_start_offset
                ):
                    state.announced = True
                    self._notify_leader()  # may append (the controller starts): loop again
                    continue
                break
            self._maybe_snapshot()
        finally:
            self._firing = False

    def _maybe_snapshot(self) -> None:
        """Every ``metadata.log.max.record.bytes.between.snapshots`` of log, snapshot the
        committed state the listener holds and drop the entries it covers."""
        log = self.log
        end = self._listener_offset
        if log.bytes_since_snapshot < self.config.snapshot_bytes or end <= log.start_offset:
            return
        epoch = log.entry(end - 1).epoch
        log.compact(Snapshot(end, epoch, self.listener.snapshot_records()))
        self.metrics.snapshots += 1
        self.logger.info("quorum_snapshot_taken", end_offset=end, epoch=epoch)

    # -- plumbing --------------------------------------------------------------------------------

    def _refuse_foreign(self, cluster_id: str) -> ErrorCode | None:
        return None if cluster_id == self.cluster_id else ErrorCode.INCONSISTENT_CLUSTER_ID

    def _rpc(
        self,
        destination: int,
        key: ApiKey,
        request: Any,
        on_done: Callable[[Any], None],
        timeout_ms: int | None = None,
    ) -> None:
        """Send ``request``; ``on_done`` gets the answer or the exception, unless the role
        changed meanwhile (then nobody does)."""
        generation = self._generation
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        task = asyncio.ensure_future(self.channel.send(destination, key, request, timeout))
        self._inflight.add(task)

        def done(finished: asyncio.Future[Any]) -> None:
            self._inflight.discard(finished)
            if finished.cancelled() or generation != self._generation or self._closed:
                return
            exc = finished.exception()
            if exc is not None and not isinstance(exc, ConnectionError | KafkaError):
                self.logger.error("quorum_request_failed", api=key.api_name, error=repr(exc))
            on_done(exc if exc is not None else finished.result())

        task.add_done_callback(done)

    def _retry_later(self, action: Callable[[], None]) -> None:
        """Run ``action`` after ``controller.quorum.retry.backoff.ms``, in this role only."""
        generation = self._generation
        handle: list[Cancellable] = []

        def run() -> None:
            self._retries.discard(handle[0])
            if generation == self._generation and not self._closed:
                action()

        handle.append(
            self.scheduler.call_at(self.scheduler.now_ms() + self.config.retry_backoff_ms, run)
        )
        self._retries.add(handle[0])
