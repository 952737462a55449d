"""The chaos workload's other half: confluent-kafka (librdkafka) producers and consumers
beside ours. Idempotent acks=all producers in threads, each outcome handed back to the
event loop (history.jsonl, the checker); consumers, ours and confluent-kafka's, reading
every partition from the start and keeping what they were given, offset by offset, so the
checker can tell whether a consumer was ever shown a record the log later lost."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from purgatory.clients import Consumer
from purgatory.experiments.record_history import Outcome

# librdkafka logs at syslog levels; the refused connections and timeouts a nemesis causes
# are errors (3) it would print over the progress bar: critical ones only.
LOG_LEVEL = 2
Seen = dict[int, dict[int, bytes]]  # partition -> offset -> value, as a consumer was given


def confluent_kafka() -> Any:
    try:
        import confluent_kafka as ck
    except ImportError:
        raise RuntimeError(
            "the chaos workload runs confluent-kafka producers and consumers beside ours: "
            "pip install confluent-kafka, or --param confluent_producers=0 "
            "--param confluent_consumers=0"
        ) from None
    return ck


class ConfluentLoad:
    """``count`` confluent-kafka producers (idempotent, acks=all), producer indices
    ``first`` onwards, each sending ``rate`` records/s round-robin over the partitions
    without waiting (librdkafka queues what has no leader yet). ``done`` hears of every
    outcome, on the event loop's thread."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        count: int,
        first: int,
        rate: float,
        delivery_timeout_ms: int,
        done: Callable[[Outcome], None],
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.indices = range(first, first + count)
        self.rate = rate
        self.delivery_timeout_ms = delivery_timeout_ms
        self.done = done
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.unfinished = 0  # records still queued when a producer gave up flushing

    async def __aenter__(self) -> ConfluentLoad:
        ck = confluent_kafka()
        loop = asyncio.get_running_loop()
        for index in self.indices:
            producer = ck.Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 0,
                    "delivery.timeout.ms": self.delivery_timeout_ms,
                    "client.id": f"producer-{index}",
                    "log_level": LOG_LEVEL,
                }
            )
            thread = threading.Thread(
                target=self._run, args=(index, producer, loop), name=f"ck-producer-{index}"
            )
            thread.start()
            self._threads.append(thread)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join)

    def _run(self, index: int, producer: Any, loop: asyncio.AbstractEventLoop) -> None:
        seq = 0
        started = time.monotonic()
        while not self._stop.is_set():
            outcome = Outcome(
                self.topic, (seq + index) % self.partitions, index, seq, time.time(), 0.0
            )

            def report(err: Any, msg: Any, outcome: Outcome = outcome) -> None:
                outcome.ts = time.time()
                if err is None:
                    outcome.offset = msg.offset()
                else:
                    outcome.error = f"{err.name()}: {err.str()}"
                loop.call_soon_threadsafe(self.done, outcome)

            try:
                producer.produce(
                    self.topic, outcome.value, partition=outcome.partition, on_delivery=report
                )
            except BufferError:  # the local queue is full: serve callbacks and retry
                producer.poll(0.05)
                continue
            seq += 1
            producer.poll(0)
            self._stop.wait(max(0.0, started + seq / self.rate - time.monotonic()))
        self.unfinished += producer.flush(self.delivery_timeout_ms / 1000 + 5)


class OurReader:
    """Our consumer over every partition from offset 0, keeping what it was given."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.seen: Seen = {p: {} for p in range(partitions)}
        self.reread_differently = 0  # an offset given twice with different records

    async def __aenter__(self) -> OurReader:
        self._consumer = Consumer(
            self.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200
        )
        await self._consumer.__aenter__()
        self._consumer.assign([(self.topic, p) for p in range(self.partitions)])
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._consumer.__aexit__(None, None, None)

    async def _run(self) -> None:
        while True:
            for record in await self._consumer.poll(timeout_ms=500):
                keep(self, record.partition, record.offset, record.value or b"")

    def position(self, partition: int) -> int:
        return max(self.seen[partition], default=-1) + 1


class ConfluentReader:
    """A confluent-kafka consumer over every partition from the beginning, in a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.seen: Seen = {p: {} for p in range(partitions)}
        self.reread_differently = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()

    async def __aenter__(self) -> ConfluentReader:
        ck = confluent_kafka()
        self._consumer = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "chaos-reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 200,
                "log_level": LOG_LEVEL,
            }
        )
        self._consumer.assign(
            [ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        self._thread = threading.Thread(target=self._run, name="ck-reader")
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for msg in self._consumer.consume(500, 0.5):
                    if msg.error() is None:
                        with self._lock:
                            keep(self, msg.partition(), msg.offset(), msg.value() or b"")
        finally:
            self._consumer.close()

    def position(self, partition: int) -> int:
        with self._lock:
            return max(self.seen[partition], default=-1) + 1


def keep(reader: OurReader | ConfluentReader, partition: int, offset: int, value: bytes) -> None:
    known = reader.seen[partition].setdefault(offset, value)
    if known != value:
        reader.reread_differently += 1
