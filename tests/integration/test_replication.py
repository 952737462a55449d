"""Replication on in-process 3-broker clusters: ISR, high watermark, acks=-1, followers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from purgatory.broker.server import Broker, start_broker
from purgatory.clients import AdminClient, Connection
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.records import decode_records
from tests.integration.test_produce_fetch import produce_request
from tests.support import bootstrap, running_cluster, wait_until

FAST = {
    "replica_lag_time_max_ms": 300,
    "replica_fetch_wait_max_ms": 100,
    "broker_heartbeat_interval_ms": 50,
    "broker_session_timeout_ms": 600,
    "replica_fetch_backoff_ms": 20,
    "leader_imbalance_check_interval_seconds": 1,
}


@pytest.fixture
async def cluster() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3, **FAST) as brokers:
        yield brokers


async def create(
    brokers: list[Broker], topic: str, partitions: int = 1, rf: int = 3, min_isr: int = 1
) -> None:
    async with AdminClient(bootstrap(brokers)) as admin:
        await admin.create_topic(topic, partitions, rf, {"min.insync.replicas": str(min_isr)})
    await wait_until(
        lambda: all(len(b.replica_manager.partitions) >= partitions for b in brokers),
        message="every replica created",
    )


def leader_of(brokers: list[Broker], topic: str, partition: int = 0) -> Broker:
    leader_id = brokers[0].metadata.partition(topic, partition).leader_id  # type: ignore[union-attr]
    return next(b for b in brokers if b.broker_id == leader_id)


def followers_of(brokers: list[Broker], topic: str, partition: int = 0) -> list[Broker]:
    leader = leader_of(brokers, topic, partition)
    return [b for b in brokers if b is not leader]


def hold(follower: Broker, leader: Broker, paused: bool = True) -> None:
    """Stop (or resume) a follower's fetching from a leader: a slow or hung follower."""
    follower.replica_manager.fetchers.fetchers[leader.broker_id].set_paused(paused)


async def produce(
    broker: Broker,
    topic: str,
    values: list[bytes],
    acks: int = -1,
    timeout_ms: int = 10_000,
    partition: int = 0,
) -> m.PartitionProduceResponse:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        request = produce_request(topic, partition, values, acks=acks)
        request.timeout_ms = timeout_ms
        response = await conn.send(ApiKey.PRODUCE, request)
        return response.responses[0].partitions[0]
    finally:
        await conn.close()


def partition(broker: Broker, topic: str, index: int = 0) -> Any:
    return broker.replica_manager.partitions[(topic, index)]


async def test_acks_all_answers_once_every_in_sync_replica_has_the_records(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", partitions=3)
    for p in range(3):
        for i in range(5):
            result = await produce(
                leader_of(cluster, "t", p), "t", [f"{p}-{i}".encode()], partition=p
            )
            assert result.error_code == 0 and result.base_offset == i
        leader = leader_of(cluster, "t", p)
        # Answered only once the HW passed it: every ISR member had it by then.
        assert partition(leader, "t", p).high_watermark == 5
        for follower in followers_of(cluster, "t", p):
            assert partition(follower, "t", p).log.log_end_offset == 5
    for p in range(3):
        leader_bytes = b"".join(partition(leader_of(cluster, "t", p), "t", p).log.read(0, 1 << 30))
        for follower in followers_of(cluster, "t", p):
            # Followers hold the leader's batches byte for byte, offsets included.
            assert b"".join(partition(follower, "t", p).log.read(0, 1 << 30)) == leader_bytes


async def test_answers_completed_together_go_out_in_one_write() -> None:
    """Twenty acks=-1 produces of one connection wait for the ISR; the follower fetch that
    raises the high watermark completes them all, and their answers leave in one write, in
    request order, not one write (one system call) each."""
    async with running_cluster(3, **{**FAST, "replica_lag_time_max_ms": 30_000}) as brokers:
        await create(brokers, "t")
        leader = leader_of(brokers, "t")
        for follower in followers_of(brokers, "t"):
            hold(follower, leader)
        # A fetch each follower had parked before the hold takes this one; then they stop.
        await produce(leader, "t", [b"first"], acks=1)
        await wait_until(
            lambda: all(
                partition(f, "t").log.log_end_offset == 1 for f in followers_of(brokers, "t")
            ),
            message="the followers' last fetches",
        )
        conn = await Connection.open("127.0.0.1", leader.port, client_id="coalesced")
        sends = [
            asyncio.ensure_future(
                conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"%d" % i], acks=-1))
            )
            for i in range(20)
        ]
        purgatory = leader.replica_manager.produce_purgatory
        await wait_until(lambda: purgatory.delayed == 20, message="20 produces waiting")
        (server_side,) = [c for c in leader.socket_server.connections if c.client_id == "coalesced"]
        assert server_side.transport is not None
        transport_write = server_side.transport.write
        writes: list[int] = []

        def counting_write(data: Any) -> None:
            writes.append(len(data))
            transport_write(data)

        server_side.transport.write = counting_write  # type: ignore[method-assign]
        for follower in followers_of(brokers, "t"):
            hold(follower, leader, paused=False)
        responses = await asyncio.gather(*sends)
        assert [r.responses[0].partitions[0].base_offset for r in responses] == list(range(1, 21))
        assert len(writes) == 1
        await conn.close()


async def test_consumers_never_read_past_the_high_watermark(cluster: list[Broker]) -> None:
    await create(cluster, "t")
    leader = leader_of(cluster, "t")
    for follower in followers_of(cluster, "t"):
        hold(follower, leader)
    result = await produce(leader, "t", [b"not yet replicated"], acks=1)
    assert result.error_code == 0
    p = partition(leader, "t")
    assert (p.log.log_end_offset, p.high_watermark) == (1, 0)
    conn = await Connection.open("127.0.0.1", leader.port)
    request = m.FetchRequest(
        -1, 0, 1, 1 << 20, [m.FetchTopic("t", [m.FetchPartition(0, 0, 1 << 20)])]
    )
    hidden = (await conn.send(ApiKey.FETCH, request)).responses[0].partitions[0]
    assert (hidden.records, hidden.high_watermark) == (b"", 0)
    for follower in followers_of(cluster, "t"):
        hold(follower, leader, paused=False)
    await wait_until(lambda: p.high_watermark == 1, message="HW to advance")
    visible = (await conn.send(ApiKey.FETCH, request)).responses[0].partitions[0]
    assert [r.value for r in decode_records(visible.records)] == [b"not yet replicated"]
    await conn.close()


async def test_a_lagging_follower_leaves_the_isr_and_a_waiting_produce_then_completes(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", min_isr=2)
    leader = leader_of(cluster, "t")
    slow, fine = followers_of(cluster, "t")
    hold(slow, leader)
    result = await produce(leader, "t", [b"x"])  # waits until the ISR shrinks past ``slow``
    assert result.error_code == 0
    p = partition(leader, "t")
    assert slow.broker_id not in p.isr and p.high_watermark == 1
    assert fine.broker_id in p.isr  # only the one that lagged left
    assert leader.replica_manager.replication_metrics.isr_shrinks == 1
    assert p.under_replicated() and not p.under_min_isr()
    # Every broker learns the new ISR from the controller.
    await wait_until(
        lambda: all(slow.broker_id not in b.metadata.partition("t", 0).isr for b in cluster),
        message="the new ISR everywhere",
    )
    hold(slow, leader, paused=False)
    await wait_until(lambda: slow.broker_id in p.isr, message="the follower back in the ISR")
    assert leader.replica_manager.replication_metrics.isr_expands == 1
    assert partition(slow, "t").log.log_end_offset == 1


async def test_too_few_in_sync_replicas_refuse_acks_all_before_appending(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", min_isr=3)
    leader = leader_of(cluster, "t")
    slow = followers_of(cluster, "t")[0]
    hold(slow, leader)
    await wait_until(lambda: len(partition(leader, "t").isr) == 2, message="the ISR to shrink")
    refused = await produce(leader, "t", [b"x"])
    assert (
        refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        and "min.insync.replicas is 3" in refused.error_message
    )
    assert partition(leader, "t").log.log_end_offset == 0  # nothing appended
    assert (await produce(leader, "t", [b"y"], acks=1)).error_code == 0  # acks=1 does not care


async def test_an_isr_shrinking_below_the_minimum_while_waiting_is_reported(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", min_isr=3)
    leader = leader_of(cluster, "t")
    hold(followers_of(cluster, "t")[0], leader)
    result = await produce(leader, "t", [b"x"])
    assert result.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert partition(leader, "t").log.log_end_offset == 1  # appended all the same


async def test_acks_all_times_out_when_the_isr_cannot_catch_up() -> None:
    async with running_cluster(3, **{**FAST, "replica_lag_time_max_ms": 60_000}) as brokers:
        await create(brokers, "t")
        leader = leader_of(brokers, "t")
        hold(followers_of(brokers, "t")[0], leader)
        result = await produce(leader, "t", [b"x"], timeout_ms=200)
        assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert leader.replica_manager.produce_purgatory.expirations == 1


async def test_parked_follower_fetches_wake_when_data_is_appended() -> None:
    # Followers long-poll for 30 s: replication within the deadline below proves that
    # appends wake them, not their timeouts.
    async with running_cluster(
        3, **{**FAST, "replica_fetch_wait_max_ms": 30_000, "replica_lag_time_max_ms": 60_000}
    ) as brokers:
        await create(brokers, "t")
        leader = leader_of(brokers, "t")
        await wait_until(
            lambda: leader.replica_manager.fetch_purgatory.delayed == 2,
            message="both followers parked",
        )
        assert (await produce(leader, "t", [b"wake"])).error_code == 0
        for follower in followers_of(brokers, "t"):
            assert partition(follower, "t").log.log_end_offset == 1


async def test_followers_record_total_true_and_wait_latency_per_leader() -> None:
    async with running_cluster(3, **{**FAST, "replica_fetch_wait_max_ms": 50}) as brokers:
        await create(brokers, "t")
        leader = leader_of(brokers, "t")
        follower = followers_of(brokers, "t")[0]
        stats = follower.replica_manager.fetchers.stats[leader.broker_id]
        await wait_until(lambda: stats.requests >= 5, message="a few idle long polls")
        latency = stats.latency
        assert latency.wait.sum >= 0.04 * (stats.requests - 1)  # idle polls wait ~max_wait
        # True latency leaves the waiting out: far below the total for idle long polls.
        assert latency.true.sum < latency.total.sum / 2
        assert sum(latency.total.counts) == stats.requests


async def test_a_restarted_follower_replicates_again_from_the_log_start(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t")
    leader = leader_of(cluster, "t")
    for i in range(10):
        assert (await produce(leader, "t", [str(i).encode()])).error_code == 0
    victim = next(b for b in followers_of(cluster, "t") if b.controller is None)
    index = cluster.index(victim)
    config = victim.config
    await victim.stop()
    cluster[index] = restarted = await start_broker(config)
    await wait_until(lambda: restarted.health_problem() is None, message="restarted broker healthy")
    await wait_until(
        lambda: (
            ("t", 0) in restarted.replica_manager.partitions
            and partition(restarted, "t").log.log_end_offset == 10
        ),
        message="re-replication",
    )
    await wait_until(
        lambda: restarted.broker_id in partition(leader, "t").isr, message="back in the ISR"
    )


async def test_partitions_led_by_a_dead_broker_get_a_new_leader_from_the_isr(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", partitions=3)
    victim = next(b for b in cluster if b.controller is None)
    led = [
        p for p in range(3) if cluster[0].metadata.partition("t", p).leader_id == victim.broker_id
    ]
    assert led
    for p in led:
        assert (await produce(victim, "t", [b"before"], partition=p)).error_code == 0
    epochs = {p: cluster[0].metadata.partition("t", p).leader_epoch for p in led}  # type: ignore[union-attr]
    await victim.stop()
    controller = next(b for b in cluster if b.controller is not None)
    await wait_until(
        lambda: victim.broker_id not in controller.metadata.live_brokers,
        message="the dead broker fenced",
    )
    response = controller.apis.metadata_response(["t"], controller.endpoints())
    for part in response.topics[0].partitions:
        assert part.error_code == 0 and part.leader_id not in (-1, victim.broker_id)
        assert victim.broker_id not in part.isr_nodes
    for p in led:
        state = controller.metadata.partition("t", p)
        assert state is not None and state.leader_epoch == epochs[p] + 1
        new_leader = next(b for b in cluster if b.broker_id == state.leader_id)
        reply = await produce(new_leader, "t", [b"after"], partition=p)
        assert (reply.error_code, reply.base_offset) == (0, 1)  # offset 0 kept, none reused
    cluster.remove(victim)
    restarted = await start_broker(victim.config)
    cluster.append(restarted)
    await wait_until(
        lambda: all(
            restarted.broker_id in controller.metadata.partition("t", p).isr  # type: ignore[union-attr]
            for p in range(3)
        ),
        message="the restarted broker caught up and rejoined every ISR",
    )
    for p in led:
        assert partition(restarted, "t", p).log.log_end_offset == 2
    # auto.leader.rebalance.enable: its preferred partitions come back to it.
    await wait_until(
        lambda: all(
            controller.metadata.partition("t", p).leader_id == restarted.broker_id  # type: ignore[union-attr]
            for p in led
        ),
        message="preferred leaders restored",
    )
    for p in led:
        reply = await produce(restarted, "t", [b"preferred"], partition=p)
        assert (reply.error_code, reply.base_offset) == (0, 2)


async def test_the_controller_fences_stale_and_invalid_isr_changes(cluster: list[Broker]) -> None:
    await create(cluster, "t")
    controller = next(b for b in cluster if b.controller is not None).controller
    assert controller is not None
    state = controller.image.topics["t"].partitions[0]
    others = [r for r in state.replicas if r != state.leader_id]

    async def alter(
        broker_id: int, leader_epoch: int, isr: list[int], partition_epoch: int, epochs: Any = ()
    ) -> int:
        request = ib.AlterPartitionRequest(
            broker_id,
            [
                ib.AlterPartitionTopic(
                    "t",
                    [
                        ib.AlterPartitionPartition(
                            0, leader_epoch, isr, partition_epoch, list(epochs)
                        )
                    ],
                )
            ],
        )
        response = await controller.alter_partition(request)
        return response.topics[0].partitions[0].error_code

    assert (
        await alter(others[0], state.leader_epoch, state.isr, state.partition_epoch)
        == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        await alter(state.leader_id, state.leader_epoch, state.isr, state.partition_epoch + 5)
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert (
        await alter(state.leader_id, state.leader_epoch, others, state.partition_epoch)
        == ErrorCode.INVALID_REQUEST
    )
    # KIP-903: a member named with a broker epoch its current run does not have.
    stale = [controller.image.brokers[r].broker_epoch - 1 for r in state.isr]
    assert (
        await alter(state.leader_id, state.leader_epoch, state.isr, state.partition_epoch, stale)
        == ErrorCode.INELIGIBLE_REPLICA
    )
    shrink = [state.leader_id]
    assert await alter(state.leader_id, state.leader_epoch, shrink, state.partition_epoch) == 0
    # Answered once committed: the controller's broker has applied it, the others follow.
    assert controller.raft.high_watermark > controller.image.offset
    await wait_until(
        lambda: all(
            b.metadata.partition("t", 0).partition_epoch == state.partition_epoch + 1  # type: ignore[union-attr]
            for b in cluster
        ),
        message="every broker holding the change",
    )


async def test_state_shows_every_replicas_log_end_and_the_isr(cluster: list[Broker]) -> None:
    await create(cluster, "t")
    leader = leader_of(cluster, "t")
    await produce(leader, "t", [b"a", b"b"])
    [entry] = leader.state().partitions
    assert entry.role == "leader" and sorted(entry.isr) == [0, 1, 2]
    assert entry.high_watermark == 2
    assert set(entry.replica_log_end_offsets) == {"0", "1", "2"}
    assert entry.replica_log_end_offsets[str(leader.broker_id)] == 2


async def test_a_new_controller_is_elected_when_the_active_one_dies_and_the_old_one_rejoins(
    cluster: list[Broker],
) -> None:
    await create(cluster, "t", partitions=3)
    old = next(b for b in cluster if b.controller is not None)
    topic_id = old.metadata.topics["t"].topic_id
    cluster.remove(old)
    await old.stop()
    # The two voters left are a majority: one of them is elected.
    await wait_until(
        lambda: any(b.controller is not None for b in cluster),
        timeout=15,
        message="a new active controller",
    )
    heir = next(b for b in cluster if b.controller is not None)
    await wait_until(
        lambda: all(b.controller_id == heir.broker_id for b in cluster),
        message="everyone following it",
    )
    assert heir.raft.epoch > old.raft.epoch
    assert heir.controller.image.topics["t"].topic_id == topic_id  # type: ignore[union-attr]
    # The new controller works: ISRs lose the dead broker, topics can be created.
    gone = old.broker_id
    await isr_of_partitions_led_by_the_living(cluster, heir, gone, holds=False)
    async with AdminClient(bootstrap(cluster)) as admin:
        await admin.create_topic("after", 1, 2)
    # The old controller comes back with its metadata log (metadata.log.dir): it remembers
    # its votes and the topics, follows the new leader, and catches up.
    returned = await start_broker(old.config)
    cluster.append(returned)
    await wait_until(lambda: returned.health_problem() is None, message="it rejoins")
    assert returned.controller_id == heir.broker_id
    assert returned.metadata.topics["t"].topic_id == topic_id
    assert "after" in returned.metadata.topics
    await isr_of_partitions_led_by_the_living(cluster, heir, gone, holds=True)


async def isr_of_partitions_led_by_the_living(
    cluster: list[Broker], heir: Broker, broker: int, *, holds: bool
) -> None:
    """Wait until the ISR of each "t" partition not led by ``broker`` does (not) hold it."""
    for index in range(3):
        leader_id = heir.metadata.partition("t", index).leader_id  # type: ignore[union-attr]
        if leader_id == broker:
            continue
        state = partition(next(b for b in cluster if b.broker_id == leader_id), "t", index)
        await wait_until(lambda s=state: (broker in s.isr) == holds, message=f"ISR of t-{index}")
