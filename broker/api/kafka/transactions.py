"""The Kafka listener's transaction APIs: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions, served by the
transaction coordinator (``broker/coordinator/transaction``); TxnOffsetCommit is the group
coordinator's (``groups.py``).

Errors as Kafka's KafkaApis maps them: clients older than KIP-588 (InitProducerId below
v4, the others below v2) are told INVALID_PRODUCER_EPOCH where newer ones hear
PRODUCER_FENCED. AddPartitionsToTxn v4 and later (KIP-890, sent by brokers) is not served.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from purgatory.broker.api.authorization import init_producer_id_refusal
from purgatory.broker.api.coordinator_acls import (
    add_partitions_refusal,
    group_error,
    transactional_id_error,
)
from purgatory.broker.api.request_limits import check_topic_count
from purgatory.broker.api.results import Result
from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

TRANSACTION_APIS = frozenset(
    {
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.DESCRIBE_TRANSACTIONS,
        ApiKey.LIST_TRANSACTIONS,
    }
)


def _fenced(error: int, version: int, since: int) -> int:
    if error == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


class TransactionApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = broker.transaction_coordinator
        self.auth = broker.auth

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn,
            ApiKey.END_TXN: self.handle_end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.handle_list_transactions,
        }

    # -- InitProducerId ----------------------------------------------------------------------

    def handle_init_producer_id(self, request: Any, version: int) -> Result:
        """An idempotent producer (no transactional id) gets a new id at epoch 0 whatever
        it sends (its client bumps epochs itself); a transactional one, the coordinator's
        answer for its id. Either needs Kafka's authorization first (authorization.py)."""
        refused = init_producer_id_refusal(self.broker.auth, request.transactional_id)
        if refused:
            return build(
                response_module(ApiKey.INIT_PRODUCER_ID, version).InitProducerIdResponse,
                throttle_time=0,
                error_code=refused,
                producer_id=-1,
                producer_epoch=-1,
            )
        return self._init_producer_id(request, version)

    async def _init_producer_id(self, request: Any, version: int) -> Any:
        timeout = request.transaction_timeout
        result = await self.coordinator.init_producer_id(
            request.transactional_id,
            int(timeout.total_seconds() * 1000) if hasattr(timeout, "total_seconds") else timeout,
            getattr(request, "producer_id", -1),
            getattr(request, "producer_epoch", -1),
        )
        return build(
            response_module(ApiKey.INIT_PRODUCER_ID, version).InitProducerIdResponse,
            throttle_time=0,
            error_code=_fenced(result.error_code, version, 4),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    # -- AddPartitionsToTxn, AddOffsetsToTxn -------------------------------------------------

    def handle_add_partitions_to_txn(self, request: Any, version: int) -> Result:
        topics = request.v3_and_below_topics
        check_topic_count(len(topics))
        asked = [(t.name, int(p)) for t in topics for p in t.partitions]
        code, refused = add_partitions_refusal(
            self.auth, request.v3_and_below_transactional_id, asked
        )
        if code:
            return error_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, request, code)
        return self._add_partitions_to_txn(request, version, asked, refused)

    async def _add_partitions_to_txn(
        self, request: Any, version: int, asked: list[tuple[str, int]], refused: dict[Any, int]
    ) -> Any:
        known = self.broker.metadata
        unknown = {tp for tp in asked if tp not in refused and known.partition(*tp) is None}
        if unknown or refused:  # Kafka adds none: those refused or unknown fail, the others
            # are not attempted
            errors: dict[tuple[str, int], int] = {
                tp: refused.get(tp)
                or (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                )
                for tp in asked
            }
        else:
            error = await self.coordinator.add_partitions(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                frozenset(asked),
            )
            errors = dict.fromkeys(asked, _fenced(error, version, 2))
        schema = response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), error in errors.items():
            by_topic.setdefault(topic, []).append(
                build(
                    schema.AddPartitionsToTxnPartitionResult,
                    partition_index=index,
                    partition_error_code=error,
                )
            )
        return build(
            schema.AddPartitionsToTxnResponse,
            throttle_time=0,
            results_by_topic_v3_and_below=[
                build(schema.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=ps)
                for topic, ps in by_topic.items()
            ],
        )

    def handle_add_offsets_to_txn(self, request: Any, version: int) -> Result:
        """The group's ``__consumer_offsets`` partition joins the transaction."""
        code = transactional_id_error(
            self.auth, AclOperation.WRITE, request.transactional_id
        ) or group_error(self.auth, AclOperation.READ, request.group_id)
        if code:
            return error_response(ApiKey.ADD_OFFSETS_TO_TXN, version, request, code)
        return self._add_offsets_to_txn(request, version)

    async def _add_offsets_to_txn(self, request: Any, version: int) -> Any:
        partition = partition_for(
            request.group_id, self.broker.config["offsets.topic.num.partitions"]
        )
        error = await self.coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            frozenset({(OFFSETS_TOPIC, partition)}),
        )
        return build(
            response_module(ApiKey.ADD_OFFSETS_TO_TXN, version).AddOffsetsToTxnResponse,
            throttle_time=0,
            error_code=_fenced(error, version, 2),
        )

    # -- EndTxn ------------------------------------------------------------------------------

    def handle_end_txn(self, request: Any, version: int) -> Result:
        if code := transactional_id_error(self.auth, AclOperation.WRITE, request.transactional_id):
            return error_response(ApiKey.END_TXN, version, request, code)
        return self._end_txn(request, version)

    async def _end_txn(self, request: Any, version: int) -> Any:
        error = await self.coordinator.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
        )
        return build(
            response_module(ApiKey.END_TXN, version).EndTxnResponse,
            throttle_time=0,
            error_code=_fenced(error, version, 2),
        )

    # -- DescribeTransactions, ListTransactions ----------------------------------------------

    def handle_describe_transactions(self, request: Any, version: int) -> Any:
        """Each id this broker coordinates, as its coordinator holds it; an error answer
        carries the schema's defaults (0, ""), as Kafka's does."""
        schema = response_module(ApiKey.DESCRIBE_TRANSACTIONS, version)
        states = []
        auth = self.auth
        for transactional_id in request.transactional_ids:
            if error := transactional_id_error(auth, AclOperation.DESCRIBE, transactional_id):
                states.append(_describe_error(schema, transactional_id, error))
                continue
            error = self.coordinator.state.ownership_error(transactional_id)
            txn = self.coordinator.state.transactions.get(transactional_id)
            if not error and (txn is None or txn.producer_epoch < 0):
                error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            if error or txn is None:
                states.append(_describe_error(schema, transactional_id, error))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(index)
            if auth.enabled:  # only the topics the principal may describe, as Kafka
                shown = auth.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
                by_topic = {t: p for t, p in by_topic.items() if t in shown}
            states.append(
                build(
                    schema.TransactionState,
                    error_code=ErrorCode.NONE,
                    transactional_id=transactional_id,
                    transaction_state=txn.state.kafka_name,
                    transaction_timeout=txn.txn_timeout_ms,
                    transaction_start_time=_start_time(txn.txn_start_timestamp),
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    topics=[
                        build(schema.TopicData, topic=topic, partitions=indexes)
                        for topic, indexes in by_topic.items()
                    ],
                )
            )
        return build(
            schema.DescribeTransactionsResponse, throttle_time=0, transaction_states=states
        )

    def handle_list_transactions(self, request: Any, version: int) -> Any:
        """The transactional ids this broker coordinates, filtered as asked (states by
        Kafka's names, producer ids, and from v1 how long they have been open)."""
        schema = response_module(ApiKey.LIST_TRANSACTIONS, version)
        names = {s.kafka_name: s for s in TransactionState}
        wanted = set(request.state_filters)
        unknown = sorted(wanted - set(names))
        producers = {int(p) for p in request.producer_id_filters}
        duration = getattr(request, "duration_filter", -1)
        duration_ms = (
            int(duration.total_seconds() * 1000) if hasattr(duration, "total_seconds") else duration
        )
        now = self.coordinator.scheduler.wall_ms()
        listed = []
        owned: Iterable[TransactionMetadata] = self.coordinator.state.owned_transactions()
        if self.auth.enabled:  # only the ids the principal may describe, as Kafka
            owned = list(owned)
            shown = self.auth.authorized(
                AclOperation.DESCRIBE,
                ResourceType.TRANSACTIONAL_ID,
                [txn.transactional_id for txn in owned],
            )
            owned = [txn for txn in owned if txn.transactional_id in shown]
        for txn in owned:
            if txn.producer_epoch < 0:
                continue  # an id whose first InitProducerId has not completed
            if wanted and txn.state.kafka_name not in wanted:
                continue
            if producers and txn.producer_id not in producers:
                continue
            if (
                duration_ms is not None
                and duration_ms >= 0
                and (
                    txn.state != TransactionState.ONGOING
                    or now - txn.txn_start_timestamp < duration_ms
                )
            ):
                continue
            listed.append(
                build(
                    schema.TransactionState,
                    transactional_id=txn.transactional_id,
                    producer_id=txn.producer_id,
                    transaction_state=txn.state.kafka_name,
                )
            )
        return build(
            schema.ListTransactionsResponse,
            throttle_time=0,
            error_code=ErrorCode.NONE,
            unknown_state_filters=unknown,
            transaction_states=listed,
        )


def _start_time(ms: int) -> datetime.datetime:
    """A transaction's start for DescribeTransactions (kio's field is a datetime, not
    nullable): -1, an id with no transaction open, is the instant 1 ms before the epoch,
    which is written as -1, as Kafka writes it."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


def _describe_error(schema: Any, transactional_id: str, code: int) -> Any:
    """DescribeTransactions' entry for an id answered with an error: the schema's
    defaults (0, ""), as Kafka's."""
    return build(
        schema.TransactionState,
        error_code=code,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout=0,
        transaction_start_time=_start_time(0),
        producer_id=0,
        producer_epoch=0,
        topics=[],
    )


def error_response(key: int, version: int, body: Any, code: int) -> Any:
    """The API's response answering ``code`` throughout (a refused request)."""
    schema = response_module(key, version)
    if key in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
        name = "AddOffsetsToTxnResponse" if key == ApiKey.ADD_OFFSETS_TO_TXN else "EndTxnResponse"
        return build(getattr(schema, name), throttle_time=0, error_code=code)
    if key == ApiKey.INIT_PRODUCER_ID:
        return build(
            schema.InitProducerIdResponse,
            throttle_time=0,
            error_code=code,
            producer_id=-1,
            producer_epoch=-1,
        )
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return build(
            schema.AddPartitionsToTxnResponse,
            throttle_time=0,
            results_by_topic_v3_and_below=[
                build(
                    schema.AddPartitionsToTxnTopicResult,
                    name=t.name,
                    results_by_partition=[
                        build(
                            schema.AddPartitionsToTxnPartitionResult,
                            partition_index=p,
                            partition_error_code=code,
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.v3_and_below_topics
            ],
        )
    if key == ApiKey.DESCRIBE_TRANSACTIONS:
        return build(
            schema.DescribeTransactionsResponse,
            throttle_time=0,
            transaction_states=[_describe_error(schema, t, code) for t in body.transactional_ids],
        )
    return build(
        schema.ListTransactionsResponse,
        throttle_time=0,
        error_code=code,
        unknown_state_filters=[],
        transaction_states=[],
    )
