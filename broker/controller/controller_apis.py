"""ControllerApis: the APIs a node serves as a member of the metadata quorum and, when it
is the active controller, as the controller (Kafka's ControllerApis). One table, by API
key, for both protocols' listeners and the simulation:

- the quorum's: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54), FetchSnapshot (59)
  (the metadata log's Fetch goes to ``KafkaRaftClient.handle_fetch`` from the Fetch
  handler, by its topic; DescribeQuorum, which any broker answers by asking the leader,
  to ``Broker.describe_quorum``);
- the controller's: BrokerRegistration (62), BrokerHeartbeat (63), AlterPartition (56),
  ControlledShutdown (7), and Envelope (58), which carries a change a broker forwards
  (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterConfigs,
  IncrementalAlterConfigs, AlterUserScramCredentials, CreateAcls, DeleteAcls,
  AlterClientQuotas).

A controller API reaching a node that is not the active controller is answered
NOT_CONTROLLER, never served nor passed on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from purgatory.broker.controller.election import Election
from purgatory.broker.controller.quorum_controller import ElectionTimedOut, QuorumController
from purgatory.broker.raft.kafka_raft_client import KafkaRaftClient
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol.api import SCHEMAS, ApiKey
from purgatory.protocol.errors import DECODE_ERRORS, ErrorCode, KafkaError

_encoder = msgspec.msgpack.Encoder()

# What each controller API answers when this node cannot serve it.
_REFUSALS: dict[int, Callable[[int, str], Any]] = {
    ApiKey.BROKER_REGISTRATION: lambda code, msg: ib.BrokerRegistrationResponse(code, msg),
    ApiKey.BROKER_HEARTBEAT: lambda code, msg: ib.BrokerHeartbeatResponse(code),
    ApiKey.ALTER_PARTITION: lambda code, msg: ib.AlterPartitionResponse(code, []),
    ApiKey.CONTROLLED_SHUTDOWN: lambda code, msg: ib.ControlledShutdownResponse(code, []),
    ApiKey.ENVELOPE: lambda code, msg: ib.EnvelopeResponse(code),
}

# Requests a broker forwards in an Envelope (Kafka forwards these to the controller too).
FORWARDED = (
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.ALTER_CLIENT_QUOTAS,
)

# How long a config or credential change waits for the brokers to apply it (the requests
# carry no timeout).
CONFIG_APPLY_TIMEOUT_MS = 5000


class ControllerApis:
    def __init__(self, raft: KafkaRaftClient, controller: QuorumController | None) -> None:
        self.raft = raft
        self.controller = controller

    def handlers(self) -> dict[int, Callable[[Any], Any]]:
        """API key -> handler(request): the response, or an awaitable of it."""
        raft = self.raft
        return {
            ApiKey.VOTE: raft.handle_vote,
            ApiKey.BEGIN_QUORUM_EPOCH: raft.handle_begin_quorum_epoch,
            ApiKey.END_QUORUM_EPOCH: raft.handle_end_quorum_epoch,
            ApiKey.FETCH_SNAPSHOT: raft.handle_fetch_snapshot,
            **{key: self._bind(key) for key in _REFUSALS},
        }

    def _bind(self, key: int) -> Callable[[Any], Awaitable[Any]]:
        async def handle(request: Any) -> Any:
            return await self.serve(key, request)

        return handle

    @property
    def active(self) -> bool:
        return self.controller is not None and self.controller.active

    async def serve(self, key: int, request: Any) -> Any:
        """Serve a controller API here, as the active controller, or refuse it."""
        controller = self.controller
        if controller is None or not controller.active:
            return _REFUSALS[key](ErrorCode.NOT_CONTROLLER, "not the active controller")
        try:
            if key == ApiKey.BROKER_REGISTRATION:
                return await controller.register_broker(request)
            if key == ApiKey.BROKER_HEARTBEAT:
                return await controller.heartbeat(request)
            if key == ApiKey.ALTER_PARTITION:
                return await controller.alter_partition(request)
            if key == ApiKey.CONTROLLED_SHUTDOWN:
                return await controller.controlled_shutdown(request)
            return await self._envelope(controller, request)
        except KafkaError as exc:  # leadership lost while it waited for the commit
            return _REFUSALS[key](exc.code, str(exc))

    async def _envelope(self, controller: QuorumController, request: ib.EnvelopeRequest) -> Any:
        key, version = request.api_key, request.api_version
        schemas = SCHEMAS.get((ApiKey(key), version)) if key in FORWARDED else None
        if schemas is None:
            return ib.EnvelopeResponse(ErrorCode.INVALID_REQUEST)
        try:
            body = msgspec.msgpack.decode(request.request_data, type=schemas[0])
        except (*DECODE_ERRORS, msgspec.ValidationError):
            return ib.EnvelopeResponse(ErrorCode.INVALID_REQUEST)
        response = await self.topic_change(controller, key, body)
        return ib.EnvelopeResponse(ErrorCode.NONE, _encoder.encode(response))

    @staticmethod
    async def topic_change(controller: QuorumController, key: int, body: Any) -> Any:
        if key == ApiKey.CREATE_TOPICS:
            return await controller.create_topics(body)
        if key == ApiKey.DELETE_TOPICS:
            return await controller.delete_topics(body)
        if key == ApiKey.ELECT_LEADERS:
            return await elect_leaders(controller, body)
        if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
            return await controller.alter_configs(
                body, key == ApiKey.INCREMENTAL_ALTER_CONFIGS, CONFIG_APPLY_TIMEOUT_MS
            )
        if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
            return await controller.alter_user_scram_credentials(body, CONFIG_APPLY_TIMEOUT_MS)
        if key == ApiKey.CREATE_ACLS:
            return await controller.create_acls(body, CONFIG_APPLY_TIMEOUT_MS)
        if key == ApiKey.DELETE_ACLS:
            return await controller.delete_acls(body, CONFIG_APPLY_TIMEOUT_MS)
        if key == ApiKey.ALTER_CLIENT_QUOTAS:
            return await controller.alter_client_quotas(body, CONFIG_APPLY_TIMEOUT_MS)
        assert isinstance(body, m.CreatePartitionsRequest)
        return await controller.create_partitions(body)


async def elect_leaders(
    controller: QuorumController, request: m.ElectLeadersRequest
) -> m.ElectLeadersResponse:
    election = (
        Election.PREFERRED if request.election_type == m.PREFERRED_ELECTION else Election.UNCLEAN
    )
    asked = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    # Every topic is answered when every partition is asked, even with no partition listed
    # (Kafka's electLeaders leaves out those that need no election, not their topic).
    every = [] if asked is not None else sorted(controller.image.topics)
    try:
        results = await controller.elect_leaders(
            election, asked, request.timeout_ms, request.leader_id
        )
    except ElectionTimedOut as exc:
        # Kafka's answer at the controller's deadline: the error at the top and in every
        # partition named (none when every partition was asked).
        failed = [
            m.ReplicaElectionResult(
                t.topic, [m.PartitionResult(p, exc.code, str(exc)) for p in t.partitions]
            )
            for t in request.topic_partitions or ()
        ]
        return m.ElectLeadersResponse(exc.code, failed)
    by_topic: dict[str, list[m.PartitionResult]] = {name: [] for name in every}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(m.PartitionResult(index, code, message))
    return m.ElectLeadersResponse(
        ErrorCode.NONE, [m.ReplicaElectionResult(t, parts) for t, parts in by_topic.items()]
    )
