"""The differential corpus: client-level scenarios of exact Kafka requests, each run against
Apache Kafka and Purgatory with the same topic setup (tests/cluster/test_differential.py).

Each scenario is an async function of a `Client` (tests/differential/harness.py) that sends
requests with `call(label, api, version, **fields)`; its topics are named after it
(`c.topic()`), so scenarios do not see each other's. Versions are the newest both brokers
serve for the fields used. Both brokers run with ``auto.create.topics.enable=false``.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.records import Header
from tests.differential.harness import Client, Scenario

SCENARIOS: dict[str, Scenario] = {}

TS = 1_700_000_000_000  # every record's create time: timestamps compare exactly

API_VERSIONS = 3
METADATA = 12
CREATE_TOPICS = 7
DELETE_TOPICS = 6
PRODUCE = 9
FETCH = 12
LIST_OFFSETS = 7
FIND_COORDINATOR = 4
JOIN_GROUP = 9
SYNC_GROUP = 5
HEARTBEAT = 4
LEAVE_GROUP = 5
OFFSET_COMMIT = 8
OFFSET_FETCH = 8
INIT_PRODUCER_ID = 4

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


# -- building blocks ---------------------------------------------------------------------


def batch(*values: bytes, ts: int = TS, **producer: int) -> bytes:
    """One uncompressed v2 batch of ``values`` (key ``k<i>``), timestamps ``ts``, ``ts+1``..."""
    records: list[tuple[int, bytes | None, bytes | None, list[Header]]] = [
        (ts + i, b"k%d" % i, value, []) for i, value in enumerate(values)
    ]
    return kafka_records.encode(records, **producer)


async def create(
    c: Client, label: str, *topics: dict[str, Any], validate_only: bool = False
) -> Any:
    return await c.call(
        label,
        ApiKey.CREATE_TOPICS,
        CREATE_TOPICS,
        topics=[
            {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": [], **t}
            for t in topics
        ],
        timeout=10_000,
        validate_only=validate_only,
    )


async def topic_ready(c: Client, topic: str) -> None:
    """Wait (unrecorded) until this broker's metadata has the topic with a leader for every
    partition: Kafka answers CreateTopics once the controller has committed the topic,
    before its brokers have applied it (a client retries meanwhile)."""
    await c.until(
        ApiKey.METADATA,
        METADATA,
        lambda r: all(
            t.error_code.value == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
            for t in r.topics
        ),
        topics=[{"name": topic, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def metadata(c: Client, label: str, topics: list[str] | None) -> Any:
    return await c.call(
        label,
        ApiKey.METADATA,
        METADATA,
        topics=None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def produce(
    c: Client, label: str, topic: str, records: bytes, partition: int = 0, acks: int = 1
) -> Any:
    return await c.call(
        label,
        ApiKey.PRODUCE,
        PRODUCE,
        transactional_id=None,
        acks=acks,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    )


async def fetch(
    c: Client, label: str, topic: str, offset: int, max_wait: int = 0, partition: int = 0
) -> Any:
    return await c.call(
        label,
        ApiKey.FETCH,
        FETCH,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


async def list_offsets(
    c: Client, label: str, topic: str, timestamp: int, partition: int = 0
) -> Any:
    return await c.call(
        label,
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "current_leader_epoch": -1,
                        "timestamp": timestamp,
                    }
                ],
            }
        ],
    )


async def topic_with_records(c: Client, *values: bytes, **config: str) -> str:
    """Create this scenario's topic (1 partition) and produce ``values`` in one batch."""
    topic = c.topic()
    configs = [{"name": k.replace("_", "."), "value": v} for k, v in config.items()]
    await create(c, "create", {"name": topic, "configs": configs})
    await topic_ready(c, topic)
    if values:
        await produce(c, "produce", topic, batch(*values))
    return topic


# -- ApiVersions ------------------------------------------------------------------------


@scenario
async def api_versions(c: Client) -> None:
    """Only the error code is compared; the test reports the ranges as information."""
    await c.call(
        "api_versions",
        ApiKey.API_VERSIONS,
        API_VERSIONS,
        client_software_name="differential",
        client_software_version="1",
    )


# -- Metadata ----------------------------------------------------------------------------


@scenario
async def metadata_known_topic(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": 3})
    await topic_ready(c, c.topic())
    await metadata(c, "metadata", [c.topic()])


@scenario
async def metadata_unknown_topic_without_auto_create(c: Client) -> None:
    await metadata(c, "metadata", [c.topic("missing")])
    await metadata(c, "metadata_again", [c.topic("missing")])  # still not created


@scenario
async def metadata_no_topics(c: Client) -> None:
    await metadata(c, "metadata", [])


@scenario
async def metadata_all_topics(c: Client) -> None:
    await create(c, "create", {"name": c.topic("a")}, {"name": c.topic("b"), "num_partitions": 2})
    await topic_ready(c, c.topic("a"))
    await topic_ready(c, c.topic("b"))
    response = await metadata(c, "metadata", None)
    names = {t.name for t in response.topics}
    assert {c.topic("a"), c.topic("b")} <= names, names


@scenario
async def metadata_invalid_topic_name(c: Client) -> None:
    await metadata(c, "metadata", ["bad/name"])


# -- CreateTopics ------------------------------------------------------------------------


@scenario
async def create_topics_ok_then_exists(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": 2})
    await create(c, "create_again", {"name": c.topic(), "num_partitions": 2})


@scenario
async def create_topics_invalid_replication_factor(c: Client) -> None:
    await create(c, "rf_3_of_1_broker", {"name": c.topic("a"), "replication_factor": 3})
    await create(c, "rf_0", {"name": c.topic("b"), "replication_factor": 0})


@scenario
async def create_topics_invalid_partitions(c: Client) -> None:
    await create(c, "zero_partitions", {"name": c.topic("a"), "num_partitions": 0})
    await create(c, "negative_partitions", {"name": c.topic("b"), "num_partitions": -5})


@scenario
async def create_topics_bad_names(c: Client) -> None:
    await create(c, "slash", {"name": "bad/name"})
    await create(c, "dot", {"name": "."})
    await create(c, "too_long", {"name": "x" * 250})
    await create(c, "empty", {"name": ""})


@scenario
async def create_topics_defaults(c: Client) -> None:
    await create(c, "create", {"name": c.topic(), "num_partitions": -1, "replication_factor": -1})


@scenario
async def create_topics_validate_only(c: Client) -> None:
    await create(c, "validate", {"name": c.topic(), "num_partitions": 2}, validate_only=True)
    await create(c, "validate_bad", {"name": c.topic("b"), "num_partitions": 0}, validate_only=True)
    await metadata(c, "metadata", [c.topic()])  # not created


@scenario
async def create_topics_invalid_config(c: Client) -> None:
    await create(
        c, "unknown_config", {"name": c.topic("a"), "configs": [{"name": "no.such", "value": "1"}]}
    )
    await create(
        c,
        "bad_value",
        {"name": c.topic("b"), "configs": [{"name": "retention.ms", "value": "soon"}]},
    )


# -- Produce -----------------------------------------------------------------------------


@scenario
async def produce_acks(c: Client) -> None:
    topic = await topic_with_records(c)
    await produce(c, "acks_1", topic, batch(b"a", b"b"), acks=1)
    await produce(c, "acks_all", topic, batch(b"c"), acks=-1)
    await produce(c, "invalid_acks_2", topic, batch(b"d"), acks=2)
    await produce(c, "acks_1_again", topic, batch(b"e"), acks=1)


@scenario
async def produce_to_an_unknown_topic_and_partition(c: Client) -> None:
    await produce(c, "unknown_topic", c.topic("missing"), batch(b"a"))
    topic = await topic_with_records(c)
    await produce(c, "partition_5_of_1", topic, batch(b"a"), partition=5)


@scenario
async def produce_beyond_max_message_bytes(c: Client) -> None:
    topic = await topic_with_records(c, max_message_bytes="1024")
    await produce(c, "too_large", topic, batch(b"x" * 2000))
    await produce(c, "fits", topic, batch(b"x" * 100))


@scenario
async def produce_corrupt_crc(c: Client) -> None:
    topic = await topic_with_records(c)
    data = bytearray(batch(b"value"))
    data[-3] ^= 0xFF  # a byte of the record's value: the CRC no longer matches
    await produce(c, "corrupt", topic, bytes(data))
    await list_offsets(c, "nothing_appended", topic, LATEST)


@scenario
async def produce_idempotent_sequences(c: Client) -> None:
    topic = await topic_with_records(c)
    await c.until(
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        lambda r: r.error_code.value == 0,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    init = await c.call(
        "init_producer_id",
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    pid = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    await produce(c, "seq_0", topic, batch(b"a", b"b", base_sequence=0, **pid), acks=-1)
    await produce(c, "seq_2", topic, batch(b"c", base_sequence=2, **pid), acks=-1)
    await produce(c, "retry_of_seq_0", topic, batch(b"a", b"b", base_sequence=0, **pid), acks=-1)
    await produce(c, "gap_seq_9", topic, batch(b"d", base_sequence=9, **pid), acks=-1)
    stale = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch - 1}
    if init.producer_epoch > 0:
        await produce(c, "older_epoch", topic, batch(b"e", base_sequence=3, **stale), acks=-1)
    await produce(c, "seq_3", topic, batch(b"e", base_sequence=3, **pid), acks=-1)
    await list_offsets(c, "end", topic, LATEST)


# -- Fetch -------------------------------------------------------------------------------


@scenario
async def fetch_from_zero(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b", b"c")
    await fetch(c, "fetch_0", topic, 0)
    await fetch(c, "fetch_1", topic, 1)


@scenario
async def fetch_out_of_range(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    await fetch(c, "beyond_end", topic, 100)
    await fetch(c, "negative", topic, -5)


@scenario
async def fetch_waits_without_data(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    await fetch(c, "at_end", topic, 1, max_wait=200)


@scenario
async def fetch_unknown_topic_and_partition(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    await fetch(c, "unknown_partition", topic, 0, partition=4)
    await fetch(c, "unknown_topic", c.topic("missing"), 0)


# -- ListOffsets -------------------------------------------------------------------------


@scenario
async def list_offsets_of_a_topic(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b", b"c")
    await list_offsets(c, "earliest", topic, EARLIEST)
    await list_offsets(c, "latest", topic, LATEST)
    await list_offsets(c, "max_timestamp", topic, MAX_TIMESTAMP)
    await list_offsets(c, "timestamp_of_second", topic, TS + 1)
    await list_offsets(c, "timestamp_before_all", topic, TS - 1000)
    await list_offsets(c, "timestamp_after_all", topic, TS + 1000)


@scenario
async def list_offsets_of_an_empty_topic(c: Client) -> None:
    topic = await topic_with_records(c)
    await list_offsets(c, "earliest", topic, EARLIEST)
    await list_offsets(c, "latest", topic, LATEST)
    await list_offsets(c, "timestamp", topic, TS)


@scenario
async def list_offsets_unknown(c: Client) -> None:
    topic = await topic_with_records(c)
    await list_offsets(c, "unknown_partition", topic, LATEST, partition=3)
    await list_offsets(c, "unknown_topic", c.topic("missing"), LATEST)


# -- groups ------------------------------------------------------------------------------


async def coordinator_ready(c: Client, group: str) -> None:
    """Wait (unrecorded) until the group's coordinator is known: the first FindCoordinator
    starts creating the offsets topic, in Kafka's own time and ours."""
    await c.until(
        ApiKey.FIND_COORDINATOR,
        FIND_COORDINATOR,
        lambda r: all(k.error_code.value == 0 for k in r.coordinators),
        key_type=0,
        coordinator_keys=[group],
    )
    loading = {"not_coordinator", "coordinator_load_in_progress", "coordinator_not_available"}
    await c.until(
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        lambda r: r.groups[0].error_code.name not in loading,
        groups=[{"group_id": group, "topics": []}],
        require_stable=False,
    )


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, *partitions: int) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions, no user data."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


async def join(
    c: Client, label: str, group: str, member_id: str = "", session_timeout: int = 30_000
) -> Any:
    return await c.call(
        label,
        ApiKey.JOIN_GROUP,
        JOIN_GROUP,
        group_id=group,
        session_timeout=session_timeout,
        rebalance_timeout=30_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": subscription(c.topic())}],
        reason=None,
    )


async def sync(c: Client, label: str, group: str, member_id: str, generation: int) -> Any:
    return await c.call(
        label,
        ApiKey.SYNC_GROUP,
        SYNC_GROUP,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": member_id, "assignment": assignment(c.topic(), 0)}],
    )


async def heartbeat(c: Client, label: str, group: str, member_id: str, generation: int) -> Any:
    return await c.call(
        label,
        ApiKey.HEARTBEAT,
        HEARTBEAT,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )


async def leave(c: Client, label: str, group: str, *member_ids: str) -> Any:
    return await c.call(
        label,
        ApiKey.LEAVE_GROUP,
        LEAVE_GROUP,
        group_id=group,
        members=[{"member_id": m, "group_instance_id": None, "reason": None} for m in member_ids],
    )


async def commit(
    c: Client,
    label: str,
    group: str,
    topic: str,
    offset: int,
    member_id: str = "",
    generation: int = -1,
) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_COMMIT,
        OFFSET_COMMIT,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                ],
            }
        ],
    )


async def offset_fetch(c: Client, label: str, group: str, topics: list[str] | None) -> Any:
    return await c.call(
        label,
        ApiKey.OFFSET_FETCH,
        OFFSET_FETCH,
        groups=[
            {
                "group_id": group,
                "topics": None
                if topics is None
                else [{"name": t, "partition_indexes": [0]} for t in topics],
            }
        ],
        require_stable=False,
    )


@scenario
async def find_coordinator_of_a_group(c: Client) -> None:
    group = c.topic("group")
    await coordinator_ready(c, group)
    await c.call(
        "find", ApiKey.FIND_COORDINATOR, FIND_COORDINATOR, key_type=0, coordinator_keys=[group]
    )
    await c.call("find_v3", ApiKey.FIND_COORDINATOR, 3, key_type=0, key=group)


@scenario
async def find_coordinator_of_a_transaction(c: Client) -> None:
    await coordinator_ready(c, c.topic("group"))
    await c.call(
        "find_txn", ApiKey.FIND_COORDINATOR, FIND_COORDINATOR, key_type=1, coordinator_keys=["tx"]
    )


@scenario
async def group_member_lifecycle_and_its_errors(c: Client) -> None:
    await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    first = await join(c, "join_without_member_id", group)
    member = first.member_id
    joined = await join(c, "join", group, member)
    generation = joined.generation_id
    await sync(c, "sync_wrong_generation", group, member, generation + 1)
    await sync(c, "sync_unknown_member", group, "nobody", generation)
    await sync(c, "sync", group, member, generation)
    await heartbeat(c, "heartbeat", group, member, generation)
    await heartbeat(c, "heartbeat_wrong_generation", group, member, generation + 1)
    await heartbeat(c, "heartbeat_older_generation", group, member, generation - 1)
    await heartbeat(c, "heartbeat_unknown_member", group, "nobody", generation)
    await commit(c, "commit", group, c.topic(), 1, member, generation)
    await commit(c, "commit_illegal_generation", group, c.topic(), 1, member, generation + 5)
    await commit(c, "commit_unknown_member", group, c.topic(), 1, "nobody", generation)
    await offset_fetch(c, "offset_fetch", group, [c.topic()])
    await leave(c, "leave_unknown_member", group, "nobody")
    await leave(c, "leave", group, member)
    await heartbeat(c, "heartbeat_after_leaving", group, member, generation)
    await offset_fetch(c, "offset_fetch_after_leaving", group, None)


@scenario
async def group_join_errors(c: Client) -> None:
    group = c.topic("group")
    await coordinator_ready(c, group)
    await join(c, "session_timeout_too_short", group, session_timeout=1000)
    await join(c, "unknown_member_id", group, "nobody")
    await join(c, "empty_group_id", "")


@scenario
async def group_requests_to_an_unknown_group(c: Client) -> None:
    group = c.topic("nogroup")
    await coordinator_ready(c, group)
    await heartbeat(c, "heartbeat", group, "nobody", 1)
    await sync(c, "sync", group, "nobody", 1)
    await leave(c, "leave", group, "nobody")
    await offset_fetch(c, "offset_fetch", group, [c.topic()])


@scenario
async def offset_commit_and_fetch_standalone(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    group = c.topic("group")
    await coordinator_ready(c, group)
    await commit(c, "commit", group, topic, 2)
    await offset_fetch(c, "fetch_one", group, [topic])
    await offset_fetch(c, "fetch_all", group, None)
    await commit(c, "commit_again", group, topic, 1)
    await offset_fetch(c, "fetch_after_rewind", group, [topic])
    await offset_fetch(c, "fetch_uncommitted_topic", group, [c.topic("other")])
    await commit(c, "commit_unknown_topic", group, c.topic("missing"), 1)


# -- DeleteTopics ------------------------------------------------------------------------


async def delete(
    c: Client, label: str, names: list[str | None], ids: list[Any] | None = None
) -> Any:
    topics = [{"name": n, "topic_id": None} for n in names]
    topics += [{"name": None, "topic_id": i} for i in ids or []]
    return await c.call(label, ApiKey.DELETE_TOPICS, DELETE_TOPICS, topics=topics, timeout=10_000)


@scenario
async def delete_topics(c: Client) -> None:
    created = await create(c, "create", {"name": c.topic()})
    await topic_ready(c, c.topic())
    topic_id = created.topics[0].topic_id
    await delete(c, "delete", [c.topic()])
    await delete(c, "delete_again", [c.topic()])
    await delete(c, "delete_unknown_id", [], [uuid.UUID(int=12345)])
    await delete(c, "delete_deleted_id", [], [topic_id])
    await c.until(
        ApiKey.METADATA,
        METADATA,
        _no_topic,
        topics=[{"name": c.topic(), "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    await metadata(c, "metadata_after_delete", [c.topic()])


def _no_topic(response: Any) -> bool:
    return all(t.error_code.value != 0 for t in response.topics)
