"""`purgatory produce` as a user runs it: a real CLI process against in-process brokers.

Every line read is acknowledged or reported with its number; order holds across retries;
Ctrl-C and SIGTERM end within bounds and report what they gave up; any stdin works."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import pytest

from purgatory.broker.ops.faults import parse_spec
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Consumer
from tests.support import bootstrap, running_cluster, wait_until

PURGATORY = [sys.executable, "-m", "purgatory"]


async def cli(
    *args: str, stdin: bytes | None = None, stdin_file: Path | None = None, timeout: float = 60
) -> tuple[int, str, str]:
    """Run ``purgatory ARGS`` without blocking the brokers' loop."""
    handle = open(stdin_file, "rb") if stdin_file else None  # noqa: SIM115
    try:
        proc = await asyncio.create_subprocess_exec(
            *PURGATORY,
            *args,
            stdin=handle or asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    finally:
        if handle:
            handle.close()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def values_of(broker_list: list[Broker], topic: str, partition: int = 0) -> list[bytes]:
    """Every record value of a partition, in offset order."""
    async with Consumer(bootstrap(broker_list), enable_auto_commit=False) as consumer:
        consumer.assign([(topic, partition)])
        await consumer.seek_to_beginning()
        end = (await consumer.list_offsets([(topic, partition)], -1))[(topic, partition)]
        out: list[bytes] = []
        while len(out) < end:
            out += [r.value or b"" for r in await consumer.poll(timeout_ms=2000)]
        return out


def reported_lines(stderr: str) -> set[int]:
    """Line numbers named in 'line N: ...' / 'lines (k) a-b, c: ...' reports."""
    out: set[int] = set()
    for match in re.finditer(r"^lines? (?:\(\d+\) )?([\d, -]+):", stderr, re.M):
        for part in match.group(1).split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


async def create(brokers: list[Broker], topic: str, partitions: int = 1) -> None:
    async with AdminClient(bootstrap(brokers)) as admin:
        await admin.create_topic(topic, partitions)


def error_fault(broker: Broker, **spec: object) -> None:
    broker.faults.add(parse_spec({"name": "storm", "kind": "error", "api": "Produce", **spec}))


async def test_produce_reads_a_regular_file_and_dev_null(broker: Broker, tmp_path: Path) -> None:
    await create([broker], "t")
    lines = tmp_path / "two.txt"
    lines.write_bytes(b"first\nsecond\n")
    code, _, err = await cli("produce", "t", "--bootstrap", bootstrap([broker]), stdin_file=lines)
    assert code == 0, err
    assert "produced 2 of 2 record(s) to t" in err
    code, _, err = await cli(
        "produce", "t", "--bootstrap", bootstrap([broker]), stdin_file=Path("/dev/null")
    )
    assert code == 0 and "produced 0 of 0" in err, err
    assert await values_of([broker], "t") == [b"first", b"second"]


async def test_long_lines_go_through_and_too_long_ones_are_reported_with_the_limit(
    tmp_path: Path,
) -> None:
    async with running_cluster(1, message_max_bytes=300_000) as brokers:
        await create(brokers, "t")
        data = b"a" * 200_000 + b"\n" + b"b" * 400_000 + b"\n" + b"c" * 2_000_000 + b"\nd"
        code, _, err = await cli(
            "produce", "--topic", "t", "--bootstrap", bootstrap(brokers), stdin=data
        )
        assert code == 1
        assert re.search(
            r"^line 2: not delivered: MESSAGE_TOO_LARGE.*max.message.bytes 300000", err, re.M
        ), err
        assert re.search(
            r"^line 3: not sent: MESSAGE_TOO_LARGE.*max.request.size 1048576", err, re.M
        ), err
        assert "produced 2 of 4 record(s)" in err
        assert await values_of(brokers, "t") == [b"a" * 200_000, b"d"]


async def test_a_carriage_return_is_data_unless_crlf_is_asked_for(broker: Broker) -> None:
    await create([broker], "t")
    boot = bootstrap([broker])
    assert (await cli("produce", "t", "--bootstrap", boot, stdin=b"x\r\n"))[0] == 0
    assert (await cli("produce", "t", "--crlf", "--bootstrap", boot, stdin=b"y\r\n"))[0] == 0
    assert await values_of([broker], "t") == [b"x\r", b"y"]


async def test_every_line_is_acknowledged_or_reported_with_its_number(broker: Broker) -> None:
    await create([broker], "t")
    # Produce fails retriably until the first 30 lines have run out of their delivery
    # timeout and been reported; the next 30 are refused at least once, then get through.
    proc = await start_produce(broker, "--timeout-ms", "1000")
    assert proc.stdin is not None and proc.stderr is not None
    await pending_lines(broker, proc, 30, first=1)
    seen = ""
    while not reported_lines(seen):
        seen += (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
    applied = broker.faults.describe()[0]["applied"]
    proc.stdin.write(b"".join(b"v%d\n" % i for i in range(31, 61)))
    await proc.stdin.drain()
    await wait_until(
        lambda: broker.faults.describe()[0]["applied"] > applied, message="produce refused"
    )
    broker.faults.reset()
    proc.stdin.close()
    _, rest = await asyncio.wait_for(proc.communicate(), 30)
    err = seen + rest.decode()
    delivered = {int(v[1:]) for v in await values_of([broker], "t")}
    reported = reported_lines(err)
    assert reported == set(range(1, 31)), err
    assert delivered == set(range(31, 61)), err
    assert proc.returncode == 1
    assert "produced 30 of 60 record(s) to t; 30 not delivered" in err
    assert "never retrieved" not in err and "Traceback" not in err


async def test_retries_keep_the_order_of_a_partition(broker: Broker) -> None:
    await create([broker], "t")
    error_fault(broker, error_code="NOT_LEADER_OR_FOLLOWER", probability=0.5)
    data = b"".join(b"%d\n" % i for i in range(300))
    code, _, err = await cli(
        "produce", "t", "--linger-ms", "0", "--bootstrap", bootstrap([broker]), stdin=data
    )
    assert code == 0, err
    assert [int(v) for v in await values_of([broker], "t")] == list(range(300))


async def start_produce(broker: Broker, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *PURGATORY, "produce", "t", "--linger-ms", "0", *extra,
        "--bootstrap", bootstrap([broker]),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def pending_lines(
    broker: Broker, proc: asyncio.subprocess.Process, n: int, first: int = 0
) -> None:
    """Type ``n`` lines that the broker refuses (retriably) and wait until it has."""
    error_fault(broker, error_code="NOT_ENOUGH_REPLICAS")
    assert proc.stdin is not None
    proc.stdin.write(b"".join(b"v%d\n" % i for i in range(first, first + n)))
    await proc.stdin.drain()
    await wait_until(lambda: broker.faults.describe()[0]["applied"] >= 2, message="produce retried")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_stops_reading_and_reports_what_did_not_arrive_in_time(
    broker: Broker, sig: signal.Signals
) -> None:
    await create([broker], "t")
    proc = await start_produce(broker, "--timeout-ms", "1500")
    await pending_lines(broker, proc, 3)
    proc.send_signal(sig)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    text = err.decode()
    assert proc.returncode == 1, text
    assert "stopped reading" in text
    assert reported_lines(text) == {1, 2, 3}
    assert "produced 0 of 3 record(s)" in text
    assert "never retrieved" not in text and "Traceback" not in text


async def test_a_second_ctrl_c_gives_up_at_once(broker: Broker) -> None:
    await create([broker], "t")
    proc = await start_produce(broker, "--timeout-ms", "120000")
    await pending_lines(broker, proc, 4)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    while b"stopped reading" not in await asyncio.wait_for(proc.stderr.readline(), 10):
        pass
    proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(proc.communicate(), 10)  # not the 120 s delivery timeout
    text = err.decode()
    assert proc.returncode == 130, text
    assert reported_lines(text) == {1, 2, 3, 4}
    assert "interrupted" in text
    assert "never retrieved" not in text and "Traceback" not in text


async def test_the_last_records_are_delivered_when_ctrl_c_comes_after_them(
    broker: Broker,
) -> None:
    await create([broker], "t")
    proc = await start_produce(broker)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"a\nb\n")
    await proc.stdin.drain()
    await wait_until(lambda: broker.replica_manager.partitions[("t", 0)].log.log_end_offset == 2)
    proc.send_signal(signal.SIGINT)  # stdin still open, as at a terminal
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err
    assert "produced 2 of 2" in err.decode()


async def test_an_unknown_topic_fails_fast_and_says_how_to_create_it() -> None:
    async with running_cluster(1, auto_create_topics_enable=False) as brokers:
        code, _, err = await cli(
            "produce", "nosuch", "--bootstrap", bootstrap(brokers), stdin=b"hi\n", timeout=20
        )
        assert code == 1
        assert "UNKNOWN_TOPIC_OR_PARTITION" in err and "auto.create.topics.enable=false" in err
        assert "purgatory topics create nosuch" in err
