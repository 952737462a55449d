"""Produce, fetch, offsets and committed offsets against a live in-process broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Connection, Consumer, Producer
from purgatory.protocol import messages as m
from purgatory.protocol.api import (
    ApiKey,
    decode_response_body,
    decode_response_header,
    encode_request_into,
)
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.framing import FrameDecoder
from purgatory.protocol.records import decode_records, encode_batch
from tests.support import bootstrap


def produce_request(
    topic: str, partition: int, values: list[bytes], acks: int = 1
) -> m.ProduceRequest:
    batch = encode_batch([(None, v) for v in values], timestamp_ms=1_000)
    return m.ProduceRequest(
        acks, 30000, [m.TopicProduceData(topic, [m.PartitionProduceData(partition, batch)])]
    )


def fetch_request(
    topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, leader_epoch: int = -1
) -> m.FetchRequest:
    part = m.FetchPartition(partition, offset, max_bytes, leader_epoch)
    return m.FetchRequest(-1, 0, 1, max_bytes, [m.FetchTopic(topic, [part])])


async def create(broker: Broker, topic: str, partitions: int = 1, **configs: str) -> None:
    async with AdminClient(bootstrap([broker])) as admin:
        await admin.create_topic(
            topic, partitions, configs={k.replace("_", "."): v for k, v in configs.items()}
        )


async def connect(broker: Broker) -> Connection:
    return await Connection.open("127.0.0.1", broker.port)


async def test_a_fetch_naming_another_leader_epoch_is_refused_and_one_without_is_served(
    broker: Broker,
) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"a"]))
    epochs = {
        e: await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0, leader_epoch=e))
        for e in (-1, 0, 1)
    }
    codes = {e: r.responses[0].partitions[0].error_code for e, r in epochs.items()}
    assert codes == {-1: ErrorCode.NONE, 0: ErrorCode.NONE, 1: ErrorCode.UNKNOWN_LEADER_EPOCH}
    await conn.close()


async def test_produced_records_come_back_from_fetch_with_their_offsets(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    first = await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"a", b"b"]))
    second = await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"c"]))
    assert first.responses[0].partitions[0].base_offset == 0
    assert second.responses[0].partitions[0].base_offset == 2
    fetched = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0))
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 3
    assert [(r.offset, r.value) for r in decode_records(part.records)] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
    ]
    await conn.close()


async def test_a_read_of_many_requests_is_answered_32_at_a_time(broker: Broker) -> None:
    """A pipelining client's 100 produces arrive in one read; their answers leave in
    writes of 32, 32, 32 and 4 (so the client can send more while the broker works), in
    request order, each with its own offset."""
    await create(broker, "t")
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    frames = FrameDecoder()

    async def answers(count: int) -> list[m.ProduceResponse]:
        got: list[bytes] = []
        while len(got) < count:
            got += frames.feed(await asyncio.wait_for(reader.read(1 << 16), 10))
        headers = [decode_response_header(f) for f in got]
        assert [h.error_code for h in headers] == [0] * count
        return [decode_response_body(ApiKey.PRODUCE, 0, h.body) for h in headers]

    def produces(first: int, count: int) -> bytes:
        out = bytearray()
        for cid in range(first, first + count):
            request = produce_request("t", 0, [b"%d" % cid])
            encode_request_into(out, ApiKey.PRODUCE, 0, cid, "pipelined", request)
        return bytes(out)

    writer.write(produces(0, 1))  # the server's end of the connection learns its client
    await answers(1)
    (server_side,) = [c for c in broker.socket_server.connections if c.client_id == "pipelined"]
    assert server_side.transport is not None
    transport_write = server_side.transport.write
    answers_per_write: list[int] = []

    def counting_write(data: Any) -> None:
        answers_per_write.append(len(FrameDecoder().feed(bytes(data))))
        transport_write(data)

    server_side.transport.write = counting_write  # type: ignore[method-assign]
    server_side.data_received(produces(1, 100))  # one read, as the event loop hands it
    assert answers_per_write == [32, 32, 32, 4]
    responses = await answers(100)
    offsets = [r.responses[0].partitions[0].base_offset for r in responses]
    assert offsets == list(range(1, 101))
    writer.close()


async def test_fetch_v0_still_works_and_v1_reports_no_wait(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"x"]))
    v0 = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0), version=0)
    v1 = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0), version=1)
    assert isinstance(v0, m.FetchResponseV0) and not isinstance(v0, m.FetchResponseV1)
    assert v0.responses[0].partitions[0].records == v1.responses[0].partitions[0].records
    assert v1.wait_time_ms == 0
    await conn.close()


async def test_stored_bytes_are_served_unchanged_but_for_offset_and_epoch(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    request = produce_request("t", 0, [b"v"] * 3)
    await conn.send(ApiKey.PRODUCE, produce_request("t", 0, [b"first"]))
    await conn.send(ApiKey.PRODUCE, request)
    sent = request.topics[0].partitions[0].records
    fetched = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 1))
    assert fetched.responses[0].partitions[0].records[16:] == sent[16:]
    await conn.close()


async def test_acks_zero_gets_no_response_and_later_responses_keep_their_order(
    broker: Broker,
) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    conn.send_nowait(ApiKey.PRODUCE, produce_request("t", 0, [b"fire"], acks=0))
    meta = await conn.send(ApiKey.METADATA, m.MetadataRequest(["t"]))
    assert meta.topics[0].name == "t"
    fetched = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0))
    assert [r.value for r in decode_records(fetched.responses[0].partitions[0].records)] == [
        b"fire"
    ]
    await conn.close()


async def test_pipelined_requests_are_answered_in_order(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    futures = [
        conn.request(ApiKey.PRODUCE, produce_request("t", 0, [str(i).encode()])) for i in range(200)
    ]
    responses = await asyncio.gather(*futures)
    assert [r.responses[0].partitions[0].base_offset for r in responses] == list(range(200))
    await conn.close()


async def test_offsets_outside_the_log_are_out_of_range(broker: Broker) -> None:
    await create(broker, "small", retention_bytes="200", segment_bytes="150")
    conn = await connect(broker)
    for i in range(10):
        await conn.send(ApiKey.PRODUCE, produce_request("small", 0, [bytes([i]) * 100]))
    beyond = await conn.send(ApiKey.FETCH, fetch_request("small", 0, 11))
    below = await conn.send(ApiKey.FETCH, fetch_request("small", 0, 0))
    at_end = await conn.send(ApiKey.FETCH, fetch_request("small", 0, 10))
    assert beyond.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    below_part = below.responses[0].partitions[0]
    assert (
        below_part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and below_part.log_start_offset > 0
    )
    assert (
        at_end.responses[0].partitions[0].error_code == 0
        and at_end.responses[0].partitions[0].records == b""
    )
    state = broker.state().partitions[0]
    assert 200 <= state.size_bytes < 600 and state.log_end_offset == 10
    await conn.close()


async def test_max_bytes_bounds_the_response_after_the_first_batch(broker: Broker) -> None:
    await create(broker, "t", partitions=2)
    conn = await connect(broker)
    for p in (0, 1):
        for _ in range(5):
            await conn.send(ApiKey.PRODUCE, produce_request("t", p, [b"x" * 1000]))
    request = m.FetchRequest(
        -1,
        0,
        1,
        2500,
        [m.FetchTopic("t", [m.FetchPartition(0, 0, 10**6), m.FetchPartition(1, 0, 10**6)])],
    )
    response = await conn.send(ApiKey.FETCH, request)
    sizes = [len(decode_records(p.records)) for p in response.responses[0].partitions]
    assert sizes == [2, 0]
    tiny = await conn.send(ApiKey.FETCH, fetch_request("t", 0, 0, max_bytes=1))
    assert len(decode_records(tiny.responses[0].partitions[0].records)) == 1  # never stuck
    await conn.close()


async def test_wrong_broker_and_unknown_partitions_are_told_apart(cluster3: list[Broker]) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("spread", 3)
        response = await admin.describe_topics(["spread"])
    leader_of_0 = response.topics[0].partitions[0].leader_id
    other = next(b for b in cluster3 if b.broker_id != leader_of_0)
    conn = await connect(other)
    wrong = await conn.send(ApiKey.PRODUCE, produce_request("spread", 0, [b"x"]))
    missing = await conn.send(ApiKey.PRODUCE, produce_request("spread", 7, [b"x"]))
    negative = await conn.send(ApiKey.FETCH, fetch_request("spread", -1, 0))
    assert wrong.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert missing.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert negative.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await conn.close()


async def test_list_offsets_gives_earliest_latest_and_by_timestamp(broker: Broker) -> None:
    await create(broker, "t")
    conn = await connect(broker)
    batch = encode_batch([(None, b"a", 100), (None, b"b", 200), (None, b"c", 300)])
    await conn.send(
        ApiKey.PRODUCE,
        m.ProduceRequest(1, 1000, [m.TopicProduceData("t", [m.PartitionProduceData(0, batch)])]),
    )
    request = m.ListOffsetsRequest(
        -1, [m.ListOffsetsTopic("t", [m.ListOffsetsPartition(0, m.EARLIEST_TIMESTAMP)])]
    )
    earliest = await conn.send(ApiKey.LIST_OFFSETS, request)
    request.topics[0].partitions[0].timestamp = m.LATEST_TIMESTAMP
    latest = await conn.send(ApiKey.LIST_OFFSETS, request)
    request.topics[0].partitions[0].timestamp = 150
    by_time = await conn.send(ApiKey.LIST_OFFSETS, request)
    assert earliest.topics[0].partitions[0].offset == 0
    assert latest.topics[0].partitions[0].offset == 3
    assert (by_time.topics[0].partitions[0].offset, by_time.topics[0].partitions[0].timestamp) == (
        1,
        200,
    )
    await conn.close()


async def test_clients_produce_and_consume_across_brokers_with_keys(cluster3: list[Broker]) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("orders", 6)
    async with Producer(bootstrap(cluster3[1:2]), acks=-1, linger_ms=2) as producer:
        futures = [
            await producer.send("orders", f"v{i}".encode(), f"k{i % 10}".encode())
            for i in range(300)
        ]
        await producer.flush()
    placed = [f.result() for f in futures]
    assert {md.partition for md in placed} == set(range(6))
    async with Consumer(
        bootstrap(cluster3[2:]), auto_offset_reset="earliest", fetch_max_wait_ms=50
    ) as consumer:
        await consumer.assign_topics(["orders"])
        got: list = []
        while len(got) < 300:
            got += await consumer.poll(timeout_ms=2000)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(300))
    by_key: dict[bytes, set[int]] = {}
    for r in got:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())  # a key always lands in one partition


async def test_committed_offsets_round_trip_and_resume_a_new_consumer(broker: Broker) -> None:
    await create(broker, "t")
    async with Producer(bootstrap([broker]), linger_ms=0) as producer:
        for i in range(10):
            await producer.send_and_wait("t", str(i).encode())
    async with Consumer(
        bootstrap([broker]), group_id="g", auto_offset_reset="earliest", fetch_max_wait_ms=10
    ) as c1:
        await c1.assign_topics(["t"])
        first = await c1.poll(timeout_ms=2000, max_records=4)
        assert [r.offset for r in first] == [0, 1, 2, 3]
        await c1.commit()
        assert await c1.committed_offsets([("t", 0)]) == {("t", 0): 4}
    async with Consumer(
        bootstrap([broker]), group_id="g", auto_offset_reset="earliest", fetch_max_wait_ms=10
    ) as c2:
        await c2.assign_topics(["t"])
        rest = await c2.poll(timeout_ms=2000)
        assert [r.offset for r in rest] == list(range(4, 10))


async def test_bad_group_ids_and_offsets_are_refused_by_name(broker: Broker) -> None:
    await create(broker, "t")
    async with Consumer(bootstrap([broker]), group_id="") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(KafkaError, match="INVALID_GROUP_ID"):
            await consumer.commit({("t", 0): 0})
    async with Consumer(bootstrap([broker]), group_id="g") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            await consumer.commit({("t", 7): 5})


async def test_a_response_that_must_wait_keeps_later_ones_behind_it_on_the_wire(
    broker: Broker,
) -> None:
    from tests.integration.test_bad_input import answer, frame

    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    # Metadata with auto-creation waits for the controller; ApiVersions is answered at once,
    # yet its response must come second.
    writer.write(frame([3, 0, 1, "x", [["waits"], True]]) + frame([18, 0, 2, "x", []]))
    first, second = await answer(reader), await answer(reader)
    assert (first[0], second[0]) == (1, 2)
    writer.close()


async def test_the_producer_refreshes_stale_leadership_and_retries(cluster3: list[Broker]) -> None:
    async with AdminClient(bootstrap(cluster3)) as admin:
        await admin.create_topic("moving", 3)
    async with Producer(bootstrap(cluster3), linger_ms=0, retry_backoff_ms=10) as producer:
        await producer.cluster.ensure_topics(["moving"], auto_create=False)
        partition = producer.cluster.topics["moving"].partitions[0]
        true_leader = partition.leader_id
        partition.leader_id = (true_leader + 1) % 3  # a stale view: the wrong broker
        md = await producer.send_and_wait("moving", b"x", partition=0)
    assert md.offset == 0
    wrong = cluster3[(true_leader + 1) % 3]
    assert wrong.metrics.errors[("Produce", ErrorCode.NOT_LEADER_OR_FOLLOWER)] == 1


async def test_a_client_that_stops_reading_stops_being_read_and_loses_nothing(
    broker: Broker,
) -> None:
    import socket

    from tests.integration.test_bad_input import answer

    await create(broker, "big")
    conn = await connect(broker)
    await conn.send(ApiKey.PRODUCE, produce_request("big", 0, [b"x" * 900_000]))
    await conn.close()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", broker.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    requests = 60
    payload = b"".join(
        _frame(ApiKey.FETCH, 1, i, fetch_request("big", 0, 0)) for i in range(requests)
    )
    writer.write(payload)  # ~54 MB of responses asked for, none read yet
    served = lambda: broker.metrics.for_request(ApiKey.FETCH, 1).count  # noqa: E731
    await wait_for_pause(broker)
    assert served() < requests  # the broker stopped reading instead of buffering everything
    ids = [(await answer(reader))[0] for _ in range(requests)]
    assert ids == list(range(requests))
    writer.close()


async def wait_for_pause(broker: Broker) -> None:
    from tests.support import wait_until

    await wait_until(
        lambda: any(c.reading_paused for c in broker.socket_server.connections),
        message="the broker to pause reading",
    )


def _frame(key: ApiKey, version: int, correlation_id: int, body: object) -> bytes:
    from purgatory.protocol.api import encode_request

    data = encode_request(key, version, correlation_id, "t", body)  # type: ignore[arg-type]
    return len(data).to_bytes(4, "big") + data
