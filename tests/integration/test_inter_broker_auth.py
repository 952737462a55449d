"""Strangers cannot run the cluster (issue 42): every inter-broker and controller API, and
a follower's fetch, sent on a connection that has not proved it holds the cluster secret
is refused with CLUSTER_AUTHORIZATION_FAILED and changes nothing; a wrong secret fails
the exchange and closes the connection; the brokers themselves prove it and work."""

from __future__ import annotations

from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.clients.admin import AdminClient
from purgatory.clients.cluster_auth import AuthenticationFailed, authenticate
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import INTER_BROKER_APIS, ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.support import bootstrap, running_cluster, wait_until

SECRET = "tests-cluster-secret"  # tests.support.broker_config's


def forged(brokers: list[Broker]) -> dict[ApiKey, tuple[Any, int]]:
    """The attacks of issue 42, each as the request a stranger sends (with the version)."""
    leader = next(b for b in brokers if b.raft.quorum.state.name == "leader")
    epoch = leader.raft.epoch
    victim = next(b for b in brokers if b is not leader).broker_id
    topic = [ib.AlterPartitionTopic("t", [ib.AlterPartitionPartition(0, 0, [0], 0)])]
    follower_fetch = m.FetchRequestV2(
        victim,
        0,
        1,
        1 << 20,
        [m.FetchTopicV2("t", [m.FetchPartitionV2(0, 10**9, 1 << 20, -1)])],
        None,
        -1,
    )
    create = m.CreateTopicsRequest([m.CreatableTopic("forged", 1, 1)], 1000, False)
    from purgatory.protocol.api import encode_request_into

    envelope_body = bytearray()
    encode_request_into(envelope_body, ApiKey.CREATE_TOPICS, 0, 1, "x", create)
    return {
        ApiKey.VOTE: (rm.VoteRequest("purgatory", victim, epoch + 1000, epoch + 1000, 10**9), 0),
        ApiKey.BEGIN_QUORUM_EPOCH: (
            rm.BeginQuorumEpochRequest("purgatory", victim, epoch + 1000),
            0,
        ),
        ApiKey.END_QUORUM_EPOCH: (
            rm.EndQuorumEpochRequest("purgatory", leader.broker_id, epoch, [victim]),
            0,
        ),
        ApiKey.FETCH_SNAPSHOT: (rm.FetchSnapshotRequest("purgatory", victim, epoch, 0, 0), 0),
        ApiKey.BROKER_REGISTRATION: (ib.BrokerRegistrationRequest(victim, "f" * 32, "x", 1), 0),
        ApiKey.BROKER_HEARTBEAT: (ib.BrokerHeartbeatRequest(victim, 1, 0), 0),
        ApiKey.ALTER_PARTITION: (ib.AlterPartitionRequest(leader.broker_id, topic), 0),
        ApiKey.CONTROLLED_SHUTDOWN: (ib.ControlledShutdownRequest(victim, 1), 0),
        ApiKey.ENVELOPE: (ib.EnvelopeRequest(ApiKey.CREATE_TOPICS, 0, bytes(envelope_body)), 0),
        ApiKey.WRITE_TXN_MARKERS: (
            ib.WriteTxnMarkersRequest([ib.WritableTxnMarker(1, 0, False, 10**6, [("t", 0)])]),
            0,
        ),
        ApiKey.READ_SHARE_GROUP_STATE: (ib.ReadShareGroupStateRequest("g", "00" * 16, 0, -1), 0),
        ApiKey.WRITE_SHARE_GROUP_STATE: (
            ib.WriteShareGroupStateRequest("g", "00" * 16, 0, 0, 10**6, 0, []),
            0,
        ),
        ApiKey.FETCH: (follower_fetch, 2),
    }


def picture(brokers: list[Broker]) -> Any:
    """What a forged request could have changed: quorum epochs, topics, ISRs, fencing,
    the partition's log (a forged marker)."""
    return [
        (
            b.raft.epoch,
            b.replica_manager.partitions[("t", 0)].log.log_end_offset,
            sorted(b.metadata.topics),
            [(p.leader_id, p.leader_epoch, list(p.isr)) for p in b.metadata.topics["t"].partitions],
            sorted(b.metadata.live_brokers),
        )
        for b in brokers
    ]


async def test_every_forged_inter_broker_request_is_refused_and_changes_nothing() -> None:
    async with running_cluster(3, **{"default.replication.factor": 3}) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("t")
        await wait_until(lambda: all("t" in b.metadata.topics for b in brokers))
        attacks = forged(brokers)
        assert set(attacks) == {*INTER_BROKER_APIS, ApiKey.FETCH}
        before = picture(brokers)
        for target in brokers:
            for key, (request, version) in attacks.items():
                # A client id of a broker changes nothing: only the secret does.
                conn = await Connection.open("127.0.0.1", target.port, client_id="broker-1")
                with pytest.raises(KafkaError) as refused:
                    await conn.send(key, request, version=version, timeout_ms=5000)
                assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, key
                await conn.close()
        assert picture(brokers) == before
        assert "forged" not in brokers[0].metadata.topics


async def test_a_wrong_secret_fails_the_exchange_and_closes_the_connection() -> None:
    async with running_cluster(2) as brokers:
        conn = await Connection.open("127.0.0.1", brokers[0].port, client_id="broker-1")
        with pytest.raises(AuthenticationFailed):
            await authenticate(conn, "not-the-secret", 1)
        with pytest.raises((ConnectionClosed, KafkaError)):
            await conn.send(ApiKey.API_VERSIONS, m.ApiVersionsRequest(), timeout_ms=2000)
        await conn.close()


async def test_the_right_secret_opens_the_inter_broker_apis() -> None:
    async with running_cluster(2) as brokers:
        conn = await Connection.open("127.0.0.1", brokers[0].port, client_id="broker-1")
        await authenticate(conn, SECRET, 1)
        answer = await conn.send(
            ApiKey.FETCH_SNAPSHOT, rm.FetchSnapshotRequest("purgatory", 1, 0, 0, 0), version=0
        )
        assert answer.error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        await conn.close()


async def test_a_cluster_without_a_secret_refuses_to_start() -> None:
    from tests.support import broker_config

    config = broker_config(0, members="0@127.0.0.1:1,1@127.0.0.1:2", cluster_secret="")
    with pytest.raises(ValueError, match=r"cluster\.secret is required"):
        Broker(config)
