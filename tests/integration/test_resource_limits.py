"""Bounded resources with Kafka's names (issue 42): max.broker.partitions caps the
replicas one broker holds (tied to the memory budget by default), and one request may
make at most MAX_RECORDS_PER_USER_OP metadata records, a Metadata request's
auto-creation included, as Kafka's controller bounds it."""

from __future__ import annotations

import pytest

from purgatory.broker.controller.quorum_controller import MAX_RECORDS_PER_USER_OP
from purgatory.clients import AdminClient
from purgatory.clients.connection import Connection
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.support import bootstrap, running_cluster


async def test_a_topic_that_would_take_a_broker_past_its_partition_cap_is_refused() -> None:
    async with running_cluster(2, max_broker_partitions=10) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("fits", 8, 2)  # 8 replicas on each broker
            with pytest.raises(KafkaError, match=r"max\.broker\.partitions is 10") as refused:
                await admin.create_topic("too-many", 3, 2)
            assert refused.value.code == ErrorCode.POLICY_VIOLATION
            # Entries are judged one by one: the one that fits is made.
            results = await admin.create_topics(
                [m.CreatableTopic("big", 5, 1), m.CreatableTopic("small", 2, 2)]
            )
            assert [r.error_code for r in results] == [ErrorCode.POLICY_VIOLATION, 0]
            [grown] = await admin.create_partitions({"small": 3})
            assert grown.error_code == ErrorCode.POLICY_VIOLATION
            assert "max.broker.partitions" in (grown.error_message or "")
        assert "too-many" not in brokers[0].metadata.topics
        assert sorted(brokers[0].metadata.topics) == ["fits", "small"]
        # The cap is dynamic: raised, the same topic is made.
        for b in brokers:
            await b.change_config("max.broker.partitions", "20")
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("too-many", 3, 2)


async def test_one_metadata_request_cannot_auto_create_a_flood_of_topics() -> None:
    """10,000 topics per Metadata request are allowed; auto-creating 6,000 of them would
    take 12,000 metadata records, so none is made (Kafka's controller refuses an operation
    of more than 10,000 records whole)."""
    names = [f"flood-{i}" for i in range(6000)]
    async with running_cluster(1) as (broker,):
        conn = await Connection.open("127.0.0.1", broker.port)
        try:
            answer = await conn.send(
                ApiKey.METADATA, m.MetadataRequest(names, True), timeout_ms=60000
            )
        finally:
            await conn.close()
        assert {t.error_code for t in answer.topics} == {ErrorCode.POLICY_VIOLATION}
        assert not any(name.startswith("flood-") for name in broker.metadata.topics)
        # A request within the bound is served.
        async with AdminClient(bootstrap([broker])) as admin:
            results = await admin.create_topics(
                [m.CreatableTopic(f"ok-{i}", 1, 1) for i in range(MAX_RECORDS_PER_USER_OP // 4)]
            )
        assert all(r.error_code == 0 for r in results)
