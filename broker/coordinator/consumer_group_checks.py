"""The checks of KIP-848's consumer group requests (Kafka's ``throwIf...`` helpers of its
GroupMetadataManager) and the errors they raise; the coordinator's timeout keys."""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Collection
from typing import Any, NamedTuple

from purgatory.broker.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
)
from purgatory.broker.coordinator.current_assignment_builder import OwnedPartitions
from purgatory.protocol.errors import ErrorCode

MAX_REGEX_LENGTH = 1000


class HeartbeatRequest(NamedTuple):
    """A ConsumerGroupHeartbeat's fields (None: not sent, i.e. unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[str, list[int]]] | None = None  # (topic id, partitions)


class HeartbeatResult(NamedTuple):
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class Refused(Exception):
    """A request the coordinator refuses: its error code and Kafka's message."""

    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("rebalance", group_id, member_id)


def join_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("join", group_id, member_id)


def sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("sync", group_id, member_id)


def new_member_id() -> str:
    """A member id as Kafka makes one (a random Uuid's URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def check_not_empty(value: str | None, message: str) -> None:
    if value is not None and not value.strip():
        raise invalid_request(message)


def invalid_request(message: str) -> Refused:
    return Refused(ErrorCode.INVALID_REQUEST, message)


def unknown_member(member_id: str, group_id: str) -> Refused:
    return Refused(
        ErrorCode.UNKNOWN_MEMBER_ID,
        f"Member {member_id} is not a member of group {group_id}.",
    )


def fenced_instance(member_id: str, instance: str, owner: str) -> Refused:
    return Refused(
        ErrorCode.FENCED_INSTANCE_ID,
        f"Static member {member_id} with instance id {instance} was fenced by member {owner}.",
    )


def check_member_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead is fenced; one
    behind only if it is the previous epoch and the member owns no more than it should
    (the answer with the new epoch may have been lost)."""
    if received > member.member_epoch:
        raise Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned)
    ):
        raise Refused(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )


def is_subset(owned: OwnedPartitions, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(topic_id, ()) for topic_id, ps in owned for p in ps)


@functools.lru_cache(maxsize=1024)
def compiled_regex(regex: str) -> Any:
    """The regex, compiled by RE2 (linear time, as Kafka's RE2J: a hostile pattern cannot
    stall the coordinator); INVALID_REGULAR_EXPRESSION when it is not one."""
    import re2

    if len(regex) > MAX_REGEX_LENGTH:
        raise Refused(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex is longer than {MAX_REGEX_LENGTH} characters.",
        )
    try:
        return re2.compile(regex)
    except re2.error as exc:
        raise Refused(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.",
        ) from exc


def validate_heartbeat(request: HeartbeatRequest, version: int, assignors: Collection[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
    epoch = request.member_epoch
    if version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        check_not_empty(request.member_id, "MemberId can't be empty.")
    check_not_empty(request.group_id, "GroupId can't be empty.")
    check_not_empty(request.instance_id, "InstanceId can't be empty.")
    check_not_empty(request.rack_id, "RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise invalid_request("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise invalid_request(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                "when (re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid_request("MemberEpoch is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in assignors:
        raise Refused(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )
    regex = request.subscribed_topic_regex
    if regex:
        compiled_regex(regex)
