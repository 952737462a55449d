"""`purgatory perf rebalance`: how long a consumer group of N members takes to form, and
to rebalance when one member leaves, side by side:

- ``purgatory/ours``: our Consumer (our protocol) against a Purgatory broker process;
- ``purgatory/confluent``: confluent-kafka (librdkafka) against the same broker, Kafka's
  protocol;
- ``mock/confluent``: the same confluent-kafka consumers against librdkafka's mock
  cluster (our client speaks only our protocol, so it cannot be measured there).

Each run: N members subscribe to one topic at once (``form``: from the first subscribe,
which sends the first JoinGroup, to the last member's assignment of the generation in
which every member holds one); then one member leaves with LeaveGroup (``leave``: from
the leave to the last assignment of the N-1 others). A generation is complete when every
member's last event is an assignment and the assignments split the partitions exactly;
it is final when every member received an assignment since the start, and nothing
changes for ``--quiet-ms``. Both brokers wait
``group.initial.rebalance.delay.ms`` (3 s, Kafka's default; the mock's is fixed at 3 s)
before the first generation of a new group, so ``form`` includes it.

Prints one JSON document; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOPIC = "rebalance-bench"


class Members:
    """The assignment events of N members, and when the group last changed. Written and
    read on one thread: our consumers' event loop, or the thread that polls the librdkafka
    consumers (their callbacks run inside ``poll``)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.held: dict[int, frozenset[int] | None] = {}
        self.last_change = time.perf_counter()
        self.assignments = 0

    def assigned(self, member: int, partitions: list[int]) -> None:
        self.held[member] = frozenset(partitions)
        self.last_change = time.perf_counter()
        self.assignments += 1

    def revoked(self, member: int) -> None:
        self.held[member] = None
        self.last_change = time.perf_counter()

    def left(self, member: int) -> None:
        self.held.pop(member, None)

    def complete(self, members: int) -> bool:
        """Every one of ``members`` holds an assignment, and they split the partitions."""
        held = list(self.held.values())
        if len(held) != members or any(h is None for h in held):
            return False
        owned = [p for h in held for p in h or ()]
        return len(owned) == len(set(owned)) == self.partitions


def settled(
    members: Members, count: int, started: float, quiet_s: float, timeout_s: float
) -> Callable[[], dict[str, Any] | None]:
    """A check to call repeatedly: None until the group of ``count`` is complete and quiet
    (then its figures), or timed out (then the error)."""

    def check() -> dict[str, Any] | None:
        now = time.perf_counter()
        if (
            members.assignments >= count  # each member got (at least) one since ``started``
            and members.complete(count)
            and now - members.last_change >= quiet_s
        ):
            return {
                "ms": round((members.last_change - started) * 1000, 1),
                "assignments": members.assignments,
            }
        if now - started > timeout_s:
            return {"error": f"not settled in {timeout_s:.0f} s", "members": count}
        return None

    return check


# -- our client ---------------------------------------------------------------------------


async def ours(servers: str, group: str, n: int, partitions: int, args: argparse.Namespace) -> Any:
    from purgatory.clients import Consumer

    members = Members(partitions)
    consumers = [
        Consumer(
            servers,
            group_id=group,
            client_id=f"member-{i}",
            enable_auto_commit=False,
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
        )
        for i in range(n)
    ]
    await asyncio.gather(*(c.start() for c in consumers))

    class Listener:
        def __init__(self, member: int) -> None:
            self.member = member

        def on_partitions_revoked(self, _: list[tuple[str, int]]) -> None:
            members.revoked(self.member)

        def on_partitions_assigned(self, tps: list[tuple[str, int]]) -> None:
            members.assigned(self.member, [p for _, p in tps])

    async def keep_polling(consumer: Any) -> None:
        while True:
            await consumer.poll(timeout_ms=1000)

    out: dict[str, Any] = {}
    started = time.perf_counter()
    for i, c in enumerate(consumers):
        c.subscribe([TOPIC], Listener(i))
    pollers = {i: asyncio.ensure_future(keep_polling(c)) for i, c in enumerate(consumers)}
    try:
        out["form"] = await _wait(settled(members, n, started, args.quiet_ms / 1000, args.timeout))
        if "error" not in out["form"] and n > 1:
            members.assignments = 0
            pollers.pop(n - 1).cancel()
            started = time.perf_counter()
            await consumers[n - 1].close()  # LeaveGroup
            members.left(n - 1)
            out["leave"] = await _wait(
                settled(members, n - 1, started, args.quiet_ms / 1000, args.timeout)
            )
    finally:
        for poller in pollers.values():
            poller.cancel()
        await asyncio.gather(*pollers.values(), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in consumers[: len(pollers)]))
    return out


async def _wait(check: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
    while (result := check()) is None:
        await asyncio.sleep(0.005)
    return result


# -- confluent-kafka ----------------------------------------------------------------------


def confluent(servers: str, group: str, n: int, partitions: int, args: argparse.Namespace) -> Any:
    """N librdkafka consumers, polled in turn by this thread (their callbacks run in
    ``poll``)."""
    from confluent_kafka import Consumer

    members = Members(partitions)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": group,
                "client.id": f"member-{i}",
                "enable.auto.commit": False,
                "session.timeout.ms": args.session_timeout_ms,
                "heartbeat.interval.ms": args.heartbeat_interval_ms,
                "partition.assignment.strategy": "range",
            }
        )
        for i in range(n)
    ]

    def listeners(i: int) -> dict[str, Any]:
        return {
            "on_assign": lambda c, tps: members.assigned(i, [tp.partition for tp in tps]),
            "on_revoke": lambda c, tps: members.revoked(i),
        }

    def wait(check: Callable[[], dict[str, Any] | None], polled: list[Any]) -> dict[str, Any]:
        while (result := check()) is None:
            for c in polled:
                c.poll(0)
            time.sleep(0.002)
        return result

    out: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        for i, c in enumerate(consumers):
            c.subscribe([TOPIC], **listeners(i))
        quiet = args.quiet_ms / 1000
        out["form"] = wait(settled(members, n, started, quiet, args.timeout), consumers)
        if "error" not in out["form"] and n > 1:
            members.assignments = 0
            leaving = consumers.pop()
            started = time.perf_counter()
            leaving.close()  # LeaveGroup
            members.left(n - 1)
            out["leave"] = wait(settled(members, n - 1, started, quiet, args.timeout), consumers)
    finally:
        threads = [threading.Thread(target=c.close) for c in consumers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return out


# -- the run ------------------------------------------------------------------------------


def _progress(text: str) -> None:
    print(f"perf rebalance: {text}", file=sys.stderr, flush=True)


async def _purgatory(args: argparse.Namespace, partitions: int, out: dict[str, Any]) -> None:
    from purgatory.clients import AdminClient
    from purgatory.experiments.processes import local_brokers

    settings = {
        "log.level": "WARNING",
        "group.initial.rebalance.delay.ms": str(args.initial_delay_ms),
        "group.min.session.timeout.ms": "1000",
    }
    with tempfile.TemporaryDirectory(prefix="rebalance-bench-") as logs:
        async with local_brokers(1, settings, Path(logs)) as brokers:
            async with AdminClient(brokers.bootstrap) as admin:
                await admin.create_topic(TOPIC, partitions, 1)
            for n in args.members:
                if "ours" in args.clients:
                    _progress(f"purgatory/ours, {n} members")
                    result = await ours(brokers.bootstrap, f"ours-{n}", n, partitions, args)
                    out.setdefault("purgatory/ours", {})[str(n)] = result
                if "confluent" in args.clients and not _skipped(
                    args, n, out, "purgatory/confluent"
                ):
                    _progress(f"purgatory/confluent, {n} members")
                    result = await asyncio.to_thread(
                        confluent, brokers.bootstrap, f"confluent-{n}", n, partitions, args
                    )
                    out.setdefault("purgatory/confluent", {})[str(n)] = result


def _skipped(args: argparse.Namespace, n: int, out: dict[str, Any], target: str) -> bool:
    if n <= args.confluent_max_members:
        return False
    out.setdefault(target, {})[str(n)] = {
        "skipped": f"over --confluent-max-members {args.confluent_max_members}"
    }
    return True


def _mock(args: argparse.Namespace, out: dict[str, Any]) -> int:
    """librdkafka's mock cluster lives in the client that creates it; its topic is
    auto-created by a first record, with the mock's partition count, which the Purgatory
    runs then use too."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": ""})
    brokers = holder.list_topics(timeout=10).brokers.values()
    servers = ",".join(f"{b.host}:{b.port}" for b in brokers)
    holder.produce(TOPIC, b"create")
    holder.flush(10)
    from confluent_kafka.admin import AdminClient

    from purgatory.experiments.kafka_mock import leaders

    partitions = leaders(AdminClient({"bootstrap.servers": servers}), TOPIC)
    if "confluent" in args.clients:
        for n in args.members:
            if _skipped(args, n, out, "mock/confluent"):
                continue
            _progress(f"mock/confluent, {n} members")
            result = confluent(servers, f"confluent-{n}", n, partitions, args)
            out.setdefault("mock/confluent", {})[str(n)] = result
    return partitions


def run(args: argparse.Namespace) -> dict[str, Any]:
    from purgatory.clients.cli.tools import client_logging

    client_logging()  # our consumers' INFO lines would bury the figures
    out: dict[str, Any] = {
        "members": args.members,
        "initial_delay_ms": args.initial_delay_ms,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "quiet_ms": args.quiet_ms,
    }
    partitions = args.partitions
    if not args.no_mock:
        partitions = _mock(args, out)
    out["partitions"] = partitions
    asyncio.run(_purgatory(args, partitions, out))
    return out


def main(args: argparse.Namespace) -> int:
    args.clients = {c.strip() for c in args.clients.split(",")}
    if not args.clients <= {"ours", "confluent"}:
        print("purgatory perf rebalance: --clients names ours and/or confluent", file=sys.stderr)
        return 2
    try:
        import confluent_kafka
    except ImportError:
        if "confluent" in args.clients or not args.no_mock:
            print(
                "purgatory perf rebalance: needs confluent-kafka (pip install confluent-kafka), "
                "or --clients ours --no-mock",
                file=sys.stderr,
            )
            return 1
        errors: tuple[type[BaseException], ...] = (RuntimeError, OSError)
    else:
        errors = (RuntimeError, OSError, confluent_kafka.KafkaException)
    try:
        result = run(args)
    except KeyboardInterrupt:
        return 130
    except errors as exc:
        print(f"purgatory perf rebalance: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
