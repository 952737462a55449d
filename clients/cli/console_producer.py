"""`purgatory produce`: one record per line of standard input (Kafka's ConsoleProducer).

Every line read ends as acknowledged or reported on stderr with its line number; a summary
follows, and the exit status tells whether all were delivered:

- 0: every line read was acknowledged (also after a Ctrl-C that let pending ones finish);
- 1: some line was not delivered (failed, too large, no key separator), or the topic or
  cluster could not be used at all;
- 130: a second Ctrl-C (or SIGTERM) gave up on pending records; they are reported.

The first Ctrl-C/SIGTERM stops reading and lets pending records finish within their
delivery timeout (``--timeout-ms``); the summary is printed however it ends.

Producer configs come from the flags (``--acks``, ``--linger-ms``, ``--timeout-ms``,
``--max-request-size``) and ``--producer-property NAME=VALUE``; as in Kafka's console
producer, a flag given wins over a property, and a property over the flag's default.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable
from functools import partial
from typing import Any

from purgatory.clients.cli.client_config import file_properties
from purgatory.clients.cli.output import err
from purgatory.clients.cli.properties import PRODUCER_PROPERTIES, client_properties
from purgatory.clients.cli.stdin_lines import StdinLines
from purgatory.clients.producer import Producer
from purgatory.clients.producer_batch import BATCH_OVERHEAD, RECORD_OVERHEAD, RecordMetadata
from purgatory.protocol.errors import KafkaError

# The flags' defaults, where neither the flag nor --producer-property gives a value. acks
# is kafka-console-producer's --request-required-acks default; the others are ours.
FLAG_DEFAULTS: dict[str, object] = {
    "acks": "-1",
    "linger_ms": 5,
    "delivery_timeout_ms": 30000,
    "max_request_size": 1048576,
}


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`Producer` keyword arguments from the flags, ``--producer-property`` pairs and the
    ``--producer.config`` file, in Kafka's order (a flag wins over a pair, a pair over the
    file); ValueError names a bad one, OSError a file that cannot be read."""
    settings: dict[str, Any] = {"client_id": "purgatory-console-producer"}
    settings |= file_properties(
        "--producer.config", args.command_config, PRODUCER_PROPERTIES, "producer"
    )
    settings |= client_properties(
        "--producer-property", args.producer_property, PRODUCER_PROPERTIES
    )
    flags = {
        "acks": args.acks,
        "linger_ms": args.linger_ms,
        "delivery_timeout_ms": args.timeout_ms,
        "max_request_size": args.max_request_size,
    }
    for name, value in flags.items():
        if value is not None:
            settings[name] = value
        settings.setdefault(name, FLAG_DEFAULTS[name])
    if settings["delivery_timeout_ms"] < 1:
        raise ValueError("--timeout-ms (delivery.timeout.ms) must be at least 1")
    settings.setdefault("max_block_ms", settings["delivery_timeout_ms"])
    settings["delivery_timeout_ms"] = max(
        settings["delivery_timeout_ms"], settings["linger_ms"] + 1
    )
    return settings


def line_ranges(numbers: list[int]) -> str:
    """'3, 7, 9-11' for [3, 7, 9, 10, 11]."""
    out: list[str] = []
    numbers = sorted(numbers)
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ", ".join(out)


class FailureReport:
    """Prints failed lines on stderr, grouping the lines that failed with the same error
    into one message: a batch fails as a whole, and during an outage batch after batch
    fails the same way. Waiting reports are printed once no failure came for ``QUIET_S``,
    and at least every ``MAX_WAIT_S``."""

    QUIET_S = 0.25
    MAX_WAIT_S = 2.0

    def __init__(self) -> None:
        self.failed = 0
        self.failed_lines: list[int] = []  # the first few, for the summary
        self._waiting: dict[str, list[int]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._first_at = 0.0

    def add(self, number: int, problem: str) -> None:
        self.failed += 1
        if len(self.failed_lines) < 20:
            self.failed_lines.append(number)
        self._waiting.setdefault(problem, []).append(number)
        loop = asyncio.get_running_loop()
        if self._handle is None:
            self._first_at = loop.time()
        else:
            self._handle.cancel()
        at = min(loop.time() + self.QUIET_S, self._first_at + self.MAX_WAIT_S)
        self._handle = loop.call_at(at, self.flush)

    def flush(self) -> None:
        """Print what is waiting (also called at the end, before the summary)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        for problem, numbers in self._waiting.items():
            what = "line" if len(numbers) == 1 else f"lines ({len(numbers)})"
            err.print(f"[red]{what} {line_ranges(numbers)}: {problem}[/red]", soft_wrap=True)
        self._waiting.clear()


class ConsoleProducer:
    def __init__(self, args: argparse.Namespace, topic: str, settings: dict[str, Any]) -> None:
        self.args = args
        self.topic = topic
        self.settings = settings
        self.timeout_ms: int = settings["delivery_timeout_ms"]
        self.max_request_size: int = settings["max_request_size"]
        self.read = 0
        self.delivered = 0
        self.report = FailureReport()
        self.interrupts = 0
        self.interrupted = asyncio.Event()
        self.given_up = asyncio.Event()

    def on_signal(self, name: str, count: int) -> None:
        """SIGINT or SIGTERM number ``count`` (see `Interrupts`)."""
        self.interrupts = count
        if count == 1:
            self.interrupted.set()
            err.print(f"[yellow]{name}: stopped reading; waiting for pending records[/yellow]")
        else:
            self.given_up.set()

    def _delivered(self, number: int, future: asyncio.Future[RecordMetadata]) -> None:
        exc = None if future.cancelled() else future.exception()
        if exc is None and not future.cancelled():
            self.delivered += 1
        else:
            self.report.add(number, f"not delivered: {exc or 'cancelled'}")

    async def run(self) -> int:
        producer = Producer(self.args.bootstrap, **self.settings)
        prepared = False
        try:
            await _until(self.interrupted, self._prepare(producer))
            prepared = not self.interrupts  # else interrupted before anything was read
            if prepared:
                await self._produce(producer)
        finally:
            await producer.close(0)
            self.report.flush()
        not_delivered = self.read - self.delivered
        summary = f"produced {self.delivered} of {self.read} record(s) to {self.topic}"
        if not_delivered:
            summary += f"; {not_delivered} not delivered"
            if self.report.failed_lines:
                more = ", ..." if self.report.failed > len(self.report.failed_lines) else ""
                what = "line" if self.report.failed == 1 else "lines"
                summary += f" ({what} {line_ranges(self.report.failed_lines)}{more})"
        err.print(summary, soft_wrap=True)
        if not prepared or (self.given_up.is_set() and not_delivered):
            return 130
        return 1 if not_delivered else 0

    async def _produce(self, producer: Producer) -> None:
        lines = StdinLines(
            max_line_bytes=self.max_request_size - BATCH_OVERHEAD - RECORD_OVERHEAD,
            crlf=self.args.crlf,
        )
        await _until(self.interrupted, self._send_lines(producer, lines))
        lines.stop()
        if producer.pending and self.interrupts:
            err.print(
                f"[yellow]{producer.pending} record(s) pending; waiting up to "
                f"{self.timeout_ms} ms for them (Ctrl-C again to give up now)[/yellow]"
            )
        await _until(self.given_up, producer.flush())
        if producer.pending:
            await producer.abort("interrupted before it was acknowledged")

    async def _prepare(self, producer: Producer) -> None:
        """Connect and check the topic before reading a line: an unknown topic fails in
        about a second (UnknownTopicError), whatever is waiting on stdin."""
        await producer.start()
        await producer.cluster.ensure_topics(
            [self.topic], auto_create=True, timeout_ms=self.timeout_ms
        )

    async def _send_lines(self, producer: Producer, lines: StdinLines) -> None:
        args = self.args
        sep = None if args.key_separator is None else args.key_separator.encode()
        async for chunk in lines:
            for number, data, length in chunk:
                self.read += 1
                await self._send_line(producer, sep, number, data, length)

    async def _send_line(
        self, producer: Producer, sep: bytes | None, number: int, data: bytes | None, length: int
    ) -> None:
        if data is None:
            self.report.add(
                number,
                f"not sent: MESSAGE_TOO_LARGE: a line of {length} bytes exceeds "
                f"max.request.size {self.max_request_size} (--max-request-size)",
            )
            return
        key = None
        if sep is not None:
            if sep not in data:
                self.report.add(number, f"not sent: no key separator {self.args.key_separator!r}")
                return
            key, data = data.split(sep, 1)
        try:
            future = await producer.send(self.topic, data, key, partition=self.args.partition)
        except KafkaError as exc:
            self.report.add(number, f"not sent: {exc}")
            return
        future.add_done_callback(partial(self._delivered, number))


async def _until(event: asyncio.Event, work: Awaitable[object]) -> None:
    """Await ``work`` (a coroutine or future) unless ``event`` is set first; then cancel
    it. Exceptions of ``work`` propagate."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return
    task.result()
