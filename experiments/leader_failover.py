"""leader-failover: Kafka's durability promise, measured (docs/experiments.md).

Phase ``clean``: acks=all load from several producers on an RF 3 / min ISR 2 topic; the
leader of its first partition is killed (SIGKILL), the controller elects a new leader from
the ISR once ``broker.session.timeout.ms`` passes, and a while later the killed broker is
restarted (with empty logs: a new incarnation that catches up as a follower).

Phase ``unclean``: a topic with ``unclean.leader.election.enable=true`` and min ISR 1. An
error fault on one broker's Fetch API cuts its followers off until the ISR of its
partitions is that broker alone; records acknowledged from then on live on it only. It is
killed, and the controller elects a live replica that lacks them.

Every record sent is kept in ``history.jsonl`` (acknowledged, with its offset, or failed,
with what the producer was told). After each phase the topic is read back and checked:
each acknowledged record must be at its offset, exactly once, in the order it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from purgatory.clients import AdminClient, Producer
from purgatory.experiments.harness import Options, Steps, brokers_for
from purgatory.experiments.processes import Brokers, admin_call, metric
from purgatory.experiments.record_history import Outcome, check, read_back, unavailability
from purgatory.experiments.recorder import Recorder, Scraper

POLL_S = 0.02  # how often the watcher reads a broker's /v1/state


class Load:
    """``producers`` producers with acks=all, each sending ``rate / producers`` records a
    second round-robin over the partitions without waiting for acknowledgements (as an
    application does: records queue while a partition has no leader). Every outcome goes
    to history.jsonl; every acknowledgement is a ``produce`` latency sample."""

    def __init__(
        self,
        brokers: Brokers,
        recorder: Recorder,
        topic: str,
        partitions: int,
        options: Options,
        count: int | None = None,
        rate: float | None = None,
    ) -> None:
        self.brokers = brokers
        self.recorder = recorder
        self.topic = topic
        self.partitions = partitions
        self.count = int(options.params.get("producers", 3)) if count is None else count
        total = float(options.params.get("rate", 300)) if rate is None else rate
        self.rate = total / max(1, self.count)
        self.delivery_timeout_ms = int(options.params.get("delivery_timeout_ms", 120000))
        self.outcomes: list[Outcome] = []
        self._producers: list[Producer] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Load:
        for i in range(self.count):
            producer = Producer(
                self.brokers.bootstrap,
                acks=-1,
                enable_idempotence=True,  # Kafka's default with acks=all, made explicit
                linger_ms=0,
                delivery_timeout_ms=self.delivery_timeout_ms,
                client_id=f"producer-{i}",
            )
            await producer.start()
            self._producers.append(producer)
        self._tasks = [
            asyncio.ensure_future(self._run(i, p)) for i, p in enumerate(self._producers)
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop sending, wait for every record's outcome, close the producers."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(
            *(p.close(self.delivery_timeout_ms / 1000) for p in self._producers),
            return_exceptions=True,
        )

    async def _run(self, index: int, producer: Producer) -> None:
        seq = 0
        started = time.monotonic()
        while True:
            outcome = Outcome(
                self.topic, (seq + index) % self.partitions, index, seq, time.time(), 0.0
            )
            future = await producer.send(self.topic, outcome.value, partition=outcome.partition)
            future.add_done_callback(functools.partial(self._done, producer, outcome))
            seq += 1
            await asyncio.sleep(max(0.0, started + seq / self.rate - time.monotonic()))

    def _done(self, producer: Producer, outcome: Outcome, future: asyncio.Future[Any]) -> None:
        outcome.ts = time.time()
        leader = None
        if future.cancelled():
            outcome.error = "cancelled"
        elif (error := future.exception()) is not None:
            outcome.error = f"{type(error).__name__}: {error}"
        else:
            outcome.offset = future.result().offset
            leader = producer.cluster.leader_for(outcome.topic, outcome.partition)
        self.outcomes.append(outcome)
        record_outcome(self.recorder, outcome, f"broker-{leader}")


def record_outcome(recorder: Recorder, outcome: Outcome, destination: str) -> None:
    """An outcome into history.jsonl; an acknowledgement is also a ``produce`` sample."""
    if outcome.error is None:
        recorder.sample(
            "produce",
            f"producer-{outcome.producer}",
            destination,
            (outcome.ts - outcome.sent_ts) * 1000,
            ts=outcome.ts,
        )
    recorder.write(
        "history.jsonl",
        {
            "ts": outcome.ts,
            "phase": recorder.phase_at(outcome.ts),
            "topic": outcome.topic,
            "partition": outcome.partition,
            "producer": outcome.producer,
            "seq": outcome.seq,
            "sent_ts": outcome.sent_ts,
            "offset": outcome.offset,
            "error": outcome.error,
        },
    )


@dataclass
class Watcher:
    """Reads /v1/state every POLL_S, from the controller while it answers (it learns of an
    election first), and writes each change of a partition's leader or ISR to events.jsonl
    (the figure marks the elections)."""

    brokers: Brokers
    recorder: Recorder
    topic: str
    state: dict[int, dict[str, Any]] = field(default_factory=dict)
    controller: int | None = None

    async def __aenter__(self) -> Watcher:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1))
        await self.poll()
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._session.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            await self.poll()

    async def poll(self) -> None:
        ids = sorted(self.brokers.admins, key=lambda b: b != self.controller)
        for broker_id in ids:
            try:
                async with self._session.get(
                    f"{self.brokers.admin(broker_id)}/v1/state"
                ) as response:
                    state = await response.json()
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                continue  # dead, paused or starting: ask the next one
            if state["controller_id"] is None or not state["partitions"]:
                continue
            self.controller = state["controller_id"]
            now = time.time()
            for p in state["partitions"]:
                if p["topic"] != self.topic:
                    continue
                before = self.state.get(p["partition"])
                self.state[p["partition"]] = p
                for event, keys in (("leader", ("leader", "leader_epoch")), ("isr", ("isr",))):
                    if before is None or any(before[k] != p[k] for k in keys):
                        self.recorder.write(
                            "events.jsonl",
                            {
                                "ts": now,
                                "event": event,
                                "topic": self.topic,
                                "partition": p["partition"],
                                "leader": p["leader"],
                                "leader_epoch": p["leader_epoch"],
                                "isr": p["isr"],
                            },
                        )
            return

    def led_by(self, broker: int) -> list[int]:
        return sorted(i for i, p in self.state.items() if p["leader"] == broker)

    async def until(self, check: Any, what: str, timeout: float) -> float:
        """Wait until ``check(state)`` holds; returns when it first did (epoch s)."""
        deadline = time.monotonic() + timeout
        while not check(self.state):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not within {timeout:g} s")
            await asyncio.sleep(POLL_S)
        return time.time()


def event(recorder: Recorder, name: str, **details: Any) -> float:
    now = time.time()
    recorder.write("events.jsonl", {"ts": now, "event": name, **details})
    return now


async def elections(brokers: Brokers) -> dict[str, float]:
    """purgatory_leader_elections_total by kind, summed over the live brokers."""
    out: dict[str, float] = {}
    for base in brokers.admins.values():
        for kind in ("clean", "unclean", "preferred"):
            with contextlib.suppress(Exception):
                value = await metric(base, "purgatory_leader_elections_total", {"kind": kind})
                out[kind] = out.get(kind, 0.0) + value
    return out


@dataclass
class Run:
    """What both phases share: the brokers, the recorder, the options, the progress bar,
    a third of a phase (s), and how long an election or ISR change may take (s)."""

    brokers: Brokers
    recorder: Recorder
    options: Options
    steps: Steps
    third: float
    timeout: float


async def leader_failover(recorder: Recorder, options: Options) -> dict[str, Any]:
    if options.bootstrap:
        raise RuntimeError(
            "leader-failover kills and restarts brokers, so it runs brokers of its own: "
            "drop --bootstrap/--admin"
        )
    session_ms = int(options.params.get("session_timeout_ms", 9000))
    settings = {
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "broker.session.timeout.ms": session_ms,
        "broker.heartbeat.interval.ms": int(
            options.params.get("heartbeat_interval_ms", max(10, session_ms // 4))
        ),
        "replica.lag.time.max.ms": int(options.params.get("replica_lag_time_max_ms", 10000)),
        "log.level": "WARNING",
    }
    recorder.manifest["settings"] |= {
        "producers": int(options.params.get("producers", 3)),
        "rate": float(options.params.get("rate", 300)),
        **settings,
    }
    third = options.duration_s / 6  # each phase: before the kill, after it, after the restart
    timeout = 6 * session_ms / 1000 + 30
    async with brokers_for(options, 3, settings, recorder) as brokers:
        assert brokers.supervisor is not None
        with Steps(options.duration_s, options.progress) as steps:
            async with Scraper(recorder, brokers.admins):
                run = Run(brokers, recorder, options, steps, third, timeout)
                clean = await _clean_phase(run)
                unclean = await _unclean_phase(run)
    return {"clean": clean, "unclean": unclean, "samples": dict(recorder.counts)}


async def _clean_phase(run: Run) -> dict[str, Any]:
    brokers, recorder, options, steps = run.brokers, run.recorder, run.options, run.steps
    third, timeout = run.third, run.timeout
    topic = "failover"
    await _create(brokers, topic, options.partitions, {"min.insync.replicas": "2"})
    async with (
        Watcher(brokers, recorder, topic) as watcher,
        Load(brokers, recorder, topic, options.partitions, options) as load,
    ):
        recorder.begin_phase("clean-baseline", topic=topic)
        await steps.sleep(third, "clean: baseline")
        victim = int(options.params.get("victim", watcher.state[0]["leader"]))
        led = watcher.led_by(victim)
        killed, elected = await _kill_and_restart(run, watcher, victim, led, "clean")
        await watcher.until(
            lambda s: all(victim in s[p]["isr"] for p in range(options.partitions)),
            f"broker {victim} back in the ISR of {topic}",
            timeout,
        )
        event(recorder, "isr-rejoined", broker=victim)
        await steps.sleep(third, "clean: restarted")
    recorder.flush()
    log = await read_back(brokers.bootstrap, topic, options.partitions)
    result = {
        "topic": topic,
        "victim": victim,
        "partitions_led": led,
        "election_ms": round((elected - killed) * 1000, 1),
        **unavailability(load.outcomes, led, killed, options.partitions),
        **check(load.outcomes, log)[0],
        "elections": await elections(brokers),
    }
    async with AdminClient(brokers.bootstrap) as admin:
        await admin.delete_topic(topic)  # its partitions must not be cut off by phase 2
    return result


async def _unclean_phase(run: Run) -> dict[str, Any]:
    brokers, recorder, options, steps = run.brokers, run.recorder, run.options, run.steps
    third, timeout = run.third, run.timeout
    topic = "failover-unclean"
    await _create(
        brokers,
        topic,
        options.partitions,
        {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
    )
    async with (
        Watcher(brokers, recorder, topic) as watcher,
        Load(brokers, recorder, topic, options.partitions, options) as load,
    ):
        recorder.begin_phase("unclean-baseline", topic=topic)
        await steps.sleep(third / 2, "unclean: baseline")
        # A broker other than the controller, so that its followers keep their heartbeats.
        victim = next(
            watcher.state[p]["leader"]
            for p in sorted(watcher.state)
            if watcher.state[p]["leader"] != watcher.controller
        )
        led = watcher.led_by(victim)
        await admin_call(
            brokers.admin(victim),
            "POST",
            "/v1/faults",
            {
                "name": "cut-off-followers",
                "kind": "error",
                "api": "Fetch",
                "error_code": "NOT_LEADER_OR_FOLLOWER",
            },
        )
        cut = event(recorder, "followers-cut-off", broker=victim)
        recorder.begin_phase("unclean-followers-cut-off", broker=victim)
        shrunk = await watcher.until(
            lambda s: all(s[p]["isr"] == [victim] for p in led),
            f"the ISR of {topic} partitions {led} shrunk to broker {victim}",
            timeout,
        )
        event(recorder, "isr-shrunk", broker=victim, partitions=led)
        recorder.begin_phase("unclean-isr-is-the-leader", broker=victim)
        await steps.sleep(third / 2, f"unclean: only broker {victim} holds new records")
        killed, elected = await _kill_and_restart(run, watcher, victim, led, "unclean")
        await steps.sleep(third, "unclean: restarted")
    recorder.flush()
    log = await read_back(brokers.bootstrap, topic, options.partitions)
    result, lost = check(load.outcomes, log)
    exposed = {
        o.value
        for o in load.outcomes
        if o.error is None and o.partition in led and cut <= o.ts < killed
    }
    return {
        "topic": topic,
        "victim": victim,
        "partitions_led": led,
        "isr_shrink_ms": round((shrunk - cut) * 1000, 1),
        "election_ms": round((elected - killed) * 1000, 1),
        **unavailability(load.outcomes, led, killed, options.partitions),
        # Acknowledged while the leader alone held them: what an unclean election may lose.
        "acked_by_the_leader_alone": len(exposed),
        "lost_of_those": sum(1 for o in lost if o.value in exposed),
        **result,
        "elections": await elections(brokers),
    }


async def _create(brokers: Brokers, topic: str, partitions: int, configs: dict[str, str]) -> None:
    """Create ``topic`` (RF 3) and wait until an acks=all record is acknowledged on every
    partition (a warm-up record, not in the history): a follower that asked the leader for
    a partition before the leader had it backs off for replica.fetch.backoff.ms, and the
    baseline should not start inside that second."""
    async with AdminClient(brokers.bootstrap) as admin:
        await admin.create_topic(topic, partitions, 3, configs)
    async with Producer(brokers.bootstrap, acks=-1, linger_ms=0) as producer:
        warm_up = [
            await producer.send(topic, f"warm-up/{p}".encode(), partition=p)
            for p in range(partitions)
        ]
        await asyncio.gather(*warm_up)


async def _kill_and_restart(
    run: Run, watcher: Watcher, victim: int, led: list[int], phase: str
) -> tuple[float, float]:
    """SIGKILL ``victim`` (which leads ``led``), wait until each of those partitions has
    another leader, a third later start it again; (when killed, when all were elected)."""
    supervisor = run.brokers.supervisor
    assert supervisor is not None
    await asyncio.to_thread(supervisor.kill, victim)
    killed = event(run.recorder, "kill", broker=victim, partitions=led)
    run.recorder.begin_phase(f"{phase}-leader-killed", broker=victim)
    elected = await watcher.until(
        lambda s: all(s[p]["leader"] not in (victim, -1) for p in led),
        f"a new leader for {watcher.topic} partitions {led}",
        run.timeout,
    )
    await run.steps.sleep(run.third, f"{phase}: broker {victim} down, new leaders")
    await asyncio.to_thread(supervisor.start, victim)
    event(run.recorder, "restart", broker=victim)
    run.recorder.begin_phase(f"{phase}-restarted", broker=victim)
    await asyncio.to_thread(supervisor.wait_healthy, [victim])
    event(run.recorder, "healthy", broker=victim)
    return killed, elected
