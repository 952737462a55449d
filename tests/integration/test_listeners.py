"""Named listeners, as Kafka has them (issue 42): three brokers, each with a client
listener (CLIENT), an inter-broker one (BROKER) and a controller one (CONTROLLER). Clients
are given the addresses of the listener they came in on; brokers replicate over BROKER and
form the quorum over CONTROLLER; a client listener refuses every inter-broker API, even to
a broker that proved the secret; a controller listener serves brokers only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory.broker.server import Broker, start_broker
from purgatory.clients import Consumer, Producer
from purgatory.clients.cluster_auth import authenticate
from purgatory.clients.connection import Connection
from purgatory.experiments.processes import free_ports
from purgatory.protocol import group_messages as g
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.kafka_wire import KafkaWire, request, request_frame
from tests.support import broker_config, running_cluster

SECRET = "tests-cluster-secret"  # tests.support.broker_config's
NAMES = ("CLIENT", "BROKER", "CONTROLLER")


def listener_settings(ports: dict[str, int]) -> dict[str, Any]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in NAMES),
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in NAMES),
        "inter.broker.listener.name": "BROKER",
        "controller.listener.names": "CONTROLLER",
    }


def named_cluster(n: int = 3) -> Any:
    """``n`` brokers with a CLIENT, a BROKER and a CONTROLLER listener each."""
    flat = free_ports(3 * n)
    ports = [dict(zip(NAMES, flat[3 * i : 3 * i + 3], strict=True)) for i in range(n)]
    return running_cluster(
        n,
        lambda i: (ports[i]["CONTROLLER"], listener_settings(ports[i])),
        **{"default.replication.factor": n},
    )


def kafka_metadata() -> Any:
    return request(
        ApiKey.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def api_versions_v3() -> Any:
    return request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")


def client_bootstrap(brokers: list[Broker]) -> str:
    return ",".join(f"127.0.0.1:{b.ports['CLIENT']}" for b in brokers)


async def metadata_ports(port: int) -> dict[int, int]:
    conn = await Connection.open("127.0.0.1", port)
    try:
        answer = await conn.send(ApiKey.METADATA, m.MetadataRequest(None, False))
    finally:
        await conn.close()
    return {b.node_id: b.port for b in answer.brokers}


async def test_clients_are_given_the_listener_they_came_in_on_and_brokers_replicate_on_theirs() -> (
    None
):
    async with named_cluster() as brokers:
        for listener in ("CLIENT", "BROKER"):
            expected = {b.broker_id: b.ports[listener] for b in brokers}
            for b in brokers:
                assert await metadata_ports(b.ports[listener]) == expected, listener
        # Kafka's protocol too: Metadata and FindCoordinator on CLIENT name CLIENT ports.
        wire = await KafkaWire.open(brokers[1].ports["CLIENT"])
        try:
            answer = await wire.call(ApiKey.METADATA, 12, kafka_metadata())
            assert {b.node_id: b.port for b in answer.brokers} == {
                b.broker_id: b.ports["CLIENT"] for b in brokers
            }
        finally:
            await wire.close()

        async with Producer(client_bootstrap(brokers), acks=-1, linger_ms=0) as producer:
            for i in range(20):
                await producer.send_and_wait("named", b"v%d" % i, partition=0)
        async with Consumer(client_bootstrap(brokers), auto_offset_reset="earliest") as consumer:
            await consumer.assign_topics(["named"])
            values: list[bytes] = []
            for _ in range(50):
                values += [r.value or b"" for r in await consumer.poll(timeout_ms=100)]
                if len(values) >= 20:
                    break
        assert values == [b"v%d" % i for i in range(20)]
        leader_id = brokers[0].metadata.partition("named", 0).leader_id
        leader = brokers[leader_id]
        # The followers fetch it over BROKER, as proven brokers; nothing else on CLIENT is.
        followers = {
            c.authenticated_broker
            for c in leader.socket_server.connections
            if c.listener.name == "BROKER"
        }
        assert set(followers) >= {b.broker_id for b in brokers if b is not leader}
        assert not any(
            c.authenticated_broker is not None
            for c in leader.socket_server.connections
            if c.listener.name == "CLIENT"
        )
        conn = await Connection.open("127.0.0.1", brokers[0].ports["CLIENT"])
        try:
            found = await conn.send(ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest("g"))
            for _ in range(100):
                if found.error_code == ErrorCode.NONE:
                    break
                await asyncio.sleep(0.05)  # the offsets topic is being made: asked again
                found = await conn.send(ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest("g"))
        finally:
            await conn.close()
        assert found.error_code == ErrorCode.NONE
        assert found.port == brokers[found.node_id].ports["CLIENT"]


async def test_a_client_listener_refuses_the_inter_broker_apis_even_to_a_proven_broker() -> None:
    async with named_cluster() as brokers:
        victim = brokers[2]
        conn = await Connection.open("127.0.0.1", brokers[0].ports["CLIENT"], client_id="broker-2")
        try:
            await authenticate(conn, SECRET, 2)  # the secret opens nothing on CLIENT
            for key, body, version in (
                (ApiKey.CONTROLLED_SHUTDOWN, ib.ControlledShutdownRequest(2, 1), 0),
                (ApiKey.BROKER_HEARTBEAT, ib.BrokerHeartbeatRequest(2, 1, 0), 0),
                (
                    ApiKey.FETCH,
                    m.FetchRequestV2(
                        2,
                        0,
                        1,
                        1 << 20,
                        [m.FetchTopicV2("t", [m.FetchPartitionV2(0, 0, 1 << 20, -1)])],
                        None,
                        -1,
                    ),
                    2,
                ),
            ):
                with pytest.raises(KafkaError) as refused:
                    await conn.send(key, body, version=version, timeout_ms=5000)
                assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                assert "client listener" in str(refused.value)
        finally:
            await conn.close()
        assert victim.broker_id in brokers[0].metadata.image.eligible_brokers()


async def test_a_controller_listener_serves_brokers_only() -> None:
    async with named_cluster() as brokers:
        port = brokers[0].ports["CONTROLLER"]
        conn = await Connection.open("127.0.0.1", port)
        try:
            versions = await conn.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest())
            assert versions.error_code == ErrorCode.NONE
            with pytest.raises(KafkaError) as refused:
                await conn.send(ApiKey.METADATA, m.MetadataRequest(None, False))
            assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert "controller listener" in str(refused.value)
            with pytest.raises(KafkaError):
                await conn.send(ApiKey.FIND_COORDINATOR, g.FindCoordinatorRequest("g"))
        finally:
            await conn.close()
        # A Kafka client is closed on, as Kafka does (ApiVersions is answered first).
        wire = await KafkaWire.open(port)
        try:
            await wire.call(ApiKey.API_VERSIONS, 3, api_versions_v3())
            await wire.send_raw(request_frame(ApiKey.METADATA, 12, 2, kafka_metadata()))
            assert await wire.closed()
        finally:
            await wire.close()


async def test_a_member_address_that_is_not_the_controller_listener_stops_the_broker() -> None:
    ports = dict(zip(NAMES, free_ports(3), strict=True))
    config = broker_config(
        0,
        members=f"0@127.0.0.1:{ports['CLIENT']},1@127.0.0.1:1",
        **listener_settings(ports),
    )
    with pytest.raises(
        ValueError,
        match=f"listeners puts node 0's CONTROLLER listener on port {ports['CONTROLLER']}, "
        f"but cluster.members gives node 0 the address 127.0.0.1:{ports['CLIENT']}",
    ):
        await start_broker(config)
    # A listener on port 0 is checked once bound: its port is known only then.
    with pytest.raises(ValueError, match="other nodes reach it on its CONTROLLER listener"):
        await start_broker(
            broker_config(
                0,
                members=f"0@127.0.0.1:{ports['CLIENT']},1@127.0.0.1:1",
                **listener_settings({**ports, "CONTROLLER": 0}),
            )
        )


async def test_a_single_node_with_a_controller_listener_starts_and_serves() -> None:
    ports = dict(zip(NAMES, free_ports(3), strict=True))
    broker = await start_broker(broker_config(0, **listener_settings(ports)))
    try:
        assert broker.members == {0: ("127.0.0.1", ports["CONTROLLER"])}
        assert await metadata_ports(ports["CLIENT"]) == {0: ports["CLIENT"]}
    finally:
        await broker.stop()
