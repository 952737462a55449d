"""Scenarios of refused records and of epochs: batches that are well framed but say
something wrong (no records, counts that disagree, offset deltas out of order, control or
transactional flags from a client, two batches in one request), timestamps outside a
topic's bounds, batches larger than a topic's limits, an idempotent producer's sequence
and epoch errors, and the leader epochs a consumer sends with Fetch and ListOffsets."""

from __future__ import annotations

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import (
    FETCH,
    LATEST,
    TS,
    batch,
    consumer_fetch,
    fetch,
    fetched,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
    produce_to,
    reheader,
    scenario,
    topic_with_records,
)

CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
LOG_APPEND_TIME_FLAG = 0x08
HOUR_MS = 3_600_000


def second_offset_delta(data: bytes, delta: int) -> bytes:
    """A two-record batch whose second record says offset delta ``delta`` (records of
    under 64 bytes: one-byte lengths and deltas)."""
    first = 61 + 1 + data[61] // 2  # the second record's length varint
    body = bytearray(data[61:])
    body[first - 61 + 3] = delta * 2  # after length, attributes, timestamp delta
    return reheader(data, bytes(body))


@scenario
async def produce_well_framed_but_invalid_batches(c: Client) -> None:
    topic = await topic_with_records(c)
    two = batch(b"a", b"b")
    await produce(c, "no_records", topic, reheader(two, b"", record_count=0, last_offset_delta=-1))
    await produce(c, "count_says_3_of_2", topic, reheader(two, record_count=3))
    await produce(c, "last_delta_says_5", topic, reheader(two, last_offset_delta=5))
    await produce(c, "base_offset_5", topic, reheader(two, base_offset=5))
    await produce(c, "control_batch", topic, reheader(two, attributes=CONTROL_FLAG))
    await produce(c, "log_append_time_type", topic, reheader(two, attributes=LOG_APPEND_TIME_FLAG))
    await produce(c, "sequence_without_producer_id", topic, reheader(two, base_sequence=4))
    await produce(c, "producer_id_without_sequence", topic, reheader(two, producer_id=77))
    await produce(c, "two_batches", topic, two + batch(b"c"))
    await produce(c, "magic_1", topic, reheader(two, magic=1))
    await list_offsets(c, "end", topic, LATEST)


@scenario
async def produce_offset_deltas_out_of_order(c: Client) -> None:
    topic = await topic_with_records(c)
    await produce(c, "offset_deltas_0_0", topic, second_offset_delta(batch(b"a", b"b"), 0))
    await produce(c, "offset_deltas_0_3", topic, second_offset_delta(batch(b"a", b"b"), 3))


@scenario
async def produce_transactional_batch_without_a_transaction(c: Client) -> None:
    topic = await topic_with_records(c)
    txn = reheader(batch(b"a", producer_id=5, producer_epoch=0, base_sequence=0), attributes=0x10)
    await produce(c, "transactional", topic, txn)


@scenario
async def produce_timestamps_outside_the_topic_bounds(c: Client) -> None:
    topic = await topic_with_records(
        c, message_timestamp_before_max_ms=str(HOUR_MS), message_timestamp_after_max_ms="60000"
    )
    await produce(c, "too_old", topic, batch(b"a", b"b"))
    await produce(c, "too_new", topic, batch(b"a", ts=TS * 2))
    await produce(c, "no_timestamp", topic, batch(b"a", ts=-1))


@scenario
async def produce_negative_timestamp(c: Client) -> None:
    topic = await topic_with_records(c)
    await produce(c, "minus_5", topic, batch(b"a", ts=-5))


@scenario
async def produce_larger_than_a_segment(c: Client) -> None:
    """A batch within max.message.bytes but larger than segment.bytes (Kafka's least, 1 MiB)
    is RECORD_LIST_TOO_LARGE; beside it, a small batch to another partition is kept."""
    topic = await topic_with_records(
        c, partitions=2, segment_bytes=str(1 << 20), max_message_bytes=str(4 << 20)
    )
    big = batch(b"x" * (1 << 20) + b"x" * 4096)
    await produce_to(c, "beyond_segment", topic, {0: big, 1: batch(b"small")})
    await produce_to(c, "beyond_max_message_bytes", topic, {1: batch(b"x" * (5 << 20))})


@scenario
async def produce_idempotent_errors(c: Client) -> None:
    topic = await topic_with_records(c, partitions=2)
    init = await init_producer_id(c, "init")
    pid, epoch = init.producer_id, init.producer_epoch

    def seq(n: int, *values: bytes, e: int = epoch, p: int = pid) -> bytes:
        return batch(*(values or (b"v",)), producer_id=p, producer_epoch=e, base_sequence=n)

    await produce(c, "first_batch_seq_5", topic, seq(5))
    await produce(c, "seq_0", topic, seq(0, b"a", b"b"))
    await produce(c, "seq_2", topic, seq(2))
    await produce(c, "seq_3", topic, seq(3))
    await produce(c, "duplicate_of_seq_2", topic, seq(2))
    await produce(c, "duplicate_of_seq_0", topic, seq(0, b"a", b"b"))
    await produce(c, "overlapping_seq_1", topic, seq(1, b"x", b"y"))
    await produce(c, "seq_0_of_next_epoch", topic, seq(0, e=epoch + 1))
    await produce(c, "seq_4_of_old_epoch", topic, seq(4))
    await produce(c, "seq_1_two_epochs_on", topic, seq(1, e=epoch + 3))
    await produce(c, "other_partition_seq_0", topic, seq(0), partition=1)
    await produce(c, "unknown_producer_seq_0", topic, seq(0, p=pid + 1000), partition=1)
    await produce(c, "unknown_producer_seq_7", topic, seq(7, p=pid + 2000), partition=1)
    await init_producer_id(c, "init_with_the_producer_id", pid, epoch)
    await init_producer_id(c, "init_with_an_unknown_producer_id", pid + 1000, 0)
    await list_offsets(c, "end", topic, LATEST)


@scenario
async def fetch_and_list_offsets_with_leader_epochs(c: Client) -> None:
    """A new topic's leader epoch is 0: a consumer's current epoch above it is one the
    broker does not know yet; any negative one is no epoch."""
    topic = await topic_with_records(c, b"a", b"b", b"c")
    await metadata(c, "metadata", [topic])
    for epoch, name in ((0, "current"), (7, "future"), (-2, "negative")):
        await fetch(c, f"fetch_{name}_epoch", topic, 1, leader_epoch=epoch)
        await list_offsets(c, f"list_offsets_{name}_epoch", topic, LATEST, leader_epoch=epoch)
    await fetch(c, "fetch_future_epoch_unknown_partition", topic, 0, partition=3, leader_epoch=7)
    # KIP-320's last fetched epoch, which a follower sends to learn of a divergence.
    for last, offset in ((0, 3), (5, 3), (0, 2)):
        asked = [
            {"topic": topic, "partitions": [{**fetched(0, offset), "last_fetched_epoch": last}]}
        ]
        await c.call(
            f"fetch_at_{offset}_last_fetched_epoch_{last}",
            ApiKey.FETCH,
            FETCH,
            lenient=True,
            **consumer_fetch(asked),
        )
