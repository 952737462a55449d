"""The metadata quorum's Raft rules (KIP-595, KIP-996), each on its own: vote granting,
log matching, commitment, check-quorum, snapshots, and what a restarted voter remembers.
Members run the real KafkaRaftClient on the simulation's clock and network: time moves
only when a test says so, and nothing sleeps."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from purgatory.broker.purgatory import DelayedOperationPurgatory, SystemTimer
from purgatory.broker.raft.kafka_raft_client import KafkaRaftClient
from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.log_store import (
    ElectionState,
    FileLogStore,
    LoadedLog,
    MemoryLogStore,
    Snapshot,
    StoreError,
)
from purgatory.broker.raft.raft_client import LeaderAndEpoch
from purgatory.broker.raft.raft_config import QuorumConfig
from purgatory.broker.raft.raft_log import NO_EPOCH, Diverging, RaftLog, SnapshotNeeded
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from tests.simulation.network import SimNetwork
from tests.simulation.sim_loop import SimScheduler, Simulation

CONFIG = QuorumConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    election_backoff_max_ms=100,
    request_timeout_ms=200,
    retry_backoff_ms=10,
    fetch_max_wait_ms=50,
    snapshot_bytes=1 << 30,
)


class Recorder:
    """A member's listener: what it was told, in order."""

    def __init__(self) -> None:
        self.committed: list[tuple[int, int, bytes]] = []
        self.leaders: list[LeaderAndEpoch] = []
        self.snapshots: list[int] = []

    def handle_commit(self, entries: list[rm.RaftEntry]) -> None:
        self.committed += [(e.offset, e.epoch, e.data) for e in entries]

    def handle_load_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot.end_offset)
        self.committed = [(snapshot.end_offset - 1, snapshot.epoch, b"snapshot")]

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)

    def snapshot_records(self) -> list[bytes]:
        return [data for _, _, data in self.committed]


class Quorum:
    """``n`` voters on one simulated network; each keeps its store across restarts."""

    def __init__(self, n: int = 3, seed: int = 1, config: QuorumConfig = CONFIG) -> None:
        self.sim = Simulation(seed)
        self.net = SimNetwork(self.sim)
        self.config = config
        self.voters = frozenset(range(n))
        self.stores: dict[int, Any] = {i: MemoryLogStore() for i in range(n)}
        self.clients: dict[int, KafkaRaftClient] = {}
        self.listeners: dict[int, Recorder] = {}
        for i in range(n):
            self.start(i)

    def start(self, node: int) -> None:
        loop = self.sim.new_loop(node)
        listener = self.listeners[node] = Recorder()
        seed = self.sim.rng.getrandbits(32)

        def boot() -> None:
            scheduler = SimScheduler(loop)
            client = KafkaRaftClient(
                node,
                self.voters,
                "test",
                self.stores[node],
                scheduler,
                Channel(self.net, node),
                DelayedOperationPurgatory("Fetch", SystemTimer(scheduler)),
                self.config,
                listener,
                random.Random(seed),
            )
            self.clients[node] = client
            handlers = {
                ApiKey.VOTE: client.handle_vote,
                ApiKey.BEGIN_QUORUM_EPOCH: client.handle_begin_quorum_epoch,
                ApiKey.END_QUORUM_EPOCH: client.handle_end_quorum_epoch,
                ApiKey.FETCH: client.handle_fetch,
                ApiKey.FETCH_SNAPSHOT: client.handle_fetch_snapshot,
            }
            self.net.attach(node, lambda source, key, version, request: handlers[key](request))
            client.start()

        loop.call_soon(boot)

    def crash(self, node: int) -> None:
        self.net.detach(node)
        self.sim.drop_loop(node)
        del self.clients[node]

    def run(self, seconds: float) -> None:
        self.sim.run_until(self.sim.now + seconds)

    def leader(self) -> KafkaRaftClient:
        leaders = [c for c in self.clients.values() if isinstance(c.quorum.state, LeaderState)]
        assert len(leaders) == 1, [c.quorum.state for c in self.clients.values()]
        return leaders[0]

    def append(self, data: bytes) -> int:
        leader = self.leader()
        offset: list[int] = []
        self.sim.run_in(leader.node_id, lambda: offset.append(leader.append(leader.epoch, [data])))
        self.run(0.001)
        return offset[0]

    def isolate(self, node: int) -> None:
        others = self.voters - {node}
        self.net.cut |= {(node, o) for o in others} | {(o, node) for o in others}


class Channel:
    def __init__(self, net: SimNetwork, node: int) -> None:
        self.net, self.node = net, node

    async def send(self, destination: int, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        return await self.net.send(self.node, destination, key, request, timeout_ms, 2)


def committed_data(quorum: Quorum, node: int) -> list[bytes]:
    return [d for _, _, d in quorum.listeners[node].committed if d != b"\x00"]


# -- elections -----------------------------------------------------------------------------


def test_a_new_quorum_elects_one_leader_that_every_voter_follows() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    for node, client in quorum.clients.items():
        assert client.leader == LeaderAndEpoch(leader.node_id, leader.epoch)
        # Told once everything before the leader's epoch is committed: its first entry.
        assert quorum.listeners[node].leaders[-1] == LeaderAndEpoch(leader.node_id, leader.epoch)


def test_a_voter_grants_one_vote_per_epoch_and_only_to_an_up_to_date_log() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    follower = next(c for c in quorum.clients.values() if c is not quorum.leader())
    epoch, end = follower.epoch + 1, follower.log.end_offset
    last = follower.log.last_epoch
    stale = follower.handle_vote(rm.VoteRequest("test", 7 % 3, epoch, last, end - 1))
    assert not stale.vote_granted  # its log is shorter than the voter's
    first = next(v for v in quorum.voters if v != follower.node_id)
    second = next(v for v in quorum.voters if v not in (follower.node_id, first))
    granted = follower.handle_vote(rm.VoteRequest("test", first, epoch, last, end))
    assert granted.vote_granted and follower.epoch == epoch
    assert follower.handle_vote(rm.VoteRequest("test", first, epoch, last, end)).vote_granted
    assert not follower.handle_vote(rm.VoteRequest("test", second, epoch, last, end)).vote_granted
    assert quorum.stores[follower.node_id].election == ElectionState(epoch, first, -1)
    older = follower.handle_vote(rm.VoteRequest("test", second, epoch - 1, last + 5, end + 5))
    assert not older.vote_granted and older.leader_epoch == epoch


def test_a_pre_vote_changes_nothing_and_is_refused_while_the_voter_hears_its_leader() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    follower = next(c for c in quorum.clients.values() if c is not leader)
    other = next(v for v in quorum.voters if v not in (leader.node_id, follower.node_id))
    asked = rm.VoteRequest(
        "test", other, follower.epoch + 1, follower.log.last_epoch, follower.log.end_offset, True
    )
    refused = follower.handle_vote(asked)
    assert not refused.vote_granted and refused.leader_id == leader.node_id
    assert follower.epoch == leader.epoch  # a pre-vote never raises the epoch
    quorum.isolate(follower.node_id)
    quorum.run(CONFIG.fetch_timeout_ms / 1000 + 0.01)  # it has not heard from it for long
    assert follower.handle_vote(asked).vote_granted
    assert follower.epoch == leader.epoch


def test_a_member_cut_off_cannot_raise_the_epoch_and_rejoins_without_disturbing_the_leader() -> (
    None
):
    """Pre-vote: an isolated follower keeps asking whether it would win, never raising its
    epoch; healed, it follows the leader that carried on meanwhile."""
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    loner = next(n for n in quorum.voters if n != leader.node_id)
    quorum.isolate(loner)
    quorum.run(3.0)
    assert quorum.clients[loner].epoch == leader.epoch
    quorum.net.heal(set(quorum.net.cut))
    quorum.run(1.0)
    assert quorum.leader() is leader and quorum.clients[loner].leader.leader_id == leader.node_id


def test_a_dead_leader_is_replaced_within_the_fetch_and_election_timeouts() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    old = quorum.leader()
    quorum.crash(old.node_id)
    quorum.run((CONFIG.fetch_timeout_ms + 2 * CONFIG.election_timeout_ms) / 1000)
    new = quorum.leader()
    assert new.node_id != old.node_id and new.epoch > old.epoch


# -- commitment ------------------------------------------------------------------------------


def test_an_entry_is_committed_once_a_majority_holds_it_and_not_before() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    followers = [n for n in quorum.voters if n != leader.node_id]
    quorum.isolate(followers[0])
    quorum.net.cut |= {(leader.node_id, followers[1]), (followers[1], leader.node_id)}
    offset = quorum.append(b"alone")
    quorum.run(0.1)  # less than check-quorum's 1.5 fetch timeouts: it still leads
    assert leader.high_watermark <= offset and b"alone" not in committed_data(
        quorum, leader.node_id
    )
    quorum.net.heal({(leader.node_id, followers[1]), (followers[1], leader.node_id)})
    quorum.run(0.2)
    assert leader.high_watermark > offset
    assert committed_data(quorum, leader.node_id)[-1] == b"alone"
    assert committed_data(quorum, followers[1])[-1] == b"alone"


def test_a_leader_cut_off_from_the_majority_resigns_and_its_entries_never_commit() -> None:
    """Check-quorum: the old leader stops acting within 1.5 fetch timeouts; the majority
    elects another; the old leader's uncommitted entry is truncated when it rejoins."""
    quorum = Quorum()
    quorum.run(1.0)
    old = quorum.leader()
    quorum.isolate(old.node_id)
    orphan = quorum.append(b"orphan")
    quorum.run(CONFIG.fetch_timeout_ms * 1.5 / 1000 + 0.05)
    assert not isinstance(old.quorum.state, LeaderState)
    quorum.run(1.0)
    new = quorum.leader()
    assert new is not old and new.epoch > old.epoch - 1
    new_offset = quorum.append(b"kept")
    quorum.net.heal(set(quorum.net.cut))
    quorum.run(1.0)
    for node in quorum.voters:
        data = committed_data(quorum, node)
        assert b"orphan" not in data and data[-1] == b"kept"
    entry = old.log.entry(new_offset)
    assert entry.data == b"kept"
    assert all(
        old.log.entry(o).data != b"orphan"
        for o in range(old.log.start_offset, orphan + 1)
        if o < old.log.end_offset
    )


def test_a_resigning_leader_first_lets_what_it_appended_commit_within_a_request_timeout() -> None:
    """Resign (a controller stopping on purpose) waits for its uncommitted entries, so a
    change it accepted a moment before is answered rather than lost with the leadership;
    a majority it cannot reach holds it up no longer than request_timeout_ms."""
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    cut = {(leader.node_id, n) for n in quorum.voters - {leader.node_id}}
    quorum.net.cut |= cut
    late = quorum.append(b"late")
    resigned: list[float] = []

    def resign() -> None:
        task = asyncio.ensure_future(leader.resign())
        task.add_done_callback(lambda _: resigned.append(quorum.sim.now))

    quorum.sim.run_in(leader.node_id, resign)
    quorum.run(0.05)
    assert not resigned and isinstance(leader.quorum.state, LeaderState)
    quorum.net.heal(cut)
    quorum.run(0.1)
    assert resigned and leader.high_watermark > late
    assert not isinstance(leader.quorum.state, LeaderState)
    quorum.run(1.0)
    for node in quorum.voters:
        assert committed_data(quorum, node)[-1] == b"late"
    heir = quorum.leader()
    quorum.isolate(heir.node_id)
    lost = quorum.append(b"unreachable")
    leader = heir
    quorum.sim.run_in(heir.node_id, resign)
    quorum.run(CONFIG.request_timeout_ms / 1000 - 0.002)
    assert isinstance(heir.quorum.state, LeaderState)
    quorum.run(0.004)  # less than check-quorum's 1.5 fetch timeouts: it resigned itself
    assert heir.quorum.state.name == "resigned" and heir.high_watermark <= lost


def test_a_new_leader_commits_earlier_entries_only_by_committing_one_of_its_own_epoch() -> None:
    """Raft's rule: the new leader's first entry (its epoch's) goes first; what it holds
    from earlier epochs becomes committed with it, never by counting copies alone."""
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    state = leader.quorum.state
    assert isinstance(state, LeaderState)
    first = leader.log.entry(state.epoch_start_offset)
    assert first.epoch == leader.epoch and first.data == b"\x00"
    assert leader.high_watermark > state.epoch_start_offset


# -- logs, snapshots, restarts -----------------------------------------------------------------


def log_of(*epochs: int, snapshot: Snapshot | None = None) -> RaftLog:
    store = MemoryLogStore()
    store.snapshot = snapshot
    log = RaftLog(store, store.load())
    for epoch in epochs:
        log.append_as_leader(epoch, [b"x"])
    return log


def test_a_fetch_is_checked_against_the_leaders_log_by_the_epoch_of_its_last_entry() -> None:
    leader = log_of(1, 1, 2, 2, 4)  # offsets 0-4
    assert leader.validate_fetch(5, 4) is None  # caught up
    assert leader.validate_fetch(4, 2) is None  # agrees, behind
    # A follower that wrote offsets 4.. in epoch 3 (a leader that lost): epoch 2 ends at 4.
    assert leader.validate_fetch(6, 3) == Diverging(2, 4)
    assert leader.validate_fetch(3, 1) == Diverging(1, 2)  # epoch 1 ended at offset 2
    assert leader.end_offset_for_epoch(0) == (0, NO_EPOCH)


def test_a_fetch_below_the_log_start_is_sent_to_the_snapshot() -> None:
    leader = log_of(3, 3, snapshot=Snapshot(10, 2, [b"s"]))
    assert leader.start_offset == 10 and leader.end_offset == 12
    assert leader.validate_fetch(4, 1) == SnapshotNeeded(10, 2)
    assert leader.validate_fetch(10, 2) is None  # holds exactly the snapshot
    assert leader.validate_fetch(10, 1) == SnapshotNeeded(10, 2)


def test_a_replica_far_behind_catches_up_from_a_snapshot() -> None:
    config = QuorumConfig(**{**CONFIG.__dict__, "snapshot_bytes": 200})
    quorum = Quorum(config=config)
    quorum.run(1.0)
    leader = quorum.leader()
    late = next(n for n in quorum.voters if n != leader.node_id)
    quorum.crash(late)
    quorum.stores[late] = MemoryLogStore()  # and its disk (a new voter, say)
    for i in range(40):
        quorum.append(b"record-%d" % i)
    quorum.run(0.2)
    assert leader.log.start_offset > 0  # snapshotted, the prefix dropped
    quorum.start(late)
    quorum.run(1.0)
    assert quorum.listeners[late].snapshots  # loaded one, then fetched the rest
    assert quorum.clients[late].log.end_offset == leader.log.end_offset
    assert committed_data(quorum, late)[-1] == b"record-39"


def test_a_replica_whose_lost_suffix_lies_under_the_leaders_snapshot_takes_the_snapshot() -> None:
    """A leader cut off appends entries no one commits, past where the new leader later
    snapshots. Back, its fetch (last epoch older than the snapshot's) is sent to the
    snapshot, which ends before its own log does: it must take it in place of its log
    (Kafka's truncateToLatestSnapshot), not decide it has moved past it and ask again
    forever (found by the simulation, seed 4295)."""
    config = QuorumConfig(**{**CONFIG.__dict__, "snapshot_bytes": 200})
    quorum = Quorum(config=config)
    quorum.run(1.0)
    old = quorum.leader()
    quorum.isolate(old.node_id)
    for i in range(60):
        quorum.sim.run_in(old.node_id, lambda i=i: old.append(old.epoch, [b"orphan-%d" % i]))
    quorum.run(CONFIG.fetch_timeout_ms * 1.5 / 1000 + 1.0)
    new = quorum.leader()
    assert new is not old
    for i in range(40):
        quorum.append(b"kept-%d" % i)
    quorum.run(0.2)
    snapshot = new.log.snapshot
    assert snapshot is not None and snapshot.epoch > old.log.last_epoch
    assert snapshot.end_offset < old.log.end_offset  # the old leader's log reaches past it
    quorum.net.heal(set(quorum.net.cut))
    quorum.run(1.0)
    assert old.log.end_offset == new.log.end_offset
    assert committed_data(quorum, old.node_id)[-1] == b"kept-39"
    assert not any(b"orphan" in d for d in committed_data(quorum, old.node_id))


def test_a_restarted_voter_remembers_its_vote_and_its_log() -> None:
    quorum = Quorum()
    quorum.run(1.0)
    leader = quorum.leader()
    quorum.append(b"remembered")
    quorum.run(0.2)
    voter = next(n for n in quorum.voters if n != leader.node_id)
    epoch = quorum.clients[voter].epoch
    quorum.crash(voter)
    quorum.start(voter)
    quorum.run(0.001)
    restarted = quorum.clients[voter]
    assert restarted.epoch == epoch
    assert restarted.log.entry(restarted.log.end_offset - 1).data == b"remembered"
    # It voted for the leader in that epoch (or followed it): another candidate of the
    # same epoch gets nothing.
    other = next(n for n in quorum.voters if n not in (voter, leader.node_id))
    again = restarted.handle_vote(
        rm.VoteRequest("test", other, epoch, restarted.log.last_epoch, 10**6)
    )
    assert not again.vote_granted


def test_a_metadata_log_directory_keeps_everything_and_refuses_another_nodes(
    tmp_path: Path,
) -> None:
    store = FileLogStore(tmp_path, 1, "c")
    log = RaftLog(store, store.load())
    log.append_as_leader(1, [b"a", b"b"])
    store.write_election(ElectionState(1, 1, 1))
    store.close()
    with (tmp_path / "log").open("ab") as torn:
        torn.write(b"\x00\x00\x00\x40partial")  # a kill in mid-write
    reopened = FileLogStore(tmp_path, 1, "c")
    loaded = reopened.load()
    assert loaded.election == ElectionState(1, 1, 1)
    again = RaftLog(reopened, loaded)
    assert [e.data for e in again.entries] == [b"a", b"b"]
    reopened.close()
    with pytest.raises(StoreError, match=r"node\.id"):
        FileLogStore(tmp_path, 2, "c")
    with pytest.raises(StoreError, match=r"cluster\.id"):
        FileLogStore(tmp_path, 1, "other")


def test_a_log_that_does_not_follow_on_is_refused() -> None:
    log = log_of(1, 1)
    with pytest.raises(ValueError):
        log.append_as_follower([rm.RaftEntry(5, 1, b"gap")])
    with pytest.raises(ValueError):
        log.append_as_follower([rm.RaftEntry(2, 0, b"older epoch")])
    assert LoadedLog(ElectionState(), None, []).entries == []
