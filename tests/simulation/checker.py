"""What must hold at the end of every simulated run, once the faults have healed and the
cluster has settled (some are also watched at every step: ``SimCluster._observe``):

- every acknowledged record is at its acknowledged offset in the leader's log and in the
  log of every in-sync replica, unless every replica that was in the ISR when it was
  acknowledged has crashed since (lost its memory): then nobody had to keep it;
- no record value appears twice in a log (idempotent producers);
- replicas agree: below a replica's high watermark its log equals the leader's;
- no replica truncated below its high watermark, nor refused to (the safety nets stayed
  idle), and the metadata quorum's members agree on every committed entry;
- never two leaders in one quorum epoch;
- the cluster settles: an active controller, every broker registered and unfenced, every
  partition led and fully replicated.
"""

from __future__ import annotations

from typing import Any

from purgatory.broker.server import Broker
from purgatory.protocol.records import decode_records
from tests.simulation.cluster import SimCluster
from tests.simulation.workload import TOPIC, Workload


def settled(cluster: SimCluster, workload: Workload) -> bool:
    """The state the checks need: everything up, led, and every replica caught up."""
    return unsettled(cluster, workload) is None


def unsettled(cluster: SimCluster, workload: Workload) -> str | None:
    """Why the cluster has not settled yet (None: it has)."""
    brokers = cluster.brokers()
    if len(brokers) != len(cluster.nodes):
        return "a node is down"
    controller = cluster.active_controller()
    if controller is None:
        return "no active controller"
    for b in brokers:
        if not (b.has_metadata.is_set() and b.lifecycle.unfenced.is_set()):
            return f"broker {b.broker_id} is not registered and unfenced"
    if not workload.created:
        return None
    for index in range(workload.partitions):
        state = controller.metadata.partition(TOPIC, index)
        if state is None:
            return f"{TOPIC}-{index} unknown"
        if state.leader_id < 0:
            if state.isr:  # offline but recoverable: wait for it
                return f"{TOPIC}-{index} has no leader, ISR {state.isr}"
            continue  # every in-sync replica lost its memory: offline for good
        leader = _broker(cluster, state.leader_id)
        replica = leader.replica_manager.partitions.get((TOPIC, index)) if leader else None
        if replica is None or not replica.is_leader:
            return f"{TOPIC}-{index}: broker {state.leader_id} does not lead it yet"
        if sorted(replica.isr) != sorted(state.replicas):
            return f"{TOPIC}-{index}: ISR {replica.isr} of replicas {state.replicas}"
        end = replica.log.log_end_offset
        if replica.high_watermark != end:
            return f"{TOPIC}-{index}: HW {replica.high_watermark}, LEO {end}"
        for r in state.replicas:
            follower = _broker(cluster, r)
            copy = follower.replica_manager.partitions.get((TOPIC, index)) if follower else None
            if copy is None or copy.log.log_end_offset != end:
                return f"{TOPIC}-{index}: replica {r} behind"
    return None


def _broker(cluster: SimCluster, node_id: int) -> Broker | None:
    node = cluster.nodes.get(node_id)
    return node.broker if node is not None and node.up else None


def _values(replica: Any) -> dict[int, bytes]:
    """A replica's log as {offset: value}."""
    out: dict[int, bytes] = {}
    log = replica.log
    for segment in log.segments:
        for batch in segment.batches:
            for record in decode_records(batch):
                out[record.offset] = record.value or b""
    return out


def check(cluster: SimCluster, workload: Workload) -> list[str]:
    """Every broken promise, in words (none: the run passed)."""
    problems = list(cluster.violations)
    brokers = cluster.brokers()
    for broker in [*brokers, *cluster.retired]:
        if broker.raft.truncations_below_high_watermark:
            problems.append(f"node {broker.broker_id}: the quorum log truncated below its HW")
        refused = sum(s.truncations_refused for s in broker.replica_manager.fetchers.stats.values())
        if refused:
            problems.append(f"node {broker.broker_id}: {refused} truncations below the HW refused")
    problems += _quorum_agrees(brokers)
    controller = cluster.active_controller()
    if controller is None:
        return [*problems, "no active controller at the end"]
    for index in range(workload.partitions):
        problems += _partition(cluster, workload, controller, index)
    return problems


def _quorum_agrees(brokers: list[Broker]) -> list[str]:
    committed: dict[int, tuple[int, bytes]] = {}
    problems = []
    for broker in brokers:
        log = broker.raft.log
        for entry in log.entries:
            if entry.offset >= broker.raft.high_watermark:
                break
            seen = committed.setdefault(entry.offset, (entry.epoch, entry.data))
            if seen != (entry.epoch, entry.data):
                problems.append(
                    f"node {broker.broker_id}: committed metadata entry {entry.offset} differs"
                )
                break
    return problems


def _partition(
    cluster: SimCluster, workload: Workload, controller: Broker, index: int
) -> list[str]:
    state = controller.metadata.partition(TOPIC, index)
    acked = [a for a in workload.acks if a.partition == index]
    protected = [a for a in acked if _protected(cluster, a)]
    if state is None:
        return [f"{TOPIC}-{index}: gone"] if acked else []
    if state.leader_id < 0:
        # Offline for good: fine only if nothing acknowledged had a survivor to keep it.
        return (
            [f"{TOPIC}-{index}: offline with {len(protected)} protected records"]
            if protected
            else []
        )
    problems = []
    leader_broker = _broker(cluster, state.leader_id)
    assert leader_broker is not None
    leader = leader_broker.replica_manager.partitions[(TOPIC, index)]
    logs = {state.leader_id: _values(leader)}
    for r in state.isr:
        follower = _broker(cluster, r)
        if follower is not None and r != state.leader_id:
            logs[r] = _values(follower.replica_manager.partitions[(TOPIC, index)])
    for ack in protected:
        for r, values in logs.items():
            if values.get(ack.offset) != ack.value:
                problems.append(
                    f"{TOPIC}-{index}: {ack.value!r} acked at {ack.offset} (ISR {ack.isr}) is "
                    f"{values.get(ack.offset)!r} on replica {r}"
                )
    for r, values in logs.items():
        seen: dict[bytes, int] = {}
        for offset, value in sorted(values.items()):
            if value in seen:
                problems.append(
                    f"{TOPIC}-{index}: {value!r} twice on replica {r} ({seen[value]}, {offset})"
                )
            seen[value] = offset
    for r, values in logs.items():
        if values != logs[state.leader_id]:
            problems.append(f"{TOPIC}-{index}: replica {r} disagrees with leader {state.leader_id}")
    return problems


def _protected(cluster: SimCluster, ack: Any) -> bool:
    """Whether the promise covers the record still: from its acknowledgement to now, some
    run of a replica that held it has stayed alive and in the committed ISR.

    It starts with the runs the leader counted that are in the committed ISR then (a
    leader acts on its own view of the ISR, which may be stale: a leader frozen and
    fenced long ago can acknowledge, when it resumes, on fetches its followers sent
    before; the promise only holds for what the committed ISR holds). A run that crashes
    lets go of it (a crash before the acknowledgement too: a fetch a run sent can arrive
    after it died), one that leaves the ISR too; one that joins the ISR holds it (it caught
    up to a high watermark past it: the leader counts a joining replica in the high
    watermark from its proposal on)."""
    holders = {(r, run) for r, run in zip(ack.isr, ack.runs, strict=True) if run >= 0}
    committed: set[int] = set()  # the partition's committed ISR as the timeline goes
    acknowledged = False
    for at, kind, what in cluster.timeline:
        if kind == "crash":
            holders.discard(what)
        elif what[0] == ack.partition:
            isr = dict(what[1])
            if at > ack.at:
                if not acknowledged:  # held, as the promise sees it, by the committed ISR
                    holders = {h for h in holders if h[0] in committed}
                    acknowledged = True
                joiners = {(m, run) for m, run in isr.items() if m not in committed}
                holders = {h for h in holders if h[0] in isr} | joiners
            committed = set(isr)
        if acknowledged and not holders:
            return False
    if not acknowledged:
        holders = {h for h in holders if h[0] in committed}
    return bool(holders)
