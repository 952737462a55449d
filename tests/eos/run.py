"""One exactly-once run: three broker processes (RF 3, min ISR 2), an input topic filled
with ``records`` records (acks=all), and the worker of tests/eos/worker.py started,
SIGKILLed at a seeded random moment and started again ``kills`` times; during
``broker_kills`` of those lives a broker is killed (kill -9) too: the transaction
coordinator's, the group coordinator's, an output partition's leader, in turn. Then the
last worker runs to the input's end, and the checks: the output topic read read_committed
holds ``out-<v>`` for every input value v exactly once (nothing missing, no duplicate,
nothing else), read_uncommitted at least as much, and the group's committed offsets are
the input's end.

A worker is killed either while it starts (a quarter of the lives: during
init_transactions, the group join, the first transaction) or just after it reports a
commit, after a random number of committed records and a random 0-200 ms more (in the
middle of its next transaction, or between two). A broker is killed under a running
worker, restarted 0.5-3 s later while the worker goes on, and the worker is killed only
once every partition has its full ISR again (the brokers keep their logs in memory: two
down at once could lose acknowledged data). A worker that exits by itself (its watchdog,
a fatal error) is counted in ``worker_exits`` and started again; a worker silent for
STALL_S seconds is a hang, and ends the run."""

from __future__ import annotations

import contextlib
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from purgatory.broker.controller.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from purgatory.broker.coordinator.group_records import partition_for
from purgatory.testing import Cluster
from purgatory.testing.cluster import ClusterError

INPUT = "eos-input"
OUTPUT = "eos-output"
GROUP = "eos-group"
TRANSACTIONAL_ID = "eos-worker"
PARTITIONS = 3
INTERNAL_PARTITIONS = 3  # of __consumer_offsets and __transaction_state
CONFIG = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
    "transaction.state.log.num.partitions": INTERNAL_PARTITIONS,
}
REPO = Path(__file__).resolve().parents[2]
STALL_S = 90.0  # longest a worker may go without a line (ready, a commit): a hang
VICTIMS = ("transaction coordinator", "group coordinator", "output leader")


@dataclass
class EosResult:
    seed: int
    records: int
    kills: int = 0  # workers SIGKILLed
    broker_kills: list[str] = field(default_factory=list)  # "<role> <broker id>"
    worker_exits: list[int] = field(default_factory=list)  # exit statuses not of a kill
    commits: int = 0  # transactions the workers reported committed
    read_committed: int = 0  # output records a read_committed consumer is given
    read_uncommitted: int = 0  # and a read_uncommitted one
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 1), "ok": self.ok}


class Life:
    """One worker process, its stdout lines on a queue (read by a thread of its own)."""

    def __init__(self, bootstrap: str, batch: int, stderr: IO[str], debug: str | None) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.eos.worker",
                "--bootstrap",
                bootstrap,
                "--input",
                INPUT,
                "--output",
                OUTPUT,
                "--group",
                GROUP,
                "--transactional-id",
                TRANSACTIONAL_ID,
                "--batch",
                str(batch),
                *(["--debug", debug] if debug else []),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.committed = 0  # records, as its latest "committed" line says
        self.commits = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)  # the worker exited

    def next_line(self, timeout: float) -> str | None:
        """Its next line; None once it has exited; TimeoutError after ``timeout`` s."""
        try:
            line = self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            raise TimeoutError from None
        if line is not None and line.startswith("committed "):
            self.committed = int(line.split()[1])
            self.commits += 1
        return line

    def wait_for(self, predicate: Any, deadline: float | None = None) -> bool:
        """Read lines until ``predicate(line)`` (True), the worker exits (False), or the
        ``deadline`` (time.monotonic()) passes (False); TimeoutError if no line comes
        for STALL_S seconds."""
        while True:
            wait = STALL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return False
            try:
                line = self.next_line(wait)
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                raise
            if line is None:
                return False
            if predicate(line):
                return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)


def fill_input(cluster: Cluster, records: int) -> None:
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    for i in range(records):
        producer.produce(
            INPUT,
            key=b"%d" % i,
            value=b"in-%d" % i,
            on_delivery=delivered,
        )
        producer.poll(0)
    if producer.flush(60) or failed:
        raise ClusterError(f"could not fill {INPUT}: {failed[:3]}")


def leader_of(cluster: Cluster, topic: str, partition: int) -> int:
    return cluster.partition(topic, partition).leader


def victim(cluster: Cluster, role: str, rng: random.Random) -> int:
    if role == "transaction coordinator":
        index = partition_for(TRANSACTIONAL_ID, INTERNAL_PARTITIONS)
        return leader_of(cluster, TRANSACTION_STATE_TOPIC, index)
    if role == "group coordinator":
        return leader_of(cluster, OFFSETS_TOPIC, partition_for(GROUP, INTERNAL_PARTITIONS))
    return leader_of(cluster, OUTPUT, rng.randrange(PARTITIONS))


def fully_replicated(cluster: Cluster) -> bool:
    """Every broker up and every partition led, with all its replicas in sync."""
    leaders = 0
    expected = 0
    for i in range(cluster.size):
        if not cluster.alive(i):
            return False
        state = cluster.state(i)
        for replica in state.partitions:
            if replica.role == "leader":
                leaders += 1
                if replica.isr != replica.replicas:
                    return False
        expected = max(expected, len({(r.topic, r.partition) for r in state.partitions}))
    return leaders >= expected > 0


def read_output(cluster: Cluster, isolation: str) -> list[bytes]:
    """Every value of the output topic a consumer of ``isolation`` is given, read to each
    partition's end as that isolation sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"eos-reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(OUTPUT, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < PARTITIONS:
            if time.monotonic() > deadline:
                raise ClusterError(f"{OUTPUT} read {isolation}: no end within 60 s")
            m = consumer.poll(0.2)
            if m is None:
                continue
            error, partition, value = m.error(), m.partition(), m.value()
            assert partition is not None
            if error is not None:
                if error.code() == -191:  # _PARTITION_EOF
                    at_end.add(partition)
                continue
            at_end.discard(partition)
            values.append(value or b"")
        return values
    finally:
        consumer.close()


def stable(cluster: Cluster) -> bool:
    """No transaction open on the output: each partition's last stable offset (what a
    read_committed consumer's end is) is its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "eos-stable",
            "isolation.level": "read_committed",
        }
    )
    try:
        for p in range(PARTITIONS):
            _, lso = consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), 10)
            if lso != cluster.partition(OUTPUT, p).high_watermark:
                return False
        return True
    finally:
        consumer.close()


def committed_offsets(cluster: Cluster) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
    try:
        found = consumer.committed([TopicPartition(INPUT, p) for p in range(PARTITIONS)], 30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def eos(
    kills: int,
    broker_kills: int,
    records: int,
    seed: int,
    batch: int = 20,
    worker_log: Path | None = None,
    progress: Any = None,
    debug: str | None = None,
) -> EosResult:
    """The whole run (see the module's docstring); ``progress(result)`` after each life."""
    rng = random.Random(seed)
    result = EosResult(seed, records)
    started = time.monotonic()
    # Broker kills in lives spread over the run, never the first (the topics settle).
    strikes = set(rng.sample(range(1, kills), min(broker_kills, kills - 1))) if kills > 1 else set()
    struck: set[int] = set()  # the lives a broker was killed in
    share = max(batch, records // (2 * kills + 2))  # records committed per life, on average
    with contextlib.ExitStack() as stack:
        if worker_log is None:
            worker_log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "worker.log"
        stderr = stack.enter_context(worker_log.open("w"))
        cluster = stack.enter_context(Cluster(brokers=3, config=CONFIG, mode="process"))
        cluster.create_topic(INPUT, partitions=PARTITIONS)
        cluster.create_topic(OUTPUT, partitions=PARTITIONS)
        fill_input(cluster, records)
        while result.kills < kills:
            if len(result.worker_exits) > kills:
                result.problems.append(f"workers exited by themselves: {result.worker_exits}")
                break
            life = Life(cluster.bootstrap_servers, batch, stderr, debug)
            strike = result.kills in strikes and result.kills not in struck
            if strike:
                struck.add(result.kills)
            try:
                live_and_die(cluster, life, rng, share, result, strike)
            except ClusterError as exc:
                result.problems.append(str(exc))
            finally:
                life.kill()
            if result.problems:
                break
            if progress is not None:
                progress(result)
        if not result.problems:
            finish(cluster, stderr, batch, result, debug)
        if result.problems:
            print(f"diagnosis: {diagnose(cluster)}", file=stderr)
            for i in range(cluster.size):
                with contextlib.suppress(ClusterError):
                    for event in cluster.logs(i, 50):
                        print(f"broker {i}: {event}", file=stderr)
    result.seconds = time.monotonic() - started
    return result


def live_and_die(
    cluster: Cluster, life: Life, rng: random.Random, share: int, result: EosResult, strike: bool
) -> None:
    """Run ``life`` to its kill; if ``strike``, a broker is killed and restarted under it."""

    def spent(_line: str) -> bool:
        """A life commits at most twice its share, so that the input outlasts every kill:
        a fast worker otherwise committed it all in a few timed lives ("the input ran
        out")."""
        return life.committed >= 2 * share

    try:
        if rng.random() < 0.25:  # while it starts
            if strike:
                life.wait_for(spent, time.monotonic() + rng.uniform(0.0, 1.5))
                strike_broker(cluster, life, rng, result)
            life.wait_for(spent, time.monotonic() + rng.uniform(0.0, 3.0))
        else:
            target = rng.randint(1, 2 * share)
            if strike:  # the worker goes on through a broker's death and return
                life.wait_for(lambda _: life.committed >= target // 2)
                strike_broker(cluster, life, rng, result)
            life.wait_for(lambda _: life.committed >= target)
            life.wait_for(lambda _: False, time.monotonic() + rng.uniform(0.0, 0.2))
    except TimeoutError:
        result.problems.append(
            f"worker life {result.kills}: no progress for {STALL_S:g} s "
            f"(committed {life.committed} records)"
        )
    exited = life.proc.poll()
    if exited is None:
        result.kills += 1
    else:
        result.worker_exits.append(exited)
        if exited == 0:
            result.problems.append(f"the input ran out after {result.kills} kills: more --records")
    result.commits += life.commits


def strike_broker(cluster: Cluster, life: Life, rng: random.Random, result: EosResult) -> None:
    """Kill -9 the next victim's broker, let the worker run without it for 0.5-3 s, start
    it again and wait until every ISR is full (the worker goes on meanwhile)."""
    role = VICTIMS[len(result.broker_kills) % len(VICTIMS)]
    struck = victim(cluster, role, rng)
    cluster.kill(struck)
    result.broker_kills.append(f"{role} {struck}")
    life.wait_for(lambda _: False, time.monotonic() + rng.uniform(0.5, 3.0))
    cluster.restart(struck, timeout=60)
    cluster.wait_for(lambda: fully_replicated(cluster), 60, "every ISR full again")


def finish(
    cluster: Cluster, stderr: IO[str], batch: int, result: EosResult, debug: str | None
) -> None:
    """The last worker runs to the input's end; then the output is read and checked."""
    for _ in range(10):  # a worker that exits by itself (fatal error) is started again
        life = Life(cluster.bootstrap_servers, batch, stderr, debug)
        try:
            if life.wait_for(lambda line: line.startswith("done")):
                life.proc.wait(30)  # it closes its consumer (leaves the group) and exits
        except (TimeoutError, subprocess.TimeoutExpired):
            result.problems.append(f"the last worker: no progress for {STALL_S:g} s")
        finally:
            life.kill()
        result.commits += life.commits
        if life.proc.returncode == 0 or result.problems:
            break
        result.worker_exits.append(life.proc.returncode)
    else:
        result.problems.append("the last worker kept failing")
    if result.problems:
        return
    try:
        cluster.wait_for(lambda: stable(cluster), 30, "no transaction open on the output")
    except ClusterError as exc:
        result.problems.append(str(exc))
    committed = read_output(cluster, "read_committed")
    everything = read_output(cluster, "read_uncommitted")
    result.read_committed = len(committed)
    result.read_uncommitted = len(everything)
    expected = {b"out-in-%d" % i for i in range(result.records)}
    counts = Counter(committed)
    result.duplicates = sum(n - 1 for n in counts.values() if n > 1)
    result.missing = len(expected - counts.keys())
    result.unexpected = len(counts.keys() - expected)
    if result.duplicates or result.missing or result.unexpected:
        some = sorted(v for v, n in counts.items() if n > 1)[:5]
        result.problems.append(
            f"read_committed: {result.duplicates} duplicates (e.g. {some}), "
            f"{result.missing} missing, {result.unexpected} unexpected"
        )
    if not Counter(everything) >= counts:
        result.problems.append("read_uncommitted was given less than read_committed")
    offsets = committed_offsets(cluster)
    ends = {p: cluster.partition(INPUT, p).high_watermark for p in range(PARTITIONS)}
    if offsets != ends:
        result.problems.append(f"the group's committed offsets {offsets} are not the ends {ends}")


def diagnose(cluster: Cluster) -> dict[str, Any]:
    """What a hang looks like from outside: the group's offsets, stable and not."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    found: dict[str, Any] = {}
    for stable_only in (True, False):
        request = ConsumerGroupTopicPartitions(
            GROUP, [TopicPartition(INPUT, p) for p in range(PARTITIONS)]
        )
        try:
            answer = admin.list_consumer_group_offsets([request], require_stable=stable_only)
            tps = answer[GROUP].result(15).topic_partitions
            found[f"require_stable={stable_only}"] = {
                tp.partition: (tp.offset, str(tp.error)) for tp in tps
            }
        except Exception as exc:  # a diagnosis reports whatever it meets
            found[f"require_stable={stable_only}"] = repr(exc)
    return found
