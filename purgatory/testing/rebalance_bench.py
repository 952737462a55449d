"""`purgatory perf rebalance-join`: what a member joining a consumer group costs the members
already in it, with the classic protocol (eager `range` and `cooperative-sticky`) and with
KIP-848's (``group.protocol=consumer``), side by side, on Purgatory and, with ``--kafka``,
on Apache Kafka.

Per system, a cluster of ``--brokers`` (3) is started; per run and protocol (the protocols
take turns, the order rotating from one run to the next), a fresh topic of
``--partitions`` (12) partitions, one producer writing ``--rate`` (2,000) records/s spread
evenly over them, and ``--members`` (3) confluent-kafka consumers of a fresh group. Once
every partition is owned and delivering, and after ``--steady`` seconds of that, one more
member subscribes. Per round:

- ``round_ms``: from the new member's ``subscribe()`` to the last change of any member's
  assignment, once the assignment is final (every partition owned once, every member
  holding its share; no change for ``--settle`` seconds after it);
- ``first_record_ms``: from that ``subscribe()`` to the new member's first record;
- ``stayed_gap_ms``: over the existing members and the partitions they held before the join
  and still hold at its end, the longest time without a record on one of them, counted
  between two records the member received around the round (from the last before the join
  to the first after it, and between any two received before the round ended);
- ``steady_gap_ms``: the same over the ``--steady`` seconds before the join, the gap that
  batching and fetching make when nothing happens (so ``stayed_gap_ms`` near it is "no
  pause");
- ``any_gap_ms``: the longest time any partition went without a record reaching any member
  during the round (a moved partition's hand-over is in it);
- ``revoked``: partitions taken from the existing members during the round (eager: all of
  them, then given back; cooperative and KIP-848: only those that move).

Each sample also says when, from the join, the longest stayed gap began and the first
revocation came (``stayed_gap_began_ms``, ``first_revoked_ms``), to tell a pause the round
caused from one the machine did. Every round checks that every acknowledged record was
consumed by some member (by its
sequence number in the value, duplicates aside) and fails if not. The clients keep their
defaults (heartbeat.interval.ms 3 s with classic; the broker's
group.consumer.heartbeat.interval.ms, 5 s, with KIP-848), as do the brokers, except for
group.initial.rebalance.delay.ms 0 on both (tests' setting).

The JSON on stdout holds the medians and every sample; ``--markdown`` prints the medians as
docs/performance.md's table; progress goes to stderr.

    purgatory perf rebalance-join --runs 3 --kafka
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from purgatory.testing.compare_bench import STARTERS, CompareError, _progress, unavailable
from purgatory.testing.real_kafka import KAFKA_VERSION

# Protocol name -> the consumer's settings for it.
PROTOCOLS: dict[str, dict[str, str]] = {
    "classic-range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic-cooperative-sticky": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "consumer": {"group.protocol": "consumer"},
}
LABELS = {
    "classic-range": "classic, eager range",
    "classic-cooperative-sticky": "classic, cooperative-sticky",
    "consumer": "KIP-848 consumer",
}
MEASURES = (
    ("round_ms", "rebalance round (ms)"),
    ("first_record_ms", "new member's first record (ms)"),
    ("stayed_gap_ms", "longest gap, stayed partitions (ms)"),
    ("steady_gap_ms", "same, before the join (ms)"),
    ("any_gap_ms", "longest gap, any partition (ms)"),
    ("revoked", "partitions revoked"),
)
POLL_S = 0.05


@dataclass
class Member:
    """One consumer on a thread of its own: what it received, when, and its assignments."""

    name: str
    config: dict[str, Any]
    topic: str
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (monotonic s, partition)
    values: list[int] = field(default_factory=list)
    # (monotonic s, partitions held from then on); the first entry is the empty assignment.
    assignments: list[tuple[float, frozenset[int]]] = field(default_factory=list)
    subscribed_at: float = 0.0
    revocations: list[tuple[float, int]] = field(default_factory=list)  # (s, partitions)
    error: BaseException | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def held(self) -> frozenset[int]:
        return self.assignments[-1][1] if self.assignments else frozenset()

    def _run(self) -> None:
        from confluent_kafka import Consumer

        try:
            consumer = Consumer(self.config)
            changed: list[float] = []

            def on_assign(_consumer: Any, _partitions: Any) -> None:
                changed.append(time.monotonic())

            def on_revoke(_consumer: Any, partitions: Any) -> None:
                changed.append(time.monotonic())
                self.revocations.append((changed[-1], len(partitions)))

            self.assignments.append((time.monotonic(), frozenset()))
            self.subscribed_at = time.monotonic()
            consumer.subscribe(
                [self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
            )
            try:
                while not self.stop.is_set():
                    messages = consumer.consume(1000, timeout=POLL_S)
                    now = time.monotonic()
                    for message in messages:
                        partition, value = message.partition(), message.value()
                        if message.error() is None and partition is not None and value:
                            self.arrivals.append((now, partition))
                            self.values.append(int(value))
                    held = frozenset(tp.partition for tp in consumer.assignment())
                    if held != self.held():
                        # The callback's time: the change happened in it, during consume().
                        self.assignments.append((changed[-1] if changed else now, held))
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the round, with the member's name
            self.error = exc


class Producer:
    """One producer writing ``rate`` records/s round-robin over the partitions, each value
    its sequence number; ``acknowledged`` counts what the brokers took."""

    def __init__(self, servers: str, topic: str, partitions: int, rate: int) -> None:
        self.servers, self.topic, self.partitions, self.rate = servers, topic, partitions, rate
        self.acknowledged: list[int] = []
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        try:
            producer = KafkaProducer(
                {"bootstrap.servers": self.servers, "acks": "all", "linger.ms": 5}
            )

            def delivered(error: Any, message: Any) -> None:
                if error is None:
                    self.acknowledged.append(int(message.value()))
                else:
                    self.failed += 1

            started = time.monotonic()
            sequence = 0
            while not self.stop.is_set():
                due = int((time.monotonic() - started) * self.rate)
                while sequence < due:
                    producer.produce(
                        self.topic,
                        b"%d" % sequence,
                        partition=sequence % self.partitions,
                        on_delivery=delivered,
                    )
                    sequence += 1
                producer.poll(0.005)
            if left := producer.flush(60):
                raise CompareError(
                    f"{left} of {sequence} records not acknowledged within 60 s "
                    f"({self.failed} failed)"
                )
        except BaseException as exc:
            self.error = exc


def _create_topic(servers: str, topic: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication_factor)], operation_timeout=20
    )
    for future in futures.values():
        future.result(timeout=30)


def _wait(condition: Any, timeout: float, what: str, members: list[Member]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for member in members:
            if member.error is not None:
                raise CompareError(f"{member.name}: {member.error!r}")
        if time.monotonic() > deadline:
            held = {m.name: sorted(m.held()) for m in members}
            raise CompareError(f"{what} not within {timeout:.0f} s (assignments: {held})")
        time.sleep(0.02)


def _balanced(members: list[Member], partitions: int) -> bool:
    """Every partition held by exactly one member, every member holding its share."""
    held = [m.held() for m in members]
    share, extra = divmod(partitions, len(members))
    sizes = sorted(len(h) for h in held)
    every = frozenset().union(*held)
    return (
        len(every) == partitions
        and sum(sizes) == partitions
        and sizes[0] >= share
        and sizes[-1] <= share + (1 if extra else 0)
    )


class Gap(NamedTuple):
    seconds: float
    began: float  # monotonic s


def longest_gap(times: list[float], start: float, end: float) -> Gap:
    """The longest time between two consecutive ``times`` (sorted) whose interval meets
    [start, end]; a last record before ``end`` with none after counts up to ``end``."""
    if not times:
        return Gap(end - start, start)
    gaps = [Gap(after - before, before) for before, after in itertools.pairwise(times)]
    longest = max(
        (gap for gap in gaps if gap.began + gap.seconds >= start and gap.began <= end),
        default=Gap(0.0, start),
    )
    if times[-1] <= end:
        longest = max(longest, Gap(end - max(times[-1], start), max(times[-1], start)))
    if times[0] > start:
        longest = max(longest, Gap(times[0] - start, start))
    return longest


def _times(members: list[Member], partition: int) -> list[float]:
    return sorted({t for m in members for t, p in m.arrivals if p == partition})


def measure_round(
    servers: str, brokers: int, protocol: str, args: argparse.Namespace
) -> dict[str, float]:
    """One round of ``protocol``: the figures of MEASURES and the record counts."""
    stamp = time.monotonic_ns()
    topic = f"rebalance-join-{protocol}-{stamp}"
    _create_topic(servers, topic, args.partitions, min(3, brokers))
    config = {
        "bootstrap.servers": servers,
        "group.id": f"rebalance-join-{protocol}-{stamp}",
        "auto.offset.reset": "earliest",
        **PROTOCOLS[protocol],
    }
    producer = Producer(servers, topic, args.partitions, args.rate)
    producer.thread.start()
    members = [Member(f"member-{n}", config, topic) for n in range(args.members)]
    joining = Member(f"member-{args.members}", config, topic)
    everyone = [*members, joining]
    try:
        for member in members:
            member.start()

        def delivering() -> bool:
            if not _balanced(members, args.partitions):
                return False
            since = max(m.assignments[-1][0] for m in members)
            return all(
                any(t > since and p == partition for t, p in m.arrivals[-2000:])
                for m in members
                for partition in m.held()
            )

        _wait(delivering, args.timeout, "the first members owning and reading", members)
        time.sleep(args.steady)  # the steady window the gaps are compared with
        before = {m.name: m.held() for m in members}
        joining.start()
        _wait(lambda: joining.subscribed_at > 0, args.timeout, "the new member", everyone)
        joined = joining.subscribed_at

        def settled() -> bool:
            if not _balanced(everyone, args.partitions) or not joining.arrivals:
                return False
            last = max(m.assignments[-1][0] for m in everyone)
            return time.monotonic() - last >= float(args.settle)

        _wait(settled, args.timeout, "the final assignment", everyone)
        ended = max(m.assignments[-1][0] for m in everyone)
        after = {m.name: m.held() for m in members}
    finally:
        producer.stop.set()
        producer.thread.join(60)
    try:
        if producer.error is not None:
            raise CompareError(f"producer: {producer.error!r}")
        produced = set(producer.acknowledged)

        def consumed_all() -> bool:
            return produced <= {v for m in everyone for v in m.values}

        _wait(consumed_all, args.timeout, "every acknowledged record consumed", everyone)
    finally:
        for member in everyone:
            member.stop.set()
        for member in everyone:
            if member.thread is not None:
                member.thread.join(60)
    stayed_gap, steady_gap, revoked = Gap(0.0, joined), Gap(0.0, joined), 0
    for member in members:
        stayed = before[member.name] & after[member.name]
        revoked += sum(count for t, count in member.revocations if joined <= t <= ended)
        for partition in stayed:
            times = sorted(t for t, p in member.arrivals if p == partition)
            stayed_gap = max(stayed_gap, longest_gap(times, joined, ended))
            steady_gap = max(steady_gap, longest_gap(times, joined - args.steady, joined))
    any_gap = max(
        longest_gap(_times(everyone, p), joined, ended).seconds for p in range(args.partitions)
    )
    revoked_at = [t for m in members for t, _ in m.revocations if joined <= t <= ended]
    values = [v for m in everyone for v in m.values]
    return {
        "round_ms": round((ended - joined) * 1000),
        "first_record_ms": round((joining.arrivals[0][0] - joined) * 1000),
        "stayed_gap_ms": round(stayed_gap.seconds * 1000),
        "steady_gap_ms": round(steady_gap.seconds * 1000),
        "any_gap_ms": round(any_gap * 1000),
        "revoked": revoked,
        # When, from the join, the longest stayed gap began and the first revocation came.
        "stayed_gap_began_ms": round((stayed_gap.began - joined) * 1000),
        "first_revoked_ms": round((min(revoked_at, default=joined) - joined) * 1000),
        "records_produced": len(produced),
        "records_consumed": len(set(values) & produced),
        "records_duplicated": len(values) - len(set(values)),
        "produce_failures": producer.failed,
    }


def measure_system(system: str, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """Start ``system``, run every round of every protocol on it, stop it."""
    samples: dict[str, list[dict[str, float]]] = {p: [] for p in args.protocol_list}
    phase = "start"
    try:
        running = STARTERS[system](args.brokers)
        try:
            for index in range(args.runs):
                shift = index % len(args.protocol_list)
                for protocol in args.protocol_list[shift:] + args.protocol_list[:shift]:
                    phase = f"run {index + 1}/{args.runs}, {protocol}"
                    _progress(f"{system}, {phase} ...")
                    result = measure_round(running.bootstrap, args.brokers, protocol, args)
                    samples[protocol].append(result)
                    _progress(
                        f"{system}, {phase}: "
                        + ", ".join(f"{name} {value:g}" for name, value in result.items())
                    )
        finally:
            running.stop()
    except Exception as exc:
        raise CompareError(f"{system}, {phase}: {exc!r}") from exc
    return samples


def run(args: argparse.Namespace, systems: list[str]) -> dict[str, Any]:
    samples = {system: measure_system(system, args) for system in systems}
    medians = {
        system: {
            protocol: {name: statistics.median(r[name] for r in results) for name, _ in MEASURES}
            for protocol, results in by_protocol.items()
        }
        for system, by_protocol in samples.items()
    }
    return {
        "benchmark": "rebalance-join",
        "kafka_version": KAFKA_VERSION if "kafka" in systems else None,
        "brokers": args.brokers,
        "partitions": args.partitions,
        "rate": args.rate,
        "members": args.members,
        "steady_s": args.steady,
        "settle_s": args.settle,
        "runs": args.runs,
        "median": medians,
        "samples": samples,
    }


def markdown(result: dict[str, Any]) -> str:
    """The medians as a Markdown table: a row per system and protocol, a column per
    measure."""
    lines = [
        "| system | protocol | " + " | ".join(label for _, label in MEASURES) + " |",
        "|---|---|" + "---|" * len(MEASURES),
    ]
    for system, by_protocol in result["median"].items():
        for protocol, figures in by_protocol.items():
            cells = [f"{figures[name]:,.1f}".removesuffix(".0") for name, _ in MEASURES]
            lines.append(f"| {system} | {LABELS[protocol]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    name = "purgatory perf rebalance-join"
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        _progress(f"{name}: needs confluent-kafka (pip install confluent-kafka)")
        return 1
    args.protocol_list = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not args.protocol_list or set(args.protocol_list) - set(PROTOCOLS):
        _progress(f"{name}: --protocols takes {', '.join(PROTOCOLS)}")
        return 2
    if min(args.runs, args.brokers, args.partitions, args.rate, args.members) < 1:
        _progress(f"{name}: --runs, --brokers, --partitions, --rate and --members must be >= 1")
        return 2
    if args.partitions < args.members + 1:
        _progress(f"{name}: --partitions must be at least --members + 1, one for each member")
        return 2
    systems = ["purgatory", "kafka"] if args.kafka else ["purgatory"]
    for system in systems:
        if (reason := unavailable(system)) is not None:
            _progress(f"{name}: {system}: {reason}")
            return 1
    try:
        result = run(args, systems)
    except CompareError as exc:
        _progress(f"{name}: {exc}")
        return 1
    if args.markdown:
        print(markdown(result))
    else:
        print(json.dumps(result, indent=None if args.json else 2))
    return 0
