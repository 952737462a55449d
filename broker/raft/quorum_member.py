"""QuorumMember: one member of the metadata quorum as every role sees it (the base of
KafkaRaftClient): its state, its roles and their one timer, the leader's appends, commits
handed to the listener in order, snapshots, and its requests to the other members."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from typing import Any

import structlog

from purgatory.broker.purgatory import DelayedOperationPurgatory, Scheduler
from purgatory.broker.purgatory.clock import Cancellable
from purgatory.broker.raft.delayed_raft_fetch import METADATA_PARTITION
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
from purgatory.broker.raft.raft_client import (
    LEADER_CHANGE,
    LeaderAndEpoch,
    NotLeader,
    RaftChannel,
    RaftListener,
)
from purgatory.broker.raft.raft_config import QuorumConfig
from purgatory.broker.raft.raft_log import RaftLog
from purgatory.broker.raft.raft_metrics import RaftMetrics
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError


class QuorumMember:
    """The state of one quorum member and the machinery every role shares (see
    kafka_raft_client's rules). The elections and the replication of the log are
    ``QuorumElections`` and ``QuorumReplication``; these hooks are theirs."""

    def _request_votes(self) -> None:
        raise NotImplementedError  # QuorumElections

    def _maybe_won(self) -> None:
        raise NotImplementedError  # QuorumElections

    def _begin_epoch(self) -> None:
        raise NotImplementedError  # QuorumElections

    def _check_quorum(self) -> None:
        raise NotImplementedError  # QuorumElections

    def _fetch(self) -> None:
        raise NotImplementedError  # QuorumReplication

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
        self._commit_waiters: list[asyncio.Future[None]] = []  # see committed_to_end
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
        self._wake_commit_waiters()
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

    # -- commits ---------------------------------------------------------------------------------

    async def committed_to_end(self, timeout_ms: int) -> bool:
        """Wait, at most ``timeout_ms``, until every entry of the log is committed (entries
        appended meanwhile included) while this member keeps its role; whether they are."""
        deadline = self.scheduler.now_ms() + timeout_ms
        generation = self._generation
        while self.high_watermark < self.log.end_offset and generation == self._generation:
            now = self.scheduler.now_ms()
            if now >= deadline:
                break
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._commit_waiters.append(woken)
            timer = self.scheduler.call_at(deadline, functools.partial(_wake, woken))
            try:
                await woken
            finally:
                timer.cancel()
        return self.high_watermark >= self.log.end_offset and generation == self._generation

    def _wake_commit_waiters(self) -> None:
        waiters, self._commit_waiters = self._commit_waiters, []
        for woken in waiters:
            _wake(woken)

    def _set_high_watermark(self, high_watermark: int) -> None:
        if high_watermark <= self.high_watermark:
            return
        self.high_watermark = high_watermark
        self.metrics.committed(high_watermark, self.scheduler.precise_s())
        self._fire_commits()
        if self.high_watermark >= self.log.end_offset:
            self._wake_commit_waiters()
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


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
