"""The consume-transform-produce worker of the exactly-once proof, run as its own process
(``python -m tests.eos.worker``) so that it can be SIGKILLed anywhere.

It reads the input topic in a consumer group (read_committed, static membership so that a
restarted worker takes its predecessor's place at once), writes ``out-<value>`` per input
record to the output topic with a transactional producer, and sends the consumer's
positions to the same transaction, committing every ``--batch`` records, as Kafka's
exactly-once applications do (KIP-447). It exits 0 once its committed positions reach the
input's end (the input is filled before it starts and does not grow).

On stdout, one line per step for the driver: ``ready`` (producer initialised, partitions
assigned), ``committed <records>`` after each commit. On an abortable error it aborts,
seeks back to the group's committed offsets and goes on; on a fatal one (fenced) it
exits 2; stuck in one step for WATCHDOG_S it exits 1."""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

CALL_TIMEOUT_S = 30.0
# librdkafka's send_offsets_to_transaction can block for ever, past its timeout, when the
# group coordinator's broker dies (confluentinc/librdkafka#5456, #5511): a worker stuck
# in one step that long prints where and exits 1, to be started again.
WATCHDOG_S = 45.0


class Fatal(Exception):
    """The worker must exit (a restart initialises a new epoch and reads on from the
    group's committed offsets): a fatal client error, or a rewind that failed."""


def say(line: str) -> None:
    print(line, flush=True)


def log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} worker {os.getpid()}: {line}", file=sys.stderr, flush=True)


def retrying(call: Callable[[], Any], what: str) -> Any:
    """``call`` until it succeeds, again after a retriable error; Fatal after a fatal one.
    An abortable error is raised to the caller (as KafkaException)."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                raise Fatal(f"{what}: {error}") from None
            if error.retriable():
                log(f"{what}: retrying after {error}")
                continue
            raise


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        debug = {"debug": args.debug} if args.debug else {}
        self.producer = Producer(
            {
                **debug,
                "bootstrap.servers": args.bootstrap,
                "transactional.id": args.transactional_id,
                "transaction.timeout.ms": 15000,
                "linger.ms": 5,
            }
        )
        self.consumer = Consumer(
            {
                "bootstrap.servers": args.bootstrap,
                "group.id": args.group,
                "group.instance.id": args.transactional_id,
                "session.timeout.ms": 10000,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.ends: dict[int, int] = {}  # input partition -> its end offset (fixed input)
        self.committed = 0

    def start(self) -> None:
        log("started")
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
        retrying(lambda: self.producer.init_transactions(CALL_TIMEOUT_S), "init_transactions")
        log("producer initialised")
        topic = retrying(
            lambda: self.consumer.list_topics(self.args.input, CALL_TIMEOUT_S), "metadata"
        ).topics[self.args.input]
        for p in topic.partitions:
            where = TopicPartition(self.args.input, p)
            watermarks = partial(self.consumer.get_watermark_offsets, where, CALL_TIMEOUT_S)
            _, high = retrying(watermarks, "watermarks")
            self.ends[p] = high
        self.consumer.subscribe([self.args.input])

    def positions(self) -> list[TopicPartition]:
        """The consumer's valid positions on its assigned partitions."""
        return [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]

    def done(self) -> bool:
        """Every input partition assigned and read to its end: by this worker (its
        position) or by its predecessors (the group's committed offset; librdkafka's
        position stays invalid until a record of the partition is consumed)."""
        assigned = self.consumer.assignment()
        if {tp.partition for tp in assigned} != set(self.ends):
            return False
        at = {tp.partition: tp.offset for tp in self.consumer.position(assigned)}
        if any(at[p] < end for p, end in self.ends.items()):
            committed = retrying(
                lambda: self.consumer.committed(assigned, CALL_TIMEOUT_S), "committed"
            )
            for tp in committed:
                at[tp.partition] = max(at[tp.partition], tp.offset)
        return all(at[p] >= end for p, end in self.ends.items())

    def run(self) -> int:
        self.start()
        announced = False
        idle_since = time.monotonic()
        while True:
            faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
            messages = self.consumer.consume(self.args.batch, 0.5)
            records = []
            for m in messages:
                error = m.error()
                if error is None:
                    records.append(m)
                elif error.fatal():
                    raise Fatal(f"consume: {error}")
                else:
                    log(f"consume: {error}")
            if not announced and self.consumer.assignment():
                log(f"assigned {len(self.consumer.assignment())} partitions")
                say("ready")
                announced = True
            if records:
                self.transform(records)
                idle_since = time.monotonic()
            elif announced and self.done():
                say(f"done {self.committed}")
                return 0
            elif time.monotonic() - idle_since > 5:  # for whoever debugs a hang
                at = {
                    tp.partition: tp.offset
                    for tp in self.consumer.position(self.consumer.assignment())
                }
                log(f"idle: positions {at}, ends {self.ends}")
                idle_since = time.monotonic()

    def transform(self, records: list[Any]) -> None:
        """One transaction: an output record per input record, and the positions."""
        self.producer.begin_transaction()
        try:
            for m in records:
                self.producer.produce(self.args.output, key=m.key(), value=b"out-" + m.value())
            offsets = self.positions()
            metadata = self.consumer.consumer_group_metadata()
            retrying(
                lambda: self.producer.send_offsets_to_transaction(
                    offsets, metadata, CALL_TIMEOUT_S
                ),
                "send_offsets_to_transaction",
            )
            retrying(lambda: self.producer.commit_transaction(CALL_TIMEOUT_S), "commit")
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not error.txn_requires_abort():
                raise
            log(f"aborting after {error}")
            retrying(lambda: self.producer.abort_transaction(CALL_TIMEOUT_S), "abort")
            self.rewind()
            return
        self.committed += len(records)
        say(f"committed {self.committed}")

    def rewind(self) -> None:
        """Back to the group's committed offsets: the aborted records are read again."""
        assigned = self.consumer.assignment()
        committed = retrying(lambda: self.consumer.committed(assigned, CALL_TIMEOUT_S), "committed")
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:  # not fetching yet: a restart starts from there
                raise Fatal(f"seek {tp.topic}-{tp.partition} to {offset}: {exc}") from None


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.eos.worker")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--debug", help="librdkafka debug contexts of the producer (eos,broker)")
    worker = Worker(parser.parse_args())
    try:
        return worker.run()
    except Fatal as exc:
        log(f"fatal: {exc}")
        return 2
    finally:
        started = time.monotonic()
        worker.consumer.close()
        log(f"closed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
