"""Request and response bodies of the group coordinator's APIs on our protocol (the
shapes of Kafka's, flattened; ``protocol.messages`` describes how Structs travel).

Member metadata and assignments are opaque bytes to the broker; our consumer fills them
with Kafka's consumer protocol (``protocol.consumer_protocol``), so its members can share
a group with Kafka clients.
"""

from __future__ import annotations

from purgatory.protocol.messages import (
    Message,
    OffsetCommitRequest,
    OffsetCommitTopicResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
)

# -- FindCoordinator (10) -------------------------------------------------------------------


class FindCoordinatorRequest(Message):
    key: str  # the group id
    key_type: int = 0  # 0 group (1 transaction: not served)


class FindCoordinatorResponse(Message):
    error_code: int
    node_id: int
    host: str
    port: int


# -- OffsetCommit v1 / OffsetFetch v1 ---------------------------------------------------------


class OffsetCommitRequestV1(OffsetCommitRequest):
    """A member's commit: the generation it was assigned the partitions in (-1 and an empty
    member id: a group that only stores offsets)."""

    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetFetchRequestV1(OffsetFetchRequest):
    all_partitions: bool = False  # every partition the group committed (``topics`` ignored)


class OffsetFetchResponseV1(OffsetFetchResponse):
    error_code: int = 0  # the group's (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...)


# -- JoinGroup (11) / SyncGroup (14) ----------------------------------------------------------


class JoinGroupProtocol(Message):
    name: str  # an assignor: "range", "roundrobin", ...
    metadata: bytes  # the member's subscription for it


class JoinGroupRequest(Message):
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str  # "" on the first join: answered MEMBER_ID_REQUIRED with an id
    group_instance_id: str | None
    protocol_type: str  # "consumer"
    protocols: list[JoinGroupProtocol]


class JoinGroupMember(Message):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(Message):
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinGroupMember]  # only the leader's answer lists them
    skip_assignment: bool = False


class SyncGroupAssignment(Message):
    member_id: str
    assignment: bytes


class SyncGroupRequest(Message):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    assignments: list[SyncGroupAssignment]  # only the leader sends them
    protocol_type: str | None = None
    protocol_name: str | None = None


class SyncGroupResponse(Message):
    error_code: int
    assignment: bytes
    protocol_type: str | None = None
    protocol_name: str | None = None


# -- Heartbeat (12) / LeaveGroup (13) ---------------------------------------------------------


class HeartbeatRequest(Message):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


class HeartbeatResponse(Message):
    error_code: int


class LeaveGroupMember(Message):
    member_id: str
    group_instance_id: str | None = None


class LeaveGroupRequest(Message):
    group_id: str
    members: list[LeaveGroupMember]


class LeaveGroupMemberResponse(Message):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(Message):
    error_code: int
    members: list[LeaveGroupMemberResponse]


# -- DescribeGroups (15) / ListGroups (16) / DeleteGroups (42) --------------------------------


class DescribeGroupsRequest(Message):
    groups: list[str]


class DescribedGroupMember(Message):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # empty unless the group is Stable
    assignment: bytes  # empty unless the group is Stable


class DescribedGroup(Message):
    error_code: int
    group_id: str
    # classic: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead;
    # consumer (KIP-848): Empty, Assigning, Reconciling, Stable, Dead
    state: str
    protocol_type: str
    protocol: str  # a classic group's protocol; a consumer group's server-side assignor
    members: list[DescribedGroupMember]
    generation_id: int = -1  # a consumer group's group epoch
    group_type: str = "classic"  # or "consumer" (KIP-848)


class DescribeGroupsResponse(Message):
    groups: list[DescribedGroup]


class ListGroupsRequest(Message):
    states_filter: list[str] = []


class ListedGroup(Message):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


class ListGroupsResponse(Message):
    error_code: int
    groups: list[ListedGroup]


class DeleteGroupsRequest(Message):
    groups: list[str]


class DeletableGroupResult(Message):
    group_id: str
    error_code: int


class DeleteGroupsResponse(Message):
    results: list[DeletableGroupResult]


# -- OffsetDelete (47) -----------------------------------------------------------------------


class OffsetDeleteRequest(Message):
    group_id: str
    topics: list[OffsetFetchTopic]


class OffsetDeleteResponse(Message):
    error_code: int
    topics: list[OffsetCommitTopicResponse]
