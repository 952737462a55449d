"""Scenarios of the limits around records: Fetch's byte limits (a first batch larger than
the limit still comes whole, KIP-74), read_committed without transactions, acks=-1 below
min.insync.replicas, ListOffsets' special timestamps, and committed offsets' edges
(partitions a topic lacks, leader epochs, metadata longer than offset.metadata.max.bytes)."""

from __future__ import annotations

from typing import Any

from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    FETCH,
    LATEST,
    LIST_OFFSETS,
    MAX_TIMESTAMP,
    TS,
    batch,
    consumer_fetch,
    fetched,
    list_offsets,
    produce,
    reheader,
    scenario,
    topic_with_records,
)
from tests.differential.scenarios.group_requests import commit, coordinator_ready, offset_fetch

EARLIEST_LOCAL = -4  # KIP-405's earliest offset still in the local log (ListOffsets v8+)


async def fetch_with(
    c: Client, label: str, partitions: list[dict[str, Any]], topic: str, **fields: Any
) -> Any:
    """A consumer's Fetch of ``partitions`` of ``topic``, with ``fields`` overriding."""
    request = consumer_fetch([{"topic": topic, "partitions": partitions}]) | fields
    return await c.call(label, ApiKey.FETCH, FETCH, lenient=True, **request)


@scenario
async def fetch_byte_limits(c: Client) -> None:
    topic = await topic_with_records(c, b"a" * 100, partitions=2)
    await produce(c, "second_batch", topic, batch(b"b" * 100))
    await produce(c, "third_batch", topic, batch(b"c" * 100))
    await produce(c, "other_partition", topic, batch(b"d" * 100), partition=1)
    both = [fetched(0, 0), fetched(1, 0)]
    await fetch_with(
        c, "partition_max_bytes_10", [{**fetched(0, 0), "partition_max_bytes": 10}], topic
    )
    await fetch_with(
        c, "partition_max_bytes_300", [{**fetched(0, 0), "partition_max_bytes": 300}], topic
    )
    await fetch_with(c, "max_bytes_10", both, topic, max_bytes=10)
    await fetch_with(c, "max_bytes_300", both, topic, max_bytes=300)
    await fetch_with(c, "read_committed", both, topic, isolation_level=1)
    await fetch_with(
        c, "min_bytes_beyond_what_there_is", both, topic, min_bytes=1 << 20, max_wait=100
    )


@scenario
async def produce_below_min_insync_replicas(c: Client) -> None:
    topic = await topic_with_records(c, min_insync_replicas="2")
    await produce(c, "acks_all", topic, batch(b"a"), acks=-1)
    await produce(c, "acks_1", topic, batch(b"b"), acks=1)
    await list_offsets(c, "end", topic, LATEST)


@scenario
async def list_offsets_special_timestamps(c: Client) -> None:
    topic = await topic_with_records(c, b"a", b"b")
    await produce(c, "newest_timestamp_in_the_middle", topic, batch(b"c", ts=TS + 500))
    await produce(c, "older_again", topic, batch(b"d", ts=TS + 10))
    await list_offsets(c, "max_timestamp", topic, MAX_TIMESTAMP)
    await list_offsets(c, "max_timestamp_v6", topic, MAX_TIMESTAMP, version=6)
    await list_offsets(c, "earliest_local_v7", topic, EARLIEST_LOCAL, version=7)
    await list_offsets(c, "earliest_local_v8", topic, EARLIEST_LOCAL, version=8)
    await list_offsets(c, "timestamp_between", topic, TS + 20)
    await list_offsets(c, "minus_5", topic, -5, version=8)
    await list_offsets(c, "minus_6", topic, -6)
    await c.call(
        "same_partition_twice",
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {"name": topic, "partitions": [_latest(0), _latest(0)]},
            {"name": topic, "partitions": [_latest(1)]},
        ],
    )


@scenario
async def offset_commit_edges(c: Client) -> None:
    topic = await topic_with_records(c, b"a")
    group = c.topic("group")
    await coordinator_ready(c, group)
    await commit(c, "partition_5_of_1", group, topic, 1, partition=5)
    await commit(c, "with_leader_epoch", group, topic, 1, leader_epoch=3)
    await commit(c, "metadata_too_long", group, topic, 1, metadata="x" * 5000)
    await commit(c, "beyond_the_log_end", group, topic, 99)
    await commit(c, "negative_offset", group, topic, -5)
    await offset_fetch(c, "fetch", group, [topic], partitions=(0, 1, 5))


def _latest(partition: int) -> dict[str, int]:
    return {"partition_index": partition, "current_leader_epoch": -1, "timestamp": LATEST}


@scenario
async def produce_compressed_batches(c: Client) -> None:
    """A batch in each codec Kafka's clients write, read back (records compared decoded),
    then a codec that does not exist and a payload that does not decompress."""
    topic = await topic_with_records(c)
    plain = batch(b"v" * 300, b"w" * 300)
    for codec, name in ((1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")):
        await produce(c, name, topic, compressed(plain, codec))
    await produce(c, "refused_codec_7", topic, reheader(plain, attributes=7))
    await produce(c, "refused_gzip_of_garbage", topic, reheader(plain, b"not gzip", attributes=1))
    await fetch_with(c, "fetch", [fetched(0, 0)], topic)


def compressed(plain: bytes, codec: int) -> bytes:
    """``plain`` (an uncompressed batch) with its records compressed by ``codec``."""
    records = kafka_records.compress(codec, plain[kafka_records.HEADER_SIZE :])
    return reheader(plain, records, attributes=codec)
