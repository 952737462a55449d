"""KIP-848's consumer group APIs on the Kafka listener: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), served by the group coordinator's ConsumerGroupCoordinator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.coordinator_acls import denied_groups, group_error
from purgatory.broker.api.groups import client_host
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.coordinator.consumer_group import Assignment, ConsumerGroup
from purgatory.broker.coordinator.consumer_group_coordinator import (
    HeartbeatRequest,
    HeartbeatResult,
)
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, millis, response_class, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

# ConsumerGroupDescribe v1's member types: a classic-protocol member, a KIP-848 one.
CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1

CONSUMER_GROUP_APIS = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE})


class ConsumerGroupApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator.consumer_groups
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.handle_consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self.handle_consumer_group_describe,
        }

    def handle_consumer_group_heartbeat(self, request: Any, version: int) -> Result:
        names = request.subscribed_topic_names
        if names is not None:
            check_topic_count(len(names))
        owned = request.topic_partitions
        if owned is not None:
            check_topic_count(len(owned))
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return heartbeat_response(version, HeartbeatResult(code))
        if refused := unauthorized_topics(self.auth, names):
            return heartbeat_response(version, refused)
        server = self.broker.socket_server
        heartbeat = HeartbeatRequest(
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.instance_id,
            request.rack_id,
            millis(request.rebalance_timeout),
            list(names) if names is not None else None,
            getattr(request, "subscribed_topic_regex", None),
            request.server_assignor,
            None
            if owned is None
            else [(tp.topic_id.hex if tp.topic_id else "", list(tp.partitions)) for tp in owned],
        )
        result = self.coordinator.heartbeat(
            heartbeat, version, server.current_client or "", client_host(server.current_peer)
        )
        return answer(result, lambda r: heartbeat_response(version, r))

    def handle_consumer_group_describe(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.group_ids))
        schema = response_module(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
        denied = denied_groups(self.auth, AclOperation.DESCRIBE, request.group_ids)
        topic_names = self.coordinator.metadata.topic_names
        described = []
        for group_id in request.group_ids:
            if group_id in denied:
                described.append(
                    described_error(schema, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
                )
                continue
            code, message, group = self.coordinator.describe(group_id)
            if group is None:
                described.append(described_error(schema, group_id, code, message))
                continue
            described.append(
                build(
                    schema.DescribedGroup,
                    error_code=ErrorCode.NONE,
                    group_id=group_id,
                    group_state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=self.coordinator.assignor_of(group),
                    members=[
                        _member(schema, group, m.member_id, topic_names)
                        for m in group.members.values()
                    ],
                )
            )
        return build(schema.ConsumerGroupDescribeResponse, throttle_time=0, groups=described)


def _member(schema: Any, group: ConsumerGroup, member_id: str, names: Mapping[str, str]) -> Any:
    m = group.members[member_id]
    return build(
        schema.Member,
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex or "",  # Kafka: "" for none
        # What it owns (Kafka 4.3.1): its assigned partitions and those it is yet to revoke.
        assignment=assignment_entity(schema, _owned(m.assigned, m.pending_revocation), names),
        target_assignment=assignment_entity(
            schema, group.target_assignment.get(member_id, {}), names
        ),
        member_type=CLASSIC_MEMBER_TYPE if m.classic is not None else CONSUMER_MEMBER_TYPE,
    )


def _owned(assigned: Assignment, revoking: Assignment) -> Assignment:
    return {
        t: assigned.get(t, frozenset()) | revoking.get(t, frozenset())
        for t in {*assigned, *revoking}
    }


def unauthorized_topics(auth: AuthHelper, names: Iterable[str] | None) -> HeartbeatResult | None:
    """A heartbeat subscribing to topics the principal may not DESCRIBE is refused
    TOPIC_AUTHORIZATION_FAILED, naming them (Kafka's)."""
    if not names or not auth.enabled:
        return None
    wanted = set(names)
    denied = sorted(wanted - auth.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted))
    if not denied:
        return None
    message = f"The following topics are not authorized: {denied}."
    return HeartbeatResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED, message)


def assignment_entity(
    schema: Any, assignment: Mapping[str, frozenset[int]], names: Mapping[str, str] = {}
) -> Any:
    """A modern group API's Assignment: topic ids and partitions (and, in the describe
    APIs, the topics' names; a heartbeat's schema has no name and ``build`` drops it)."""
    return build(
        schema.Assignment,
        topic_partitions=[
            build(
                schema.TopicPartitions,
                topic_id=topic_id,
                topic_name=names.get(topic_id, ""),
                partitions=sorted(partitions),
            )
            for topic_id, partitions in sorted(assignment.items())
        ],
    )


def described_error(schema: Any, group_id: str, code: int, message: str | None) -> Any:
    """A modern group describe API's entry for a group refused ``code``."""
    return build(
        schema.DescribedGroup,
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
    )


def heartbeat_response(version: int, result: HeartbeatResult) -> Any:
    return modern_heartbeat_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, result)


def modern_heartbeat_response(key: ApiKey, version: int, result: HeartbeatResult) -> Any:
    """A ConsumerGroupHeartbeat or ShareGroupHeartbeat response (they share one shape)."""
    schema = response_module(key, version)
    assignment = None
    if result.assignment is not None:
        assignment = assignment_entity(schema, result.assignment)
    return build(
        response_class(key, version),
        throttle_time=0,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(key: int, version: int, body: Any, code: int, message: str | None) -> Any:
    """The response of a consumer group API answering ``code`` throughout."""
    if key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return heartbeat_response(version, HeartbeatResult(code, message or None))
    schema = response_module(key, version)
    return build(
        schema.ConsumerGroupDescribeResponse,
        throttle_time=0,
        groups=[described_error(schema, g, code, message or None) for g in body.group_ids],
    )
