"""Our protocol's group coordinator APIs: FindCoordinator, OffsetCommit, OffsetFetch,
OffsetDelete, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups and
DeleteGroups, translated to the GroupCoordinator's calls (the Kafka listener's twins live
in ``broker/api/kafka/offsets.py`` and ``groups.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api import coordinator_acls
from purgatory.broker.api.coordinator_acls import (
    denied_groups,
    group_error,
    listable_groups,
    offset_commit_refusal,
    offset_delete_refusal,
)
from purgatory.broker.api.request_limits import check_partition_count, check_topic_count
from purgatory.broker.api.results import Result, answer
from purgatory.broker.coordinator.consumer_group import ConsumerGroup
from purgatory.broker.coordinator.group_metadata import (
    GroupState,
    JoinResult,
    SyncResult,
)
from purgatory.broker.coordinator.group_metadata import TopicPartition as GroupTopicPartition
from purgatory.broker.coordinator.group_metadata_manager import Group, group_type
from purgatory.broker.coordinator.share_group import ShareGroup
from purgatory.broker.coordinator.share_group_coordinator import SIMPLE_ASSIGNOR
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import group_messages as g
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.server import Broker


def client_host(peer: str) -> str:
    """A member's host as Kafka shows it (``/127.0.0.1``)."""
    return "/" + peer.rsplit(":", 1)[0]


class GroupApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.group_coordinator
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.OFFSET_DELETE: self.handle_offset_delete,
            ApiKey.JOIN_GROUP: self.handle_join_group,
            ApiKey.SYNC_GROUP: self.handle_sync_group,
            ApiKey.HEARTBEAT: self.handle_heartbeat,
            ApiKey.LEAVE_GROUP: self.handle_leave_group,
            ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups,
            ApiKey.LIST_GROUPS: self.handle_list_groups,
            ApiKey.DELETE_GROUPS: self.handle_delete_groups,
        }

    def handle_find_coordinator(self, request: g.FindCoordinatorRequest, version: int) -> Result:
        if request.key_type != 0:
            raise RequestError(ErrorCode.INVALID_REQUEST, "only group coordinators exist here")
        if code := group_error(self.auth, AclOperation.DESCRIBE, request.key):
            return g.FindCoordinatorResponse(code, -1, "", -1)
        code, node = self.coordinator.find_coordinator(request.key)
        if code:
            return g.FindCoordinatorResponse(code, -1, "", -1)
        address = self.broker.endpoints().get(node)
        if address is None:  # its broker has no listener of this name
            return g.FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        host, port = address
        return g.FindCoordinatorResponse(ErrorCode.NONE, node, host, port)

    # -- offsets ---------------------------------------------------------------------------

    def handle_offset_commit(self, request: m.OffsetCommitRequest, version: int) -> Result:
        check_partition_count(request.topics)
        offsets = {
            (t.name, p.partition_index): (p.committed_offset, -1, p.committed_metadata)
            for t in request.topics
            for p in t.partitions
        }
        if isinstance(request, g.OffsetCommitRequestV1):
            member = (request.generation_id, request.member_id, request.group_instance_id)
        else:
            member = (-1, "", None)
        code, allowed, denied = offset_commit_refusal(self.auth, request.group_id, offsets)
        if code or (not allowed and denied):
            result: Any = dict.fromkeys(offsets, code) if code else denied
        else:
            result = self.coordinator.offsets.commit_offsets(request.group_id, *member, allowed)

        def to_response(errors: dict[GroupTopicPartition, int]) -> m.OffsetCommitResponse:
            if denied:
                errors = {**errors, **denied}
            return m.OffsetCommitResponse(
                [
                    m.OffsetCommitTopicResponse(
                        t.name,
                        [
                            m.OffsetCommitPartitionResponse(
                                p.partition_index, errors[(t.name, p.partition_index)]
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ]
            )

        return answer(result, to_response)

    def handle_offset_fetch(self, request: m.OffsetFetchRequest, version: int) -> Result:
        every = isinstance(request, g.OffsetFetchRequestV1) and request.all_partitions
        asked = (
            None if every else [(t.name, i) for t in request.topics for i in t.partition_indexes]
        )
        if asked is not None:
            check_partition_count(request.topics, lambda t: t.partition_indexes)
        code, offsets, denied = coordinator_acls.fetch_offsets(
            self.auth, self.coordinator.offsets, request.group_id, asked
        )
        if code and asked is not None:
            offsets = dict.fromkeys(asked)
        by_topic: dict[str, list[m.OffsetFetchPartitionResponse]] = {}
        for (topic, index), committed in offsets.items():
            if committed is None:
                offset, metadata = -1, None
            else:
                offset, metadata = committed.offset, committed.metadata
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED if (topic, index) in denied else code
            by_topic.setdefault(topic, []).append(
                m.OffsetFetchPartitionResponse(index, offset, metadata, error)
            )
        topics = [m.OffsetFetchTopicResponse(t, parts) for t, parts in by_topic.items()]
        if version == 0:
            return m.OffsetFetchResponse(topics)
        return g.OffsetFetchResponseV1(topics, code)

    def handle_offset_delete(self, request: g.OffsetDeleteRequest, version: int) -> Result:
        check_partition_count(request.topics, lambda t: t.partition_indexes)
        asked = [(t.name, i) for t in request.topics for i in t.partition_indexes]
        code, allowed, denied = offset_delete_refusal(self.auth, request.group_id, asked)
        if code or (not allowed and denied):
            result: Any = (code, {})
        else:
            result = self.coordinator.offsets.delete_offsets(request.group_id, allowed)

        def to_response(
            outcome: tuple[int, dict[GroupTopicPartition, int]],
        ) -> g.OffsetDeleteResponse:
            code, errors = outcome
            if denied:
                errors = {**errors, **denied}
            topics = [
                m.OffsetCommitTopicResponse(
                    t.name,
                    [
                        m.OffsetCommitPartitionResponse(i, errors.get((t.name, i), code))
                        for i in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
            return g.OffsetDeleteResponse(code, topics)

        return answer(result, to_response)

    # -- membership ------------------------------------------------------------------------

    def handle_join_group(self, request: g.JoinGroupRequest, version: int) -> Result:
        if len(request.protocols) > 1000:
            raise RequestError(ErrorCode.INVALID_REQUEST, "more than 1000 protocols")
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return _join_response(JoinResult(code, request.member_id))
        server = self.broker.socket_server
        result = self.coordinator.join_group(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            True,
            server.current_client or "",
            client_host(server.current_peer),
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols],
        )
        return answer(result, _join_response)

    def handle_sync_group(self, request: g.SyncGroupRequest, version: int) -> Result:
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return _sync_response(SyncResult(code))
        result = self.coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            request.protocol_type,
            request.protocol_name,
            {a.member_id: a.assignment for a in request.assignments},
        )
        return answer(result, _sync_response)

    def handle_heartbeat(self, request: g.HeartbeatRequest, version: int) -> Result:
        return g.HeartbeatResponse(
            group_error(self.auth, AclOperation.READ, request.group_id)
            or self.coordinator.heartbeat(
                request.group_id,
                request.member_id,
                request.group_instance_id,
                request.generation_id,
            )
        )

    def handle_leave_group(self, request: g.LeaveGroupRequest, version: int) -> Result:
        check_topic_count(len(request.members))
        members = [(x.member_id, x.group_instance_id) for x in request.members]
        if code := group_error(self.auth, AclOperation.READ, request.group_id):
            return g.LeaveGroupResponse(code, [])
        code, errors = self.coordinator.leave_group(request.group_id, members)
        return g.LeaveGroupResponse(
            code,
            [
                g.LeaveGroupMemberResponse(member_id, instance, error)
                for (member_id, instance), error in zip(members, errors, strict=True)
            ],
        )

    # -- administration --------------------------------------------------------------------

    def handle_describe_groups(self, request: g.DescribeGroupsRequest, version: int) -> Result:
        check_topic_count(len(request.groups))
        denied = denied_groups(self.auth, AclOperation.DESCRIBE, request.groups)
        return g.DescribeGroupsResponse(
            [
                _described(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
                if group_id in denied
                else _described(
                    group_id,
                    *self.coordinator.describe_any_group(group_id),
                    self.coordinator.consumer_groups.default_assignor,
                )
                for group_id in request.groups
            ]
        )

    def handle_list_groups(self, request: g.ListGroupsRequest, version: int) -> Result:
        states = {s.lower() for s in request.states_filter}
        code, groups = self.coordinator.list_groups()
        return g.ListGroupsResponse(
            code,
            [
                g.ListedGroup(x.group_id, x.protocol_type or "", x.state.value, group_type(x))
                for x in listable_groups(self.auth, groups)
                if not states or x.state.value.lower() in states
            ],
        )

    def handle_delete_groups(self, request: g.DeleteGroupsRequest, version: int) -> Result:
        check_topic_count(len(request.groups))
        denied = denied_groups(self.auth, AclOperation.DELETE, request.groups)
        refused = dict.fromkeys(denied, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        result = self.coordinator.delete_groups([x for x in request.groups if x not in denied])
        return answer(
            result,
            lambda r: g.DeleteGroupsResponse(
                [
                    g.DeletableGroupResult(x, refused.get(x) or r[x])
                    for x in dict.fromkeys(request.groups)
                ]
            ),
        )


def _join_response(r: JoinResult) -> g.JoinGroupResponse:
    return g.JoinGroupResponse(
        r.error,
        r.generation_id,
        r.protocol_type,
        r.protocol_name,
        r.leader_id,
        r.member_id,
        [g.JoinGroupMember(member_id, instance, md) for member_id, instance, md in r.members],
        r.skip_assignment,
    )


def _sync_response(r: SyncResult) -> g.SyncGroupResponse:
    return g.SyncGroupResponse(r.error, r.assignment, r.protocol_type, r.protocol_name)


def _described(
    group_id: str,
    code: int,
    group: Group | None,
    default_assignor: str = "",
) -> g.DescribedGroup:
    if group is None or code:
        return g.DescribedGroup(code, group_id, GroupState.DEAD.value, "", "", [])
    if isinstance(group, ConsumerGroup):
        return _described_modern_group(group, group.preferred_assignor(default_assignor))
    if isinstance(group, ShareGroup):
        return _described_modern_group(group, SIMPLE_ASSIGNOR)
    protocol_type, protocol, summary = group.summary()
    return g.DescribedGroup(
        code,
        group_id,
        group.state.value,
        protocol_type,
        protocol,
        [
            g.DescribedGroupMember(
                x.member_id, x.group_instance_id, x.client_id, x.client_host, metadata, assignment
            )
            for x, metadata, assignment in summary
        ],
        group.generation_id,
    )


def _described_modern_group(group: ConsumerGroup | ShareGroup, assignor: str) -> g.DescribedGroup:
    """A KIP-848 consumer group or a KIP-932 share group in the classic shape: each
    member's assignment (by topic name) as the consumer protocol writes one, so the same
    tools read every kind."""
    from purgatory.protocol.consumer_protocol import Assignment, encode_assignment

    names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
    members = []
    for member in group.members.values():
        parts = {names.get(t, t): sorted(ps) for t, ps in member.assigned.items()}
        members.append(
            g.DescribedGroupMember(
                member.member_id,
                getattr(member, "instance_id", None),
                member.client_id,
                member.client_host,
                b"",
                encode_assignment(Assignment(parts)),
            )
        )
    return g.DescribedGroup(
        ErrorCode.NONE,
        group.group_id,
        group.state.value,
        group.protocol_type,
        assignor,
        members,
        group.group_epoch,
        group_type(group),
    )
