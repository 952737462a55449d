"""chaos: Kafka's promises under a seeded nemesis, on real broker processes
(docs/experiments.md).

Three brokers (``brokers``), a topic with RF 3 and min ISR 2, idempotent acks=all
producers (ours and confluent-kafka's) and consumers (ours and confluent-kafka's) running
throughout, while a nemesis strikes one fault at a time for ``--duration`` seconds: kill -9
of a broker (the controller half the time), SIGSTOP for 1-40 s, two brokers killed and
restarted together, a broker isolated, a minority split off, one-way loss, a leader
moved. Each fault is healed after a while, and the next comes once the cluster has
settled (a controller, every partition led by a full ISR).

Then the checker: every acknowledged record at its offset, once, in order
(record_history.check, on the log read back); every replica equal batch for batch; no
consumer shown a record the log lost; never two quorum leaders in one epoch; a leader
for every partition a fault took, and a controller, within broker.session.timeout.ms +
1 s. ``results["violations"]`` lists every broken promise (the command then fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

from purgatory.clients import AdminClient, Producer
from purgatory.experiments.chaos_checker import (
    ReplicaVerifier,
    consumed_figures,
    controller_figures,
    failover_figures,
)
from purgatory.experiments.cluster_view import ClusterView
from purgatory.experiments.harness import Options, Steps, brokers_for
from purgatory.experiments.kafka_clients import ConfluentLoad, ConfluentReader, OurReader
from purgatory.experiments.leader_failover import Load, record_outcome
from purgatory.experiments.nemesis import FAILOVER_KINDS, KINDS, Nemesis
from purgatory.experiments.processes import Brokers
from purgatory.experiments.record_history import Outcome, check, read_back
from purgatory.experiments.recorder import Recorder, Scraper

TOPIC = "chaos"
REPLICATION_FACTOR = 3


def _kinds(raw: str) -> list[str]:
    kinds = [k.strip() for k in raw.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if not kinds or unknown:
        raise RuntimeError(f"nemeses: expected some of {', '.join(KINDS)}; got {raw!r}")
    return kinds


async def chaos(recorder: Recorder, options: Options) -> dict[str, Any]:
    if options.bootstrap:
        raise RuntimeError(
            "chaos kills, pauses and restarts brokers, so it runs brokers of its own: "
            "drop --bootstrap/--admin"
        )
    params = options.params
    kinds = _kinds(str(params.get("nemeses", ",".join(KINDS))))
    seed = int(params.get("seed", random.randrange(1 << 31)))
    session_ms = int(params.get("session_timeout_ms", 3000))
    n = int(params.get("brokers", 3))
    if n < 3:
        raise RuntimeError("chaos needs at least 3 brokers (RF 3, and a quorum that survives one)")
    settings = {
        "default.replication.factor": REPLICATION_FACTOR,
        "min.insync.replicas": 2,
        "broker.session.timeout.ms": session_ms,
        "broker.heartbeat.interval.ms": max(10, session_ms // 4),
        "replica.lag.time.max.ms": int(params.get("replica_lag_time_max_ms", session_ms)),
        "log.level": "INFO",  # the checker reads quorum elections from the brokers' logs
        "log.format": "json",
    }
    recorder.manifest["settings"] |= {
        "seed": seed,
        "nemeses": kinds,
        "producers": int(params.get("producers", 2)),
        "confluent_producers": int(params.get("confluent_producers", 2)),
        **settings,
    }
    recorder.write_manifest()
    async with brokers_for(options, n, settings, recorder) as brokers:
        with (
            _client_logs(options.out / "clients.log"),
            Steps(options.duration_s, options.progress) as steps,
        ):
            async with Scraper(recorder, brokers.admins):
                return await _run(brokers, recorder, options, steps, kinds, seed, session_ms)


async def _run(
    brokers: Brokers,
    recorder: Recorder,
    options: Options,
    steps: Steps,
    kinds: list[str],
    seed: int,
    session_ms: int,
) -> dict[str, Any]:
    params = options.params
    partitions = options.partitions
    ours = int(params.get("producers", 2))
    theirs = int(params.get("confluent_producers", 2))
    rate = float(params.get("rate", 200)) / max(1, ours + theirs)
    delivery_timeout_ms = int(params.get("delivery_timeout_ms", 300_000))
    settle_s = float(params.get("settle_timeout_s", 120))
    await _create(brokers.bootstrap, partitions)
    outcomes: list[Outcome] = []

    def confluent_done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        record_outcome(recorder, outcome, "cluster")

    readers: list[OurReader | ConfluentReader] = [OurReader(brokers.bootstrap, TOPIC, partitions)]
    if int(params.get("confluent_consumers", 1)):
        readers.append(ConfluentReader(brokers.bootstrap, TOPIC, partitions))
    verifier = ReplicaVerifier(brokers, TOPIC, partitions)
    options.params.setdefault("delivery_timeout_ms", delivery_timeout_ms)
    async with contextlib.AsyncExitStack() as stack:
        for reader in readers:
            await stack.enter_async_context(reader)
        async with (
            ClusterView(brokers, recorder, TOPIC) as view,
            Load(
                brokers, recorder, TOPIC, partitions, options, count=ours, rate=rate * ours
            ) as load,
            ConfluentLoad(
                brokers.bootstrap,
                TOPIC,
                partitions,
                theirs,
                ours,
                rate,
                delivery_timeout_ms,
                confluent_done,
            ),
        ):
            nemesis = Nemesis(brokers, view, random.Random(seed), kinds, params)
            recorder.begin_phase("warm-up")
            await steps.sleep(min(5.0, options.duration_s / 10), "warm-up")
            end = time.monotonic() + options.duration_s
            while time.monotonic() < end:
                await _one_fault(
                    nemesis, view, verifier, recorder, steps, end, settle_s, partitions
                )
                await _hold(random.Random(seed + len(nemesis.faults)).uniform(1, 3), end, steps)
            recorder.begin_phase("quiet")
            steps.describe("quiet: the last acknowledgements")
        steps.describe("quiet: the consumers reading to the end")
        caught_up = await _read_to_the_end(brokers.bootstrap, partitions, readers, 60)
    outcomes.extend(load.outcomes)
    recorder.flush()
    results = await _verdict(
        brokers, recorder, options, nemesis, readers, verifier, outcomes, session_ms, seed
    )
    if not caught_up:
        results["violations"].append("the consumers did not read to the end within 60 s")
    return results


async def _one_fault(
    nemesis: Nemesis,
    view: ClusterView,
    verifier: ReplicaVerifier,
    recorder: Recorder,
    steps: Steps,
    end: float,
    settle_s: float,
    partitions: int,
) -> None:
    """Strike, hold, heal, wait until the cluster settles; then compare the replicas."""
    fault = await nemesis.strike()
    recorder.begin_phase(f"fault-{fault.index}-{fault.kind}", targets=fault.targets)
    recorder.write("events.jsonl", {"ts": fault.started, "event": "fault", **fault.row()})
    steps.describe(f"fault {fault.index}: {fault.kind} {fault.targets} {fault.detail}")
    await _hold(fault.hold_s, end, steps)
    await nemesis.heal(fault)
    recorder.write("events.jsonl", {"ts": fault.healed, "event": "heal", "fault": fault.index})
    steps.describe(f"fault {fault.index} healed: settling")
    brokers = nemesis.brokers

    def settled() -> bool:
        return view.settled(partitions, REPLICATION_FACTOR) and all(
            view.fresh(b) for b in brokers.admins
        )

    try:
        at = await view.until(settled, "the cluster settled", settle_s)
        fault.recovered_ms = round((at - (fault.healed or at)) * 1000, 1)
    except TimeoutError as exc:
        fault.error = f"{exc} after the heal"
        await nemesis.heal_everything()
        with contextlib.suppress(TimeoutError):
            await view.until(settled, "the cluster settled", settle_s)
    recorder.write("faults.jsonl", fault.row())
    await verifier.verify()


async def _read_to_the_end(
    bootstrap: str, partitions: int, readers: list[OurReader | ConfluentReader], timeout: float
) -> bool:
    """Wait until every consumer has read every partition to its high watermark (the
    load has stopped); False if one did not within ``timeout``."""
    async with AdminClient(bootstrap) as admin:
        ends = await admin.log_end_offsets([(TOPIC, p) for p in range(partitions)])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(r.position(p) >= ends[(TOPIC, p)] for r in readers for p in range(partitions)):
            return True
        await asyncio.sleep(0.2)
    return False


@contextlib.contextmanager
def _client_logs(path: Path) -> Iterator[None]:
    """The clients' own warnings (a partition without a leader, a connection refused:
    what the nemesis causes) go to ``path`` as JSON lines, not over the progress bar."""
    before = structlog.get_config()
    with path.open("a", encoding="utf-8") as out:
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.JSONRenderer(),
            ],
            logger_factory=structlog.PrintLoggerFactory(file=out),
        )
        try:
            yield
        finally:
            structlog.configure(**before)


async def _hold(seconds: float, end: float, steps: Steps) -> None:
    """Wait ``seconds`` (less if the run ends sooner), advancing the progress bar."""
    seconds = max(0.0, min(seconds, end - time.monotonic()))
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(0.2, left))
        steps.advance(min(0.2, left))


async def _create(bootstrap: str, partitions: int) -> None:
    """The topic, and one acknowledged acks=all record per partition (a warm-up, not in
    the history): every follower has fetched before the first fault."""
    async with AdminClient(bootstrap) as admin:
        await admin.create_topic(
            TOPIC, partitions, REPLICATION_FACTOR, {"min.insync.replicas": "2"}
        )
    async with Producer(bootstrap, acks=-1, linger_ms=0) as producer:
        await asyncio.gather(
            *[
                await producer.send(TOPIC, f"warm-up/{p}".encode(), partition=p)
                for p in range(partitions)
            ]
        )


async def _verdict(
    brokers: Brokers,
    recorder: Recorder,
    options: Options,
    nemesis: Nemesis,
    readers: list[OurReader | ConfluentReader],
    verifier: ReplicaVerifier,
    outcomes: list[Outcome],
    session_ms: int,
    seed: int,
) -> dict[str, Any]:
    log = await read_back(brokers.bootstrap, TOPIC, options.partitions)
    history, _ = check(outcomes, log)
    quiet = await verifier.quiesce(timeout=60)
    await verifier.verify(to_end=True)
    failovers = failover_figures(nemesis.faults, session_ms + 1000)
    controllers = controller_figures(options.out / "logs")
    consumed = {
        type(r).__name__: consumed_figures(r.seen, log, r.reread_differently) for r in readers
    }
    by_client = {
        "ours": sum(
            1
            for o in outcomes
            if o.error is None and o.producer < int(options.params.get("producers", 2))
        ),
    }
    by_client["confluent"] = history["acked"] - by_client["ours"]
    violations = []
    for name in ("lost", "duplicates", "out_of_order"):
        if history[name]:
            violations.append(f"{history[name]} acknowledged records {name.replace('_', ' ')}")
    if not quiet:
        violations.append("the replicas did not converge within 60 s of the load's end")
    if verifier.divergent:
        violations.append(f"{len(verifier.divergent)} batches differ between replicas")
    if controllers["epochs_with_two_leaders"]:
        violations.append(f"two quorum leaders in epochs {controllers['epochs_with_two_leaders']}")
    for name, figures in consumed.items():
        if figures["not_in_the_log"] or figures["read_twice_differently"]:
            violations.append(f"{name} was shown records the log does not hold")
    for f in failovers["over_the_bound"]:
        violations.append(f"fault {f['fault']} ({f['kind']}): {f['measure']} {f['ms']} ms")
    for f in nemesis.faults:
        if f.error is not None and f.kind in FAILOVER_KINDS | {"restart-two"}:
            violations.append(f"fault {f.index} ({f.kind}): {f.error}")
    return {
        "seed": seed,
        "faults": len(nemesis.faults),
        "fault_list": [f.row() for f in nemesis.faults],
        **history,
        "acked_by_client": by_client,
        "consumed": consumed,
        "replicas": verifier.figures(),
        "controllers": controllers,
        "failover": failovers,
        "violations": violations,
        "samples": dict(recorder.counts),
    }
