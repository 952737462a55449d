"""Static-membership clusters: the controller's picture reaches every broker."""

from __future__ import annotations

import pytest

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Connection, Producer
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.support import bootstrap, running_cluster, wait_until


async def metadata(
    broker: Broker, topics: list[str] | None, auto: bool = False
) -> m.MetadataResponse:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        return await conn.send(ApiKey.METADATA, m.MetadataRequest(topics, auto))
    finally:
        await conn.close()


def leaders(response: m.MetadataResponse) -> list[int]:
    return [p.leader_id for t in response.topics for p in t.partitions]


async def test_a_topic_created_through_a_follower_broker_has_the_same_leaders_everywhere(
    cluster3: list[Broker],
) -> None:
    follower = next(b for b in cluster3 if b.controller is None)
    async with AdminClient(bootstrap([follower])) as admin:
        # Sent to a broker that is not the active controller: it must forward it.
        admin.cluster.controller_id = follower.broker_id
        result = await admin.create_topic("orders", 6)
    assert result.num_partitions == 6
    answers = [leaders(await metadata(b, ["orders"])) for b in cluster3]
    assert answers[0] == answers[1] == answers[2]
    assert sorted(set(answers[0])) == [0, 1, 2]
    controllers = {b.metadata.controller_id for b in cluster3}
    assert len(controllers) == 1 and cluster3[controllers.pop()].controller is not None


async def test_metadata_with_auto_creation_answers_with_the_new_topic(
    cluster3: list[Broker],
) -> None:
    response = await metadata(cluster3[1], ["fresh"], auto=True)
    assert response.topics[0].error_code == 0 and len(response.topics[0].partitions) == 1
    other = await metadata(cluster3[2], ["fresh"])
    assert leaders(other) == leaders(response)


async def test_unknown_topics_are_not_created_without_permission(cluster3: list[Broker]) -> None:
    response = await metadata(cluster3[0], ["ghost", "bad name"])
    assert [t.error_code for t in response.topics] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]


async def test_a_produce_to_an_unknown_topic_creates_it_for_the_retry(broker: Broker) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    from tests.integration.test_produce_fetch import produce_request

    first = await conn.send(ApiKey.PRODUCE, produce_request("auto", 0, [b"x"]))
    assert first.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await wait_until(lambda: "auto" in broker.metadata.topics, message="auto-created topic")
    retry = await conn.send(ApiKey.PRODUCE, produce_request("auto", 0, [b"x"]))
    assert retry.responses[0].partitions[0].error_code == 0
    await conn.close()


async def test_auto_creation_can_be_switched_off() -> None:
    async with running_cluster(1, auto_create_topics_enable=False) as brokers:
        response = await metadata(brokers[0], ["nope"], auto=True)
        assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            async with Producer(bootstrap(brokers), delivery_timeout_ms=500) as producer:
                await producer.send_and_wait("nope", b"x")


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (m.CreatableTopic("ok", 0), ErrorCode.INVALID_PARTITIONS),
        (m.CreatableTopic("ok", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (m.CreatableTopic("ok", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (m.CreatableTopic("a/b"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (m.CreatableTopic("ok", 1, 1, {"retention.bytes": "lots"}), ErrorCode.INVALID_CONFIG),
        (m.CreatableTopic("ok", 1, 1, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
    ],
)
async def test_bad_topic_creations_say_why(
    cluster3: list[Broker], topic: m.CreatableTopic, code: ErrorCode
) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        [result] = await admin.create_topics([topic])
    assert result.error_code == code and result.error_message
    assert "ok" not in cluster3[0].metadata.topics


async def test_creating_a_topic_twice_is_refused(cluster3: list[Broker]) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("once")
        with pytest.raises(KafkaError, match="TOPIC_ALREADY_EXISTS"):
            await admin.create_topic("once")


async def test_a_restarted_broker_gets_the_picture_again_and_never_leads_what_it_lost() -> None:
    """Logs are in memory: a broker that restarts has lost its replicas. One-replica
    partitions it led stay offline (their only in-sync replica lost the data) until an
    unclean election is allowed, which accepts the loss, as in Kafka."""
    from purgatory.broker.server import start_broker

    async with running_cluster(2, broker_heartbeat_interval_ms=50) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("t", 2)
        async with Producer(bootstrap(brokers), linger_ms=0) as producer:
            for p in range(2):
                await producer.send_and_wait("t", b"before", partition=p)
        config = brokers[1].config
        [lost] = [p.index for p in brokers[1].replica_manager.partitions.values()]
        await brokers[1].stop()
        brokers[1] = await start_broker(config)
        await wait_until(
            lambda: brokers[1].health_problem() is None, message="restarted broker healthy"
        )
        state = brokers[1].metadata.partition("t", lost)
        assert state is not None and (state.leader_id, state.isr) == (-1, [])
        async with Producer(bootstrap(brokers), linger_ms=0, retries=0) as producer:
            with pytest.raises(KafkaError, match="LEADER_NOT_AVAILABLE"):
                await producer.send_and_wait("t", b"lost", partition=lost)
        await brokers[0].change_config("unclean.leader.election.enable", True)
        await wait_until(
            lambda: (
                brokers[1].replica_manager.leader_partition("t", lost) is not None
                and (brokers[1].metadata.partition("t", lost) or state).leader_id == 1
            ),
            message="unclean election of the restarted broker",
        )
        async with Producer(bootstrap(brokers), linger_ms=0) as producer:
            md = await producer.send_and_wait("t", b"again", partition=lost)
        assert md.offset == 0  # what an unclean election means: the old records are gone


async def test_a_hung_broker_in_the_bootstrap_list_is_skipped(broker: Broker) -> None:
    import asyncio

    from purgatory.clients.cluster import ClientCluster

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, reads, never replies: a frozen process

    hung = [await asyncio.start_server(never_answer, "127.0.0.1", 0) for _ in range(4)]
    addresses = [f"127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in hung]
    try:
        for _ in range(3):  # whatever order the shuffle tries them in
            cluster = ClientCluster(
                ",".join([*addresses, f"127.0.0.1:{broker.port}"]), request_timeout_ms=100
            )
            response = await cluster.refresh([])
            assert [b.node_id for b in response.brokers] == [broker.broker_id]
            await cluster.close()
    finally:
        for server in hung:
            server.close()


async def test_partitions_added_through_a_follower_broker_are_served_everywhere(
    cluster3: list[Broker],
) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("growing", 2, 2, {"retention.bytes": "100000"})
        topic_id = cluster3[0].metadata.topics["growing"].topic_id
        admin.cluster.controller_id = 1  # a non-controller: it must forward and wait
        [result] = await admin.create_partitions({"growing": 5})
        assert result.error_code == ErrorCode.NONE, result.error_message
        # Answered only once the asked broker's own metadata shows the change.
        assert len(cluster3[1].metadata.topics["growing"].partitions) == 5
        [shrink] = await admin.create_partitions({"growing": 3})
        assert shrink.error_code == ErrorCode.INVALID_PARTITIONS
        assert "can only be added" in (shrink.error_message or "")
    await wait_until(
        lambda: all(len(b.metadata.topics["growing"].partitions) == 5 for b in cluster3),
        message="five partitions everywhere",
    )
    answers = [await metadata(b, ["growing"]) for b in cluster3]
    assert leaders(answers[0]) == leaders(answers[1]) == leaders(answers[2])
    assert all(a.topics[0].topic_id == topic_id for a in answers)
    # The topic keeps its id and configs: the new partitions' logs use the topic's retention.
    new = [
        b.replica_manager.partitions[("growing", 4)]
        for b in cluster3
        if ("growing", 4) in b.replica_manager.partitions
    ]
    assert len(new) == 2 and all(p.log.config.retention_bytes == 100000 for p in new)
    async with Producer(bootstrap(cluster3), acks=-1) as producer:
        sent = await producer.send_and_wait("growing", b"to the new one", partition=4)
    assert sent.partition == 4 and sent.offset == 0


async def test_idle_replicas_of_the_metadata_log_long_poll_in_the_leaders_fetch_purgatory(
    cluster3: list[Broker],
) -> None:
    """Nothing changes: the other two voters' metadata fetches wait on the quorum leader in
    its Fetch purgatory; a change wakes them at once, and every broker applies it."""
    controller = next(b for b in cluster3 if b.controller is not None)
    purgatory = controller.replica_manager.fetch_purgatory
    await wait_until(
        lambda: purgatory.watched == 2, message="both followers' fetches parked on the leader"
    )
    fetches = controller.metrics.for_request(ApiKey.FETCH, 2, follower=True).count
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("held", 2)
    offset = controller.metadata.epoch
    await wait_until(lambda: all(b.metadata.epoch >= offset for b in cluster3))
    # Woken by the change, not by their 500 ms timeouts: a handful of fetches, not a flood.
    assert 2 <= controller.metrics.for_request(ApiKey.FETCH, 2, follower=True).count - fetches < 40
    await wait_until(lambda: purgatory.watched == 2, message="parked again")
