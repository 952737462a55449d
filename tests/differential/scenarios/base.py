"""The corpus's building blocks: the registry (`@scenario`), the API versions the corpus
speaks, and request helpers (create a topic and wait for it, produce, fetch, list offsets)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from crc32c import crc32c

from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_schemas import VERSIONS
from purgatory.protocol.records import Header
from tests.differential.harness import Client, Scenario

SCENARIOS: dict[str, Scenario] = {}
# Scenarios for the secured pair (tests/cluster/test_differential.py's SECURED): SASL
# listeners, SCRAM users, the StandardAuthorizer.
SECURED_SCENARIOS: dict[str, Scenario] = {}

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
DESCRIBE_GROUPS = 5
LIST_GROUPS = 5
DELETE_GROUPS = 2

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def secured_scenario(fn: Scenario) -> Scenario:
    SECURED_SCENARIOS[fn.__name__] = fn
    return fn


# -- building blocks ---------------------------------------------------------------------


def batch(*values: bytes, ts: int = TS, **producer: int) -> bytes:
    """One uncompressed v2 batch of ``values`` (key ``k<i>``), timestamps ``ts``, ``ts+1``..."""
    records: list[tuple[int, bytes | None, bytes | None, list[Header]]] = [
        (ts + i, b"k%d" % i, value, []) for i, value in enumerate(values)
    ]
    return kafka_records.encode(records, **producer)


_FIELDS = (
    "base_offset",
    "batch_length",
    "leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)


def reheader(data: bytes, body: bytes | None = None, **fields: int) -> bytes:
    """A v2 batch with header ``fields`` (kafka_records.HEADER's names) and records ``body``
    replaced, its length and CRC made right again: a well-formed batch saying something
    wrong."""
    header = dict(zip(_FIELDS, kafka_records.HEADER.unpack_from(data), strict=True))
    unknown = set(fields) - set(header)
    if unknown:
        raise TypeError(f"no batch header field {sorted(unknown)}")
    header.update(fields)
    records = data[kafka_records.HEADER_SIZE :] if body is None else body
    header["batch_length"] = kafka_records.HEADER_SIZE - 12 + len(records)
    out = bytearray(kafka_records.HEADER.pack(*header.values()) + records)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


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
    partition, and the leader serves it: Kafka answers CreateTopics once the controller has
    committed the topic, before its brokers have applied it (a client retries meanwhile),
    and its metadata cache names the leader a moment before the replica is one."""
    response = await c.until(
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
    partitions = [p.partition_index for p in response.topics[0].partitions]
    await c.until(
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS,
        lambda r: all(p.error_code.value == 0 for t in r.topics for p in t.partitions),
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": topic, "partitions": [_offsets_of(p, LATEST) for p in partitions]}],
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
    return await produce_to(c, label, topic, {partition: records}, acks)


async def produce_to(
    c: Client, label: str, topic: str, records: dict[int, bytes], acks: int = 1
) -> Any:
    """One Produce of a record set to each of a topic's partitions."""
    return await c.call(
        label,
        ApiKey.PRODUCE,
        PRODUCE,
        transactional_id=None,
        acks=acks,
        timeout=10_000,
        topic_data=[
            {
                "name": topic,
                "partition_data": [{"index": p, "records": r} for p, r in records.items()],
            }
        ],
    )


async def fetch(
    c: Client,
    label: str,
    topic: str,
    offset: int,
    max_wait: int = 0,
    partition: int = 0,
    leader_epoch: int = -1,
) -> Any:
    topics = [{"topic": topic, "partitions": [fetched(partition, offset, leader_epoch)]}]
    return await c.call(
        label, ApiKey.FETCH, FETCH, lenient=True, **consumer_fetch(topics, max_wait)
    )


def consumer_fetch(topics: list[dict[str, Any]], max_wait: int = 0) -> dict[str, Any]:
    """A consumer's Fetch of ``topics``, its fields for every version (a ``lenient`` call
    sends those its version has)."""
    return {
        "replica_id": -1,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fetched(partition: int, offset: int, leader_epoch: int = -1) -> dict[str, int]:
    """One partition of a consumer's Fetch."""
    return {
        "partition": partition,
        "current_leader_epoch": leader_epoch,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }


async def list_offsets(
    c: Client,
    label: str,
    topic: str,
    timestamp: int,
    partition: int = 0,
    leader_epoch: int = -1,
    version: int = LIST_OFFSETS,
) -> Any:
    return await c.call(
        label,
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": topic, "partitions": [_offsets_of(partition, timestamp, leader_epoch)]}],
    )


def _offsets_of(partition: int, timestamp: int, leader_epoch: int = -1) -> dict[str, int]:
    return {
        "partition_index": partition,
        "current_leader_epoch": leader_epoch,
        "timestamp": timestamp,
    }


async def topic_with_records(c: Client, *values: bytes, partitions: int = 1, **config: str) -> str:
    """Create this scenario's topic (configs from keyword arguments, ``max_message_bytes``
    for ``max.message.bytes``) and produce ``values`` in one batch to partition 0."""
    topic = c.topic()
    configs = [{"name": k.replace("_", "."), "value": v} for k, v in config.items()]
    await create(c, "create", {"name": topic, "configs": configs, "num_partitions": partitions})
    await topic_ready(c, topic)
    if values:
        await produce(c, "produce", topic, batch(*values))
    return topic


async def init_producer_id(c: Client, label: str, pid: int = -1, epoch: int = -1) -> Any:
    """InitProducerId of an idempotent producer (first waits, unrecorded, until the broker
    has producer ids to give)."""
    await c.until(
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        lambda r: r.error_code.value == 0,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    return await c.call(
        label,
        ApiKey.INIT_PRODUCER_ID,
        INIT_PRODUCER_ID,
        transactional_id=None,
        transaction_timeout=60_000,
        producer_id=pid,
        producer_epoch=epoch,
    )


def versions(api_key: ApiKey) -> Iterator[int]:
    """The versions of an API Purgatory advertises (each within Kafka 4.3.1's range)."""
    low, high = VERSIONS[api_key]
    return iter(range(low, high + 1))


async def every_version(c: Client, name: str, api_key: ApiKey, **values: Any) -> None:
    """The same request at every advertised version, labelled ``<name>_v<version>`` (the
    fields a version lacks left out)."""
    for version in versions(api_key):
        await c.call(f"{name}_v{version}", api_key, version, lenient=True, **values)
