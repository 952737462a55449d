"""The metadata quorum on real sockets: DescribeQuorum on both protocols and the admin
command, network partitions (the fault API) that cut the active controller off, and a
broker that restarts with its metadata log."""

from __future__ import annotations

import asyncio
import json

import structlog

from purgatory.broker.ops.faults import parse_spec
from purgatory.broker.server import Broker
from purgatory.cli import main
from purgatory.clients import AdminClient, Producer
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from tests.kafka_wire import KafkaWire, request
from tests.support import bootstrap, running_cluster, wait_until

FAST = {"broker_session_timeout_ms": 1500, "broker_heartbeat_interval_ms": 100}


def active(brokers: list[Broker]) -> Broker:
    return next(b for b in brokers if b.controller is not None)


async def test_any_broker_describes_the_quorum_as_its_leader_sees_it(
    cluster3: list[Broker],
) -> None:
    leader = active(cluster3)
    follower = next(b for b in cluster3 if b is not leader)
    async with AdminClient(bootstrap([follower])) as admin:
        await admin.create_topic("q", 1, 3)
        await wait_until(
            lambda: all(b.metadata.epoch == leader.metadata.epoch for b in cluster3),
            message="every replica caught up",
        )
        quorum = await admin.describe_quorum()
    assert (quorum.leader_id, quorum.leader_epoch) == (leader.broker_id, leader.raft.epoch)
    assert quorum.high_watermark == leader.raft.high_watermark
    assert sorted(v.replica_id for v in quorum.current_voters) == [0, 1, 2]
    assert all(v.log_end_offset >= 0 for v in quorum.current_voters)
    assert quorum.observers == []
    wire = await KafkaWire.open(follower.port)
    try:
        for version in (0, 1, 2):
            answer = await wire.call(
                ApiKey.DESCRIBE_QUORUM,
                version,
                request(
                    ApiKey.DESCRIBE_QUORUM,
                    version,
                    topics=(),
                ),
            )
            assert answer.error_code == ErrorCode.NONE
            [topic] = answer.topics
            [partition] = topic.partitions
            assert topic.topic_name == rm.METADATA_TOPIC
            assert partition.leader_id == leader.broker_id
            assert sorted(v.replica_id for v in partition.current_voters) == [0, 1, 2]
            if version >= 2:
                assert sorted(n.node_id for n in answer.nodes) == [0, 1, 2]
    finally:
        await wire.close()


def test_admin_quorum_prints_the_leader_and_each_replicas_lag(capsys: object) -> None:
    from purgatory.testing import Cluster

    with Cluster(brokers=3) as cluster:
        controller = cluster.controller()
        assert main(["admin", "quorum", "--bootstrap", cluster.bootstrap_servers]) == 0
        out = capsys.readouterr().out  # type: ignore[attr-defined]
        assert f"LeaderId:               {controller}" in out
        assert "CurrentVoters:          [0, 1, 2]" in out
        argv = [
            "admin",
            "quorum",
            "--replication",
            "--json",
            "--bootstrap",
            cluster.bootstrap_servers,
        ]
        assert main(argv) == 0
        described = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
        statuses = {r["node_id"]: r["status"] for r in described["replicas"]}
        assert statuses[controller] == "Leader" and list(statuses.values()).count("Follower") == 2


async def test_a_controller_cut_off_by_a_partition_resigns_and_the_majority_carries_on() -> None:
    """The fault API's partition: the active controller cannot reach the other two nor be
    reached. It stops leading within 1.5 fetch timeouts (check-quorum) and never acts
    alone; the other two elect a controller that fences it; healed, it follows."""
    async with running_cluster(3, **FAST) as brokers:
        old = active(brokers)
        others = [b for b in brokers if b is not old]
        spec = {"name": "split", "kind": "partition", "peers": [b.broker_id for b in others]}
        from purgatory.broker.ops.faults import parse_spec

        old.faults.add(parse_spec(spec))
        for b in others:
            b.faults.add(parse_spec({**spec, "peers": [old.broker_id]}))
        await wait_until(
            lambda: old.controller is None, timeout=10, message="the cut-off controller resigned"
        )
        await wait_until(
            lambda: any(b.controller is not None for b in others),
            timeout=10,
            message="a new controller",
        )
        heir = active(others)
        assert heir.raft.epoch > old.raft.epoch or old.raft.quorum.state.name != "leader"
        await wait_until(
            lambda: old.broker_id not in heir.metadata.live_brokers, timeout=10, message="fenced"
        )
        async with AdminClient(bootstrap(others)) as admin:
            await admin.create_topic("while-split", 1, 2)
        assert "while-split" not in old.metadata.topics  # it cannot learn what it cannot hear
        for b in brokers:
            b.faults.reset()
        await wait_until(
            lambda: old.controller_id == heir.broker_id and "while-split" in old.metadata.topics,
            timeout=10,
            message="the healed broker follows the new controller",
        )
        await wait_until(lambda: old.broker_id in heir.metadata.live_brokers, message="unfenced")


async def test_two_brokers_stopping_together_both_hand_over_without_retrying() -> None:
    """Both brokers of a two-voter cluster get SIGTERM at once (as a user stopping a
    hand-started cluster does): the controller answers the other's controlled shutdown
    before it resigns (the change is committed; only its spreading was still awaited),
    so neither retries controlled.shutdown.max.retries times against a quorum that can
    no longer elect anyone."""
    async with running_cluster(2, **FAST) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("both", 1, 2)
        with structlog.testing.capture_logs() as logs:
            await asyncio.gather(*(b.controlled_shutdown() for b in brokers))
    events = [e["event"] for e in logs]
    assert events.count("controlled_shutdown_done") == 2, events
    assert "controlled_shutdown_failed" not in events
    assert "controlled_shutdown_gave_up" not in events


async def test_a_one_way_loss_to_the_controller_moves_the_controller() -> None:
    """A drop fault on every other broker loses what the controller sends them (its fetch
    answers, its heartbeats' answers): they stop hearing from it and elect another, while
    it still hears them. Its own fetches of the new leader are answered, so it follows."""
    async with running_cluster(3, **FAST) as brokers:
        old = active(brokers)
        for b in brokers:
            if b is not old:
                b.faults.add(parse_spec({"name": "deaf", "kind": "drop", "peers": [old.broker_id]}))
        await wait_until(
            lambda: any(b.controller is not None for b in brokers if b is not old),
            timeout=10,
            message="another controller",
        )
        for b in brokers:
            b.faults.reset()
        heir = active(brokers)
        await wait_until(lambda: old.controller_id == heir.broker_id, timeout=10, message="follows")


async def test_a_follower_that_lost_a_fetch_answer_fetches_again_once_the_loss_ends() -> None:
    """A drop fault loses the leader's answers to a follower's fetch; when it ends, the
    follower's connection is given up at once (its answer will never come) rather than
    after replica.socket.timeout.ms (30 s), and the follower catches up."""
    async with running_cluster(3) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("lossy", 1, 3)
        controller = active(brokers)
        await wait_until(
            lambda: (
                (p := controller.metadata.partition("lossy", 0)) is not None and len(p.isr) == 3
            ),
            message="a full ISR",
        )
        state = controller.metadata.partition("lossy", 0)
        assert state is not None
        leader = next(b for b in brokers if b.broker_id == state.leader_id)
        follower = next(b for b in brokers if b.broker_id != state.leader_id)
        follower.faults.add(
            parse_spec({"name": "deaf", "kind": "drop", "peers": [leader.broker_id]})
        )
        async with Producer(bootstrap([leader]), acks=1, linger_ms=0) as producer:
            for i in range(3):
                await producer.send_and_wait("lossy", b"r%d" % i, partition=0)
        end = leader.replica_manager.partitions[("lossy", 0)].log.log_end_offset
        replica = follower.replica_manager.partitions[("lossy", 0)]
        await wait_until(
            lambda: follower.faults.describe()[0]["applied"] > 0, message="an answer was lost"
        )
        assert replica.log.log_end_offset < end
        follower.faults.remove("deaf")
        await wait_until(
            lambda: replica.log.log_end_offset == end,
            timeout=5,
            message="the follower caught up well within replica.socket.timeout.ms",
        )
