"""The Kafka listener's DescribeQuorum (55): the metadata quorum as its leader sees it
(Kafka's Admin.describeMetadataQuorum, kafka-metadata-quorum). Any broker answers: it asks
the quorum's leader, as Kafka's brokers forward it to the active controller."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.results import Result
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

NO_DIRECTORY = uuid.UUID(int=0)  # Kafka's ZERO_UUID: we keep no directory ids (KIP-853)


class QuorumApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {ApiKey.DESCRIBE_QUORUM: self.handle_describe_quorum}

    def handle_describe_quorum(self, request: Any, version: int) -> Result:
        if authz.cluster_refused(self.broker.auth, AclOperation.DESCRIBE):
            return build(
                response_module(ApiKey.DESCRIBE_QUORUM, version).DescribeQuorumResponse,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=authz.CLUSTER_REFUSED,
                topics=[],
                nodes=[],
            )
        return self._describe(version)

    async def _describe(self, version: int) -> Any:
        answer = await self.broker.describe_quorum()
        return describe_quorum_response(
            version, answer, self.broker.members, self.broker.listeners.broker_facing.name
        )


def describe_quorum_response(
    version: int,
    answer: rm.DescribeQuorumResponse,
    members: dict[int, tuple[str, int]],
    listener: str,
) -> Any:
    schema = response_module(ApiKey.DESCRIBE_QUORUM, version)

    def replicas(states: list[rm.QuorumReplicaState]) -> list[Any]:
        return [
            build(
                schema.ReplicaState,
                replica_id=s.replica_id,
                replica_directory_id=NO_DIRECTORY,
                log_end_offset=s.log_end_offset,
                last_fetch_timestamp=s.last_fetch_timestamp,
                last_caught_up_timestamp=s.last_caught_up_timestamp,
            )
            for s in states
        ]

    partition = build(
        schema.PartitionData,
        partition_index=0,
        error_code=answer.error_code,
        error_message=answer.error_message,
        leader_id=answer.leader_id,
        leader_epoch=answer.leader_epoch,
        high_watermark=answer.high_watermark,
        current_voters=replicas(answer.current_voters),
        observers=replicas(answer.observers),
    )
    voters = {s.replica_id for s in answer.current_voters}
    nodes = (
        [
            build(
                schema.Node,
                node_id=node,
                listeners=[build(schema.Listener, name=listener, host=host, port=port)],
            )
            for node, (host, port) in sorted(members.items())
            if node in voters
        ]
        if version >= 2  # v2 (KIP-853) names the voters' endpoints
        else []
    )
    return build(
        schema.DescribeQuorumResponse,
        error_code=0,
        error_message=None,
        topics=[build(schema.TopicData, topic_name=rm.METADATA_TOPIC, partitions=[partition])],
        nodes=nodes,
    )
