"""The Kafka listener's group membership APIs: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups and DeleteGroups, served by the group coordinator.

JoinGroup and SyncGroup wait in the coordinator (a rebalance in the Rebalance purgatory,
an assignment being stored); their answers are Deferred.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api.coordinator_acls import denied_groups, group_error, listable_groups
from purgatory.broker.api.groups import client_host
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinResult,
    SyncResult,
)
from purgatory.broker.coordinator.group_metadata_manager import group_type
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, millis, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

NO_OPERATIONS = -(2**31)  # DescribeGroups' authorized_operations when not asked for
CLASSIC = "classic"  # ListGroups v5's group types
CONSUMER = "consumer"


class GroupApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.JOIN_GROUP: self.handle_join_group,
            ApiKey.SYNC_GROUP: self.handle_sync_group,
            ApiKey.HEARTBEAT: self.handle_heartbeat,
            ApiKey.LEAVE_GROUP: self.handle_leave_group,
            ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups,
            ApiKey.LIST_GROUPS: self.handle_list_groups,
            ApiKey.DELETE_GROUPS: self.handle_delete_groups,
        }

    def handle_join_group(self, request: Any, version: int) -> Result:
        if len(request.protocols) > 1000:
            raise RequestError(ErrorCode.INVALID_REQUEST, "more than 1000 protocols")
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return join_response(version, JoinResult(code, request.member_id))
        server = self.broker.socket_server
        result = self.coordinator.join_group(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            version >= 4,
            server.current_client or "",
            client_host(server.current_peer),
            millis(request.rebalance_timeout),
            millis(request.session_timeout),
            request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols],
        )
        return answer(result, lambda r: join_response(version, r))

    def handle_sync_group(self, request: Any, version: int) -> Result:
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return sync_response(version, SyncResult(code))
        result = self.coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {a.member_id: a.assignment for a in request.assignments},
        )
        return answer(result, lambda r: sync_response(version, r))

    def handle_heartbeat(self, request: Any, version: int) -> Result:
        code = group_error(self.auth, AclOperation.READ, request.group_id) or (
            self.coordinator.heartbeat(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id,
            )
        )
        schema = response_module(ApiKey.HEARTBEAT, version)
        return build(schema.HeartbeatResponse, throttle_time=0, error_code=code)

    def handle_leave_group(self, request: Any, version: int) -> Result:
        members: list[tuple[str, str | None]]
        if version < 3:
            members = [(request.member_id, None)]
        else:
            check_topic_count(len(request.members))
            members = [(m.member_id, m.group_instance_id) for m in request.members]
        schema = response_module(ApiKey.LEAVE_GROUP, version)
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return build(schema.LeaveGroupResponse, throttle_time=0, error_code=code, members=[])
        code, errors = self.coordinator.leave_group(request.group_id, members)
        if version < 3:
            return build(schema.LeaveGroupResponse, throttle_time=0, error_code=code or errors[0])
        return build(
            schema.LeaveGroupResponse,
            throttle_time=0,
            error_code=code,
            members=[
                build(
                    schema.MemberResponse,
                    member_id=member_id,
                    group_instance_id=instance,
                    error_code=error,
                )
                for (member_id, instance), error in zip(members, errors, strict=True)
            ]
            if not code
            else [],
        )

    def handle_describe_groups(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.groups))
        schema = response_module(ApiKey.DESCRIBE_GROUPS, version)
        described = []
        denied = denied_groups(self.auth, AclOperation.DESCRIBE, request.groups)
        for group_id in request.groups:
            code: int
            if group_id in denied:
                code, group = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
            else:
                code, group = self.coordinator.describe_group(group_id)
            described.append(_described(schema, group_id, code, group))
        return build(schema.DescribeGroupsResponse, throttle_time=0, groups=described)

    def handle_list_groups(self, request: Any, version: int) -> Result:
        states = {s.lower() for s in getattr(request, "states_filter", ())}
        types = {t.lower() for t in getattr(request, "types_filter", ())}
        code, groups = self.coordinator.list_groups()
        groups = listable_groups(self.auth, groups)
        schema = response_module(ApiKey.LIST_GROUPS, version)
        listed = [
            build(
                schema.ListedGroup,
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type=group_type(g),
            )
            for g in groups
            if (not states or g.state.value.lower() in states)
            and (not types or group_type(g) in types)
        ]
        return build(schema.ListGroupsResponse, throttle_time=0, error_code=code, groups=listed)

    def handle_delete_groups(self, request: Any, version: int) -> Result:
        check_topic_count(len(request.groups_names))
        names = list(request.groups_names)
        denied = denied_groups(self.auth, AclOperation.DELETE, names)
        if denied:  # Kafka's: the others are deleted
            refused = dict.fromkeys(denied, ErrorCode.GROUP_AUTHORIZATION_FAILED)
            result = self.coordinator.delete_groups([n for n in names if n not in denied])
            return answer(
                result, lambda r: delete_groups_response(version, names, {**r, **refused})
            )
        result = self.coordinator.delete_groups(names)
        return answer(result, lambda r: delete_groups_response(version, names, r))


# -- responses (also the error responses of these APIs) -------------------------------------


def join_response(version: int, result: JoinResult) -> Any:
    schema = response_module(ApiKey.JOIN_GROUP, version)
    return build(
        schema.JoinGroupResponse,
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # Before v7 the name is not nullable.
        protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            build(
                schema.JoinGroupResponseMember,
                member_id=member_id,
                group_instance_id=instance,
                metadata=metadata,
            )
            for member_id, instance, metadata in result.members
        ],
    )


def sync_response(version: int, result: SyncResult) -> Any:
    schema = response_module(ApiKey.SYNC_GROUP, version)
    return build(
        schema.SyncGroupResponse,
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def delete_groups_response(version: int, names: list[str], results: dict[str, int]) -> Any:
    schema = response_module(ApiKey.DELETE_GROUPS, version)
    return build(
        schema.DeleteGroupsResponse,
        throttle_time=0,
        results=[
            build(schema.DeletableGroupResult, group_id=name, error_code=results[name])
            for name in dict.fromkeys(names)
        ],
    )


def _described(schema: Any, group_id: str, code: int, group: GroupMetadata | None) -> Any:
    if group is None or code:
        state, protocol_type, protocol, members = GroupState.DEAD.value, "", "", []
    else:
        state = group.state.value
        protocol_type, protocol, summary = group.summary()
        members = [
            build(
                schema.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=metadata,
                member_assignment=assignment,
            )
            for m, metadata, assignment in summary
        ]
    return build(
        schema.DescribedGroup,
        error_code=code,
        group_id=group_id,
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol,
        members=members,
        authorized_operations=NO_OPERATIONS,
    )


def error_response(key: int, version: int, body: Any, code: int) -> Any:
    """The response of a group API answering ``code`` throughout."""
    if key == ApiKey.JOIN_GROUP:
        return join_response(version, JoinResult(code, body.member_id))
    if key == ApiKey.SYNC_GROUP:
        return sync_response(version, SyncResult(code))
    schema = response_module(key, version)
    if key == ApiKey.HEARTBEAT:
        return build(schema.HeartbeatResponse, throttle_time=0, error_code=code)
    if key == ApiKey.LEAVE_GROUP:
        return build(schema.LeaveGroupResponse, throttle_time=0, error_code=code, members=[])
    if key == ApiKey.DESCRIBE_GROUPS:
        return build(
            schema.DescribeGroupsResponse,
            throttle_time=0,
            groups=[_described(schema, g, code, None) for g in body.groups],
        )
    if key == ApiKey.LIST_GROUPS:
        return build(schema.ListGroupsResponse, throttle_time=0, error_code=code, groups=[])
    if key == ApiKey.DELETE_GROUPS:
        names = list(body.groups_names)
        return delete_groups_response(version, names, dict.fromkeys(names, code))
    if key == ApiKey.OFFSET_DELETE:
        return build(schema.OffsetDeleteResponse, error_code=code, throttle_time=0, topics=[])
    raise AssertionError(f"no group error response for api key {key}")  # pragma: no cover


GROUP_APIS = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    }
)
