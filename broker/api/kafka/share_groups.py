"""KIP-932's share group APIs of the group coordinator on the Kafka listener:
ShareGroupHeartbeat (76) and ShareGroupDescribe (77). (ShareFetch and ShareAcknowledge,
served by partition leaders, are ``share_fetch``.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.coordinator_acls import denied_groups, group_error
from purgatory.broker.api.groups import client_host
from purgatory.broker.api.kafka.consumer_groups import (
    assignment_entity,
    described_error,
    modern_heartbeat_response,
    unauthorized_topics,
)
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.coordinator.consumer_group_coordinator import HeartbeatResult
from purgatory.broker.coordinator.share_group import ShareGroup
from purgatory.broker.coordinator.share_group_coordinator import (
    SIMPLE_ASSIGNOR,
    ShareHeartbeatRequest,
)
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

SHARE_GROUP_APIS = frozenset({ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE})


class ShareGroupApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator.share_groups
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.SHARE_GROUP_HEARTBEAT: self.handle_share_group_heartbeat,
            ApiKey.SHARE_GROUP_DESCRIBE: self.handle_share_group_describe,
        }

    def handle_share_group_heartbeat(self, request: Any, version: int) -> Result:
        names = request.subscribed_topic_names
        if names is not None:
            check_topic_count(len(names))
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return heartbeat_response(version, HeartbeatResult(code))
        if refused := unauthorized_topics(self.auth, names):
            return heartbeat_response(version, refused)
        server = self.broker.socket_server
        heartbeat = ShareHeartbeatRequest(
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.rack_id,
            list(names) if names is not None else None,
        )
        result = self.coordinator.heartbeat(
            heartbeat, server.current_client or "", client_host(server.current_peer)
        )
        return answer(result, lambda r: heartbeat_response(version, r))

    def handle_share_group_describe(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.group_ids))
        schema = response_module(ApiKey.SHARE_GROUP_DESCRIBE, version)
        denied = denied_groups(self.auth, AclOperation.DESCRIBE, request.group_ids)
        names = self.coordinator.metadata.topic_names
        described = []
        for group_id in request.group_ids:
            if group_id in denied:
                refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
                described.append(described_error(schema, group_id, refused, None))
                continue
            code, message, group = self.coordinator.describe(group_id)
            if group is None:
                described.append(described_error(schema, group_id, code, message))
            else:
                described.append(_described_group(schema, group, names))
        return build(schema.ShareGroupDescribeResponse, throttle_time=0, groups=described)


def _described_group(schema: Any, group: ShareGroup, names: Mapping[str, str]) -> Any:
    return build(
        schema.DescribedGroup,
        error_code=ErrorCode.NONE,
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
        members=[
            build(
                schema.Member,
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=assignment_entity(schema, m.assigned, names),
            )
            for m in group.members.values()
        ],
    )


def heartbeat_response(version: int, result: HeartbeatResult) -> Any:
    return modern_heartbeat_response(ApiKey.SHARE_GROUP_HEARTBEAT, version, result)


def error_response(key: int, version: int, body: Any, code: int, message: str | None) -> Any:
    """The response of a share group API answering ``code`` throughout."""
    if key == ApiKey.SHARE_GROUP_HEARTBEAT:
        return heartbeat_response(version, HeartbeatResult(code, message or None))
    schema = response_module(key, version)
    return build(
        schema.ShareGroupDescribeResponse,
        throttle_time=0,
        groups=[described_error(schema, g, code, message or None) for g in body.group_ids],
    )
