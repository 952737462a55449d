"""Scenarios of transactions: FindCoordinator of a transactional id, InitProducerId with
one at every version, a transaction committed and one aborted as read_committed and
read_uncommitted fetches and ListOffsets see them, offsets sent to a transaction, the
coordinator's errors (no transaction, a stale epoch, an unknown producer id or partition,
a bad timeout), and DescribeTransactions / ListTransactions."""

from __future__ import annotations

from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LATEST,
    LIST_OFFSETS,
    OFFSET_FETCH,
    _offsets_of,
    batch,
    consumer_fetch,
    fetched,
    reheader,
    scenario,
    topic_with_records,
    versions,
)
from tests.differential.scenarios.group_requests import coordinator_ready

ADD_PARTITIONS = 3
ADD_OFFSETS = 3
END_TXN = 3
TXN_OFFSET_COMMIT = 3
TIMEOUT = 60_000
TRANSACTIONAL = 0x10


async def txn_coordinator_ready(c: Client, transactional_id: str) -> None:
    """Wait (unrecorded) until the id's coordinator is known and has loaded: the first
    FindCoordinator creates ``__transaction_state``, in Kafka's own time and ours."""
    await c.until(
        ApiKey.FIND_COORDINATOR,
        FIND_COORDINATOR,
        lambda r: all(k.error_code.value == 0 for k in r.coordinators),
        key_type=1,
        coordinator_keys=[transactional_id],
    )


async def init(
    c: Client, label: str, transactional_id: str, version: int = INIT_PRODUCER_ID
) -> Any:
    """InitProducerId of the transactional id, recorded once the coordinator has answered
    one (unrecorded: a coordinator loading its partition says so first); so the recorded
    answer is each broker's second epoch of the id."""
    await txn_coordinator_ready(c, transactional_id)
    request = {
        "transactional_id": transactional_id,
        "transaction_timeout": TIMEOUT,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    await c.until(
        ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID, lambda r: r.error_code.value == 0, **request
    )
    return await c.call(label, ApiKey.INIT_PRODUCER_ID, version, lenient=True, **request)


async def add_partitions(
    c: Client, label: str, txn: str, pid: int, epoch: int, topic: str, *partitions: int
) -> Any:
    return await c.call(
        label,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ADD_PARTITIONS,
        v3_and_below_transactional_id=txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": topic, "partitions": list(partitions or (0,))}],
    )


async def end_txn(c: Client, label: str, txn: str, pid: int, epoch: int, commit: bool) -> Any:
    return await c.call(
        label,
        ApiKey.END_TXN,
        END_TXN,
        transactional_id=txn,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )


async def produce_in_txn(
    c: Client, label: str, txn: str, topic: str, pid: int, epoch: int, seq: int, *values: bytes
) -> Any:
    records = reheader(
        batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq),
        attributes=TRANSACTIONAL,
    )
    return await c.call(
        label,
        ApiKey.PRODUCE,
        9,
        transactional_id=txn,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )


async def read(c: Client, label: str, topic: str, committed: bool, offset: int = 0) -> Any:
    request = consumer_fetch([{"topic": topic, "partitions": [fetched(0, offset)]}])
    request["isolation_level"] = 1 if committed else 0
    return await c.call(label, ApiKey.FETCH, FETCH, lenient=True, **request)


async def latest(c: Client, label: str, topic: str, committed: bool) -> Any:
    return await c.call(
        label,
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS,
        replica_id=-1,
        isolation_level=1 if committed else 0,
        topics=[{"name": topic, "partitions": [_offsets_of(0, LATEST)]}],
    )


async def stable_at(c: Client, topic: str, offset: int) -> None:
    """Wait (unrecorded) until the last stable offset reaches ``offset``: the markers are
    written after EndTxn is answered, in each broker's own time."""
    await c.until(
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS,
        lambda r: r.topics[0].partitions[0].offset == offset,
        replica_id=-1,
        isolation_level=1,
        topics=[{"name": topic, "partitions": [_offsets_of(0, LATEST)]}],
    )


@scenario
async def find_coordinator_of_a_transaction(c: Client) -> None:
    txn = c.topic("txn")
    await txn_coordinator_ready(c, txn)
    await c.call(
        "find_txn", ApiKey.FIND_COORDINATOR, FIND_COORDINATOR, key_type=1, coordinator_keys=[txn]
    )


@scenario
async def transactional_init_producer_id_at_every_version(c: Client) -> None:
    txn = c.topic("txn")
    for version in versions(ApiKey.INIT_PRODUCER_ID):
        await init(c, f"init_v{version}", txn, version)  # each one bumps the epoch


@scenario
async def a_transaction_committed_then_one_aborted(c: Client) -> None:
    topic = await topic_with_records(c)
    txn = c.topic("txn")
    started = await init(c, "init", txn)
    pid, epoch = started.producer_id, started.producer_epoch
    await add_partitions(c, "add", txn, pid, epoch, topic)
    await add_partitions(c, "add_again", txn, pid, epoch, topic)
    await produce_in_txn(c, "produce_1", txn, topic, pid, epoch, 0, b"a", b"b")
    await read(c, "open_read_committed", topic, True)
    await read(c, "open_read_uncommitted", topic, False)
    await latest(c, "open_latest_committed", topic, True)
    await latest(c, "open_latest_uncommitted", topic, False)
    await end_txn(c, "commit", txn, pid, epoch, True)
    await stable_at(c, topic, 3)
    await read(c, "committed_read_committed", topic, True)
    await end_txn(c, "commit_again", txn, pid, epoch, True)
    await end_txn(c, "abort_after_commit", txn, pid, epoch, False)
    await add_partitions(c, "add_2", txn, pid, epoch, topic)
    await produce_in_txn(c, "produce_2", txn, topic, pid, epoch, 2, b"c")
    await end_txn(c, "abort", txn, pid, epoch, False)
    await stable_at(c, topic, 5)
    # From the aborted transaction's first offset: Kafka's read from 0 here stops after the
    # first batch (a consumer fetches again from its end); the answer past it is the point.
    await read(c, "aborted_read_committed", topic, True, 3)
    await read(c, "aborted_read_uncommitted", topic, False, 3)
    await latest(c, "end_latest_committed", topic, True)


@scenario
async def transaction_coordinator_errors(c: Client) -> None:
    topic = await topic_with_records(c)
    txn = c.topic("txn")
    started = await init(c, "init", txn)
    pid, epoch = started.producer_id, started.producer_epoch
    await end_txn(c, "end_without_a_transaction", txn, pid, epoch, True)
    await add_partitions(c, "add_stale_epoch", txn, pid, epoch - 1 if epoch else 5, topic)
    await add_partitions(c, "add_unknown_producer", txn, pid + 1, epoch, topic)
    await add_partitions(c, "add_unknown_partition", txn, pid, epoch, topic, 0, 7)
    for version in versions(ApiKey.ADD_PARTITIONS_TO_TXN):
        await c.call(
            f"add_fenced_v{version}",
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch + 1,
            v3_and_below_topics=[{"name": topic, "partitions": [0]}],
        )
    await c.call(
        "init_timeout_too_long",
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        transactional_id=txn,
        transaction_timeout=3_600_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    await c.call(
        "end_unknown_id",
        ApiKey.END_TXN,
        END_TXN,
        transactional_id=c.topic("never-initialised"),
        producer_id=pid,
        producer_epoch=epoch,
        committed=True,
    )


@scenario
async def offsets_sent_to_a_transaction(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b", b"c")
    group = c.topic("group")
    await coordinator_ready(c, group)
    txn = c.topic("txn")
    started = await init(c, "init", txn)
    pid, epoch = started.producer_id, started.producer_epoch
    await c.call(
        "add_offsets",
        ApiKey.ADD_OFFSETS_TO_TXN,
        ADD_OFFSETS,
        transactional_id=txn,
        producer_id=pid,
        producer_epoch=epoch,
        group_id=group,
    )
    await c.call(
        "txn_offset_commit",
        ApiKey.TXN_OFFSET_COMMIT,
        TXN_OFFSET_COMMIT,
        transactional_id=txn,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 2,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "in a transaction",
                    }
                ],
            }
        ],
    )
    for stable in (False, True):
        await c.call(
            f"offsets_while_open_require_stable_{stable}".lower(),
            ApiKey.OFFSET_FETCH,
            OFFSET_FETCH,
            groups=[{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
            require_stable=stable,
        )
    await end_txn(c, "commit", txn, pid, epoch, True)
    await c.until(
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        lambda r: r.groups[0].topics and r.groups[0].topics[0].partitions[0].committed_offset == 2,
        groups=[{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        require_stable=True,
    )
    await c.call(
        "offsets_after_commit",
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        groups=[{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
        require_stable=True,
    )


@scenario
async def describe_and_list_transactions(c: Client) -> None:
    topic = await topic_with_records(c)
    txn = c.topic("txn")
    started = await init(c, "init", txn)
    pid, epoch = started.producer_id, started.producer_epoch
    await add_partitions(c, "add", txn, pid, epoch, topic)
    await c.call(
        "describe",
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        transactional_ids=[txn, c.topic("unknown-txn")],
    )

    def ours(response: Any) -> Any:  # the broker lists every id it coordinates
        return [s for s in response.transaction_states if s.transactional_id == txn]

    for version in versions(ApiKey.LIST_TRANSACTIONS):
        await c.call(
            f"list_ongoing_v{version}",
            ApiKey.LIST_TRANSACTIONS,
            version,
            view=ours,
            lenient=True,
            state_filters=["Ongoing"],
            producer_id_filters=[],
            duration_filter=-1,
        )
    await c.call(
        "list_unknown_state",
        ApiKey.LIST_TRANSACTIONS,
        0,
        view=lambda r: (r.error_code, r.unknown_state_filters, ours(r)),
        state_filters=["Bogus", "Ongoing"],
        producer_id_filters=[],
    )
    await end_txn(c, "abort", txn, pid, epoch, False)
