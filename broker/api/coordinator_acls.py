"""The ACL checks of the group and transaction coordinators' APIs, made where Kafka's
KafkaApis makes them; the group APIs' shared by both protocols' handlers
(``broker/api/groups.py``, and on the Kafka listener ``broker/api/kafka/groups.py`` and
``offsets.py``), the transaction APIs' by ``broker/api/kafka/transactions.py``:

- FindCoordinator: DESCRIBE on the GROUP (key type 0) or TRANSACTIONAL_ID (1);
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the GROUP;
- OffsetCommit: READ on the GROUP, then READ on each TOPIC;
- OffsetFetch: DESCRIBE on the GROUP, then DESCRIBE on each TOPIC (named ones answered
  TOPIC_AUTHORIZATION_FAILED, left out when fetching all);
- OffsetDelete: DELETE on the GROUP, then READ on each TOPIC;
- DescribeGroups: DESCRIBE, DeleteGroups: DELETE on each GROUP; ListGroups: every group
  with DESCRIBE on the CLUSTER, else those with DESCRIBE on the GROUP;
- AddPartitionsToTxn: WRITE on the TRANSACTIONAL_ID, then WRITE on each TOPIC (none
  added unless all are allowed); AddOffsetsToTxn: WRITE on the TRANSACTIONAL_ID, READ
  on the GROUP; EndTxn: WRITE on the TRANSACTIONAL_ID; TxnOffsetCommit: WRITE on the
  TRANSACTIONAL_ID, READ on the GROUP and on each TOPIC;
- DescribeTransactions: DESCRIBE on each TRANSACTIONAL_ID (and only the topics the
  principal may DESCRIBE listed); ListTransactions: the ids it may DESCRIBE.

Every check is made while the handler runs, before it waits on anything: the principal
is the request being handled's only until then. Without an authorizer all is allowed and
nothing is copied.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from purgatory.broker.controller.internal_topics import INTERNAL_TOPICS
from purgatory.broker.coordinator.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    TopicPartition,
)
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.coordinator.consumer_group import ConsumerGroup
    from purgatory.broker.coordinator.offset_metadata_manager import OffsetMetadataManager
    from purgatory.broker.coordinator.share_group import ShareGroup

V = TypeVar("V")
G = TypeVar("G", bound="GroupMetadata | ConsumerGroup | ShareGroup")

GROUP_KEY = 0  # FindCoordinator key types: 0 group, 1 transaction (share groups: 2)
TRANSACTION_KEY = 1


def group_error(auth: AuthHelper, operation: AclOperation, group_id: str) -> int:
    """GROUP_AUTHORIZATION_FAILED unless the principal may ``operation`` the group."""
    if auth.authorize(operation, ResourceType.GROUP, group_id):
        return ErrorCode.NONE
    return ErrorCode.GROUP_AUTHORIZATION_FAILED


def transactional_id_error(auth: AuthHelper, operation: AclOperation, txn_id: str) -> int:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless the principal may ``operation`` it."""
    if auth.authorize(operation, ResourceType.TRANSACTIONAL_ID, txn_id):
        return ErrorCode.NONE
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def coordinator_key_error(auth: AuthHelper, key_type: int, key: str) -> int:
    """FindCoordinator's check of one key: DESCRIBE on its group or transactional id."""
    if key_type == GROUP_KEY:
        return group_error(auth, AclOperation.DESCRIBE, key)
    if key_type == TRANSACTION_KEY:
        return transactional_id_error(auth, AclOperation.DESCRIBE, key)
    return ErrorCode.NONE


def split_by_topic(
    auth: AuthHelper, operation: AclOperation, partitions: dict[TopicPartition, V]
) -> tuple[dict[TopicPartition, V], dict[TopicPartition, int]]:
    """(the partitions of topics the principal may ``operation``, TOPIC_AUTHORIZATION_FAILED
    for each of the others); ``partitions`` itself when all are allowed."""
    if not auth.enabled:
        return partitions, {}
    allowed = auth.authorized(operation, ResourceType.TOPIC, {t for t, _ in partitions})
    denied: dict[TopicPartition, int] = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] not in allowed
    }
    if not denied:
        return partitions, {}
    return {tp: v for tp, v in partitions.items() if tp not in denied}, denied


def offset_commit_refusal(
    auth: AuthHelper,
    group_id: str,
    offsets: dict[TopicPartition, V],
    transactional_id: str | None = None,
) -> tuple[int, dict[TopicPartition, V], dict[TopicPartition, int]]:
    """OffsetCommit's checks (TxnOffsetCommit's with ``transactional_id``): (the error of
    the whole request, the offsets to commit, the errors of those refused). When nothing
    is left to commit the coordinator is not asked (Kafka answers at once)."""
    if transactional_id is not None:
        code = transactional_id_error(auth, AclOperation.WRITE, transactional_id)
        if code:
            return code, {}, {}
    code = group_error(auth, AclOperation.READ, group_id)
    if code:
        return code, {}, {}
    allowed, denied = split_by_topic(auth, AclOperation.READ, offsets)
    return ErrorCode.NONE, allowed, denied


def fetch_offsets(
    auth: AuthHelper,
    offsets: OffsetMetadataManager,
    group_id: str,
    asked: list[TopicPartition] | None,
) -> tuple[int, dict[TopicPartition, CommittedOffset | None], frozenset[TopicPartition]]:
    """OffsetFetch of one group as Kafka authorizes it: (group error, committed offset per
    partition, the partitions answered TOPIC_AUTHORIZATION_FAILED). GROUP_AUTHORIZATION_
    FAILED without DESCRIBE on the group; of the topics named, those the principal may
    not DESCRIBE are not looked up; fetching all (``asked`` None), they are left out."""
    code = group_error(auth, AclOperation.DESCRIBE, group_id)
    if code:
        return code, {}, frozenset()
    if not auth.enabled:
        return *offsets.fetch_offsets(group_id, asked), frozenset()
    if asked is None:
        code, committed = offsets.fetch_offsets(group_id, None)
        if code:
            return code, committed, frozenset()
        allowed = auth.authorized(
            AclOperation.DESCRIBE, ResourceType.TOPIC, {t for t, _ in committed}
        )
        return code, {tp: c for tp, c in committed.items() if tp[0] in allowed}, frozenset()
    allowed = auth.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, {t for t, _ in asked})
    denied = frozenset(tp for tp in asked if tp[0] not in allowed)
    code, committed = offsets.fetch_offsets(group_id, [tp for tp in asked if tp not in denied])
    if code:
        return code, committed, frozenset()
    return code, {**committed, **dict.fromkeys(denied)}, denied


def offset_delete_refusal(
    auth: AuthHelper, group_id: str, asked: list[TopicPartition]
) -> tuple[int, list[TopicPartition], dict[TopicPartition, int]]:
    """OffsetDelete's checks: (the error of the whole request, the partitions to delete,
    TOPIC_AUTHORIZATION_FAILED for each of those refused)."""
    code = group_error(auth, AclOperation.DELETE, group_id)
    if code:
        return code, [], {}
    allowed, denied = split_by_topic(auth, AclOperation.READ, dict.fromkeys(asked))
    return ErrorCode.NONE, list(allowed), denied


def add_partitions_refusal(
    auth: AuthHelper, transactional_id: str, asked: list[TopicPartition]
) -> tuple[int, dict[TopicPartition, int]]:
    """AddPartitionsToTxn's checks (v0-3, from clients): (the error of the whole request,
    TOPIC_AUTHORIZATION_FAILED for each partition of a topic the principal may not WRITE).
    With an authorizer an internal topic is never the principal's to add, as Kafka's."""
    code = transactional_id_error(auth, AclOperation.WRITE, transactional_id)
    if code or not auth.enabled:
        return code, {}
    allowed = auth.authorized(
        AclOperation.WRITE, ResourceType.TOPIC, {t for t, _ in asked if t not in INTERNAL_TOPICS}
    )
    return ErrorCode.NONE, {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in asked if tp[0] not in allowed
    }


def denied_groups(auth: AuthHelper, operation: AclOperation, group_ids: Iterable[str]) -> set[str]:
    """The groups among ``group_ids`` the principal may not ``operation``."""
    if not auth.enabled:
        return set()
    group_ids = set(group_ids)
    return group_ids - auth.authorized(operation, ResourceType.GROUP, group_ids)


def listable_groups(auth: AuthHelper, groups: list[G]) -> list[G]:
    """ListGroups: every group to a principal that may DESCRIBE the cluster, else only
    the groups it may DESCRIBE."""
    if not auth.enabled or auth.authorize_cluster(AclOperation.DESCRIBE):
        return groups
    allowed = auth.authorized(
        AclOperation.DESCRIBE, ResourceType.GROUP, {x.group_id for x in groups}
    )
    return [x for x in groups if x.group_id in allowed]
