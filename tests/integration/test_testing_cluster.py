"""purgatory.testing.Cluster, as a user's test drives it: thread mode (brokers in this
process) and process mode (real processes), steering and observing."""

from __future__ import annotations

import asyncio

import pytest

from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.clients import AdminClient, Producer
from purgatory.testing import Cluster, ClusterError


def test_thread_mode_kills_and_restarts_a_leader_and_the_isr_keeps_the_records() -> None:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("kept", partitions=3, config={"min.insync.replicas": 2})
        # Kill the leader of a partition the active controller does not lead (killing the
        # controller too would add an election to the wait).
        controller = cluster.controller()
        p = next(i for i in range(3) if cluster.partition("kept", i).leader != controller)
        assert sorted(cluster.partition("kept", p).isr) == [0, 1, 2]
        cluster.set_config("replica.lag.time.max.ms", 5000)
        assert cluster.state(1).config_changes

        async def produce(value: bytes) -> int:
            async with Producer(cluster.bootstrap_servers, acks=-1, linger_ms=0) as producer:
                return (await producer.send_and_wait("kept", value, partition=p)).offset

        assert cluster._run(produce(b"one")) == 0
        leader = cluster.partition("kept", p).leader
        cluster.kill(leader)
        assert not cluster.alive(leader)
        # A new leader from the ISR; its high watermark covers the record once the other
        # follower has fetched from it (Kafka's rule), and records() reads up to it.
        cluster.wait_for(
            lambda: (
                cluster.partition("kept", p).leader != leader
                and cluster.partition("kept", p).high_watermark == 1
            ),
            timeout=15,
        )
        assert cluster.records("kept", p) == [(0, None, b"one")]
        cluster.restart(leader)
        cluster.wait_for(lambda: leader in cluster.partition("kept", p).isr, timeout=15)
        samples = cluster.metrics(leader)
        assert any(name == "purgatory_raft_current_leader" for name, _ in samples)
        with pytest.raises(ClusterError, match="unknown config"):
            cluster.set_config("no.such.config", 1, broker=0)
    assert not cluster.alive(0) and not cluster.healthy(0)  # nothing left serving


def test_a_paused_broker_is_fenced_and_rejoins_the_isr_when_resumed() -> None:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("frozen", partitions=1)
        cluster.elect_leader("frozen", 0, 1)  # not the controller, not the paused one
        cluster.pause(2)
        assert cluster.paused(2) and cluster.alive(2) and not cluster.healthy(2)
        # Nothing of broker 2 runs: no heartbeats, so the controller fences it after
        # broker.session.timeout.ms and the leader's ISR loses it.
        cluster.wait_for(lambda: 2 not in cluster.state().live_brokers, timeout=15)
        cluster.wait_for(lambda: cluster.partition("frozen").isr == [1, 0], timeout=15)
        # Data written meanwhile reaches it after it resumes (it fetches again).
        cluster._run(produce_one(cluster, "frozen", b"while-paused"))
        cluster.resume(2)
        assert not cluster.paused(2)
        cluster.wait_for(lambda: sorted(cluster.partition("frozen").isr) == [0, 1, 2], timeout=15)
        cluster.wait_for(lambda: cluster.state(2).replica("frozen", 0).log_end_offset == 1)  # type: ignore[union-attr]


def test_elect_leader_moves_leadership_and_the_controller_logs_it() -> None:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("moved", partitions=1)
        cluster.elect_leader("moved", 0, 2)
        moved = cluster.partition("moved")
        assert moved.leader == 2 and moved.replicas[0] == 2  # preferred now: it stays
        assert moved.leader_epoch == 1
        events = cluster.logs(cluster.controller())
        assert any(
            e["event"] == "preferred_leader_election" and e["leader"] == 2 and e["topic"] == "moved"
            for e in events
        ), events
        cluster.create_topic("pair", partitions=1, replication_factor=2)
        outside = ({0, 1, 2} - set(cluster.partition("pair").replicas)).pop()
        with pytest.raises(ClusterError, match="INVALID_REPLICA_ASSIGNMENT"):
            cluster.elect_leader("pair", 0, outside)
        cluster.kill(1)
        cluster.wait_for(lambda: 1 not in cluster.state().live_brokers, message="1 fenced")
        with pytest.raises(ClusterError, match="PREFERRED_LEADER_NOT_AVAILABLE"):
            cluster.elect_leader("moved", 0, 1)
        with pytest.raises(ClusterError, match="not running"):
            cluster.pause(1)
        with pytest.raises(ClusterError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            cluster.elect_leader("nosuch", 0, 2)


def test_stop_hands_leadership_over_before_the_broker_exits() -> None:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("handover", partitions=1)
        controller = cluster.controller()
        leaving = next(b for b in range(3) if b != controller)  # the controller logs it
        cluster.elect_leader("handover", 0, leaving)
        assert cluster._run(produce_one(cluster, "handover", b"kept")) == 0
        cluster.pause(leaving)  # stop resumes a paused broker first
        cluster.stop(leaving)
        assert not cluster.alive(leaving)
        # The controller moved the leadership and told the brokers before it left: no
        # wait for broker.session.timeout.ms (a kill leaves no leader until then).
        moved = cluster.partition("handover")
        assert moved.leader != leaving and leaving not in moved.isr
        assert any(
            e["event"] == "controlled_shutdown" and e["shutting_down_broker"] == leaving
            for e in cluster.logs(controller)
        )
        assert cluster.records("handover", 0) == [(0, None, b"kept")]
        with pytest.raises(ClusterError, match="not running"):
            cluster.stop(leaving)
        cluster.restart(leaving)
        cluster.wait_for(lambda: leaving in cluster.partition("handover").isr, timeout=15)


def test_the_last_broker_standing_stops_without_asking_a_quorum_that_is_gone() -> None:
    """A cluster stopped one broker at a time: the others hand their leaderships over;
    the last has nobody to hand over to (and, its fellow voters gone, no quorum to ask),
    so it stops at once instead of retrying controlled.shutdown.max.retries times."""
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("last", partitions=1)
        controller = cluster.controller()
        for broker in range(3):
            if broker != controller:
                cluster.stop(broker)
        cluster.stop(controller)
        events = [e["event"] for e in RECENT_LOGS.events(controller)]
        assert "controlled_shutdown_failed" not in events
        assert "controlled_shutdown_gave_up" not in events


async def produce_one(cluster: Cluster, topic: str, value: bytes) -> int:
    async with Producer(cluster.bootstrap_servers, acks=-1, linger_ms=0) as producer:
        return (await producer.send_and_wait(topic, value, partition=0)).offset


async def test_process_mode_under_async_with_and_faults() -> None:
    async with Cluster(brokers=1, mode="process") as cluster:
        assert cluster.controller() == 0
        cluster.add_fault(0, name="flaky", kind="error", api="CreateTopics",
                          error_code="POLICY_VIOLATION", times=1)  # fmt: skip
        assert [f["name"] for f in cluster.state(0).faults] == ["flaky"]
        async with AdminClient(cluster.bootstrap_servers) as admin:
            with pytest.raises(Exception, match="POLICY_VIOLATION"):
                await admin.create_topic("refused", 1, 1)
        cluster.add_fault(0, name="slow", kind="latency", delay_ms=5)
        cluster.clear_faults()
        assert not cluster.state(0).faults
        cluster.pause(0)  # SIGSTOP
        assert cluster.paused(0) and not cluster.healthy(0)
        cluster.resume(0)
        cluster.wait_for(lambda: cluster.healthy(0), timeout=10, message="resumed")
        pid = cluster.pid(0)
        cluster.kill(0)
        assert not cluster.alive(0)
        cluster.restart(0)
        assert cluster.pid(0) != pid and cluster.healthy(0)
        cluster.pause(0)
        cluster.stop(0)  # SIGCONT, then SIGTERM: it exits by itself, status 0
        assert not cluster.alive(0) and cluster._supervisor.procs[0].returncode == 0
        # From a thread (as README shows), this test's loop runs on while the broker starts.
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        await asyncio.to_thread(cluster.restart, 0)
        ticker.cancel()
        assert cluster.healthy(0) and ticks > 0
    assert not cluster.healthy(0)


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        Cluster(mode="docker")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1 broker"):
        Cluster(brokers=0)


def test_records_of_a_partition_ending_in_a_transaction_marker() -> None:
    from confluent_kafka import Producer

    with Cluster(brokers=1) as cluster:
        cluster.create_topic("txn", partitions=1, replication_factor=1)
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "records"}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("txn", value=b"a")
        producer.produce("txn", value=b"b")
        producer.commit_transaction(30)
        cluster.wait_for(
            lambda: cluster.partition("txn").high_watermark == 3, 10, "the marker at offset 2"
        )
        assert cluster.records("txn") == [(0, None, b"a"), (1, None, b"b")]
