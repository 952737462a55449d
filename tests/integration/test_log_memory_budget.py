"""log.memory.max.bytes: past the broker-wide budget, the oldest committed segments of
the largest logs are deleted (as retention would), on leaders and followers alike, with
a warning and a metric; acknowledged produces keep succeeding and the newest records stay
readable."""

from __future__ import annotations

from prometheus_client import generate_latest

from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient
from purgatory.protocol.errors import ErrorCode
from tests.integration.test_replication import FAST, leader_of, partition, produce
from tests.support import bootstrap, running_cluster, wait_until

BUDGET = 12_000


def held(broker: Broker) -> int:
    return sum(p.log.size_bytes for p in broker.replica_manager.partitions.values())


async def test_past_the_budget_the_largest_logs_lose_their_oldest_committed_segments() -> None:
    async with running_cluster(2, log_memory_max_bytes=BUDGET, **FAST) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("budget", 2, 2, {"segment.bytes": "2000"})
        await wait_until(lambda: all(len(b.replica_manager.partitions) == 2 for b in brokers))
        leader0 = leader_of(brokers, "budget", 0)
        leader1 = leader_of(brokers, "budget", 1)
        for _ in range(3):  # the small log
            response = await produce(leader1, "budget", [b"s" * 500], acks=-1, partition=1)
            assert response.error_code == ErrorCode.NONE
        for i in range(60):  # the large one: 60 x ~560 bytes, well past the budget
            response = await produce(leader0, "budget", [bytes([i]) * 500], acks=-1)
            assert response.error_code == ErrorCode.NONE
            assert response.base_offset == i  # offsets are never reused
        for broker in brokers:  # leader and follower alike
            budget = broker.replica_manager.memory_budget
            await wait_until(lambda b=broker: partition(b, "budget").log.log_end_offset == 60)
            assert budget.memory.used == held(broker) <= BUDGET
            assert budget.evicted_segments > 0
            big, small = partition(broker, "budget", 0), partition(broker, "budget", 1)
            assert big.log.log_start_offset > 0  # the largest log gave its oldest segments
            assert small.log.log_start_offset == 0  # the small one kept everything
            assert big.log.log_start_offset <= big.high_watermark  # only committed ones went
            events = [e["event"] for e in RECENT_LOGS.events(broker.broker_id)]
            assert "log_memory_budget_evicted" in events
            text = generate_latest(broker.metrics.registry).decode()
            assert f"purgatory_log_memory_bytes {float(budget.memory.used)}" in text
            assert "purgatory_log_memory_evicted_segments_total" in text
        # The newest records are still there to read.
        newest = partition(leader0, "budget").log.read(59, 10**6)
        assert newest

        # Lowering the budget at run time applies at once.
        before = leader0.replica_manager.memory_budget.evicted_segments
        await leader0.change_config("log.memory.max.bytes", 5_000)
        assert leader0.replica_manager.memory_budget.evicted_segments > before
        assert held(leader0) <= 5_000 or all(
            len(p.log.segments) == 1 for p in leader0.replica_manager.partitions.values()
        )


async def test_a_budget_only_active_segments_exceed_is_reported_not_enforced() -> None:
    async with running_cluster(1, log_memory_max_bytes=1_000) as (broker,):
        async with AdminClient(bootstrap([broker])) as admin:
            await admin.create_topic("active-only", 1, 1)
        for i in range(4):
            response = await produce(broker, "active-only", [bytes([i]) * 500], acks=1)
            assert response.error_code == ErrorCode.NONE
        log = partition(broker, "active-only").log
        assert len(log.segments) == 1 and log.log_start_offset == 0  # nothing could go
        events = [e["event"] for e in RECENT_LOGS.events(broker.broker_id)]
        assert "log_memory_budget_unreachable" in events
        budget = broker.replica_manager.memory_budget
        # Checked again only after another sixteenth of the budget (at least 1 MiB).
        assert budget.memory.trigger >= budget.memory.used + (1 << 20) - 600 * 4
