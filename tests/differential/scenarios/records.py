"""Scenarios of the record APIs: Produce, Fetch, ListOffsets."""

from __future__ import annotations

from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    TS,
    batch,
    fetch,
    init_producer_id,
    list_offsets,
    produce,
    scenario,
    topic_with_records,
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
    init = await init_producer_id(c, "init_producer_id")
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
