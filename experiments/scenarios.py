"""The built-in scenarios of `purgatory experiment run` (docs/experiments.md has what each
reference reported, and what to expect here)."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from purgatory.clients import AdminClient, Consumer, Producer
from purgatory.experiments.chaos import chaos
from purgatory.experiments.harness import Options, Steps, brokers_for
from purgatory.experiments.leader_failover import leader_failover
from purgatory.experiments.processes import Brokers, admin_call, metric, set_config
from purgatory.experiments.recorder import Recorder, Scraper

# -- grey-failure (KIP-736) ---------------------------------------------------------------


async def grey_failure(recorder: Recorder, options: Options) -> dict[str, Any]:
    """3 brokers, acks=-1 load, then inbound latency on broker 0 for the second half."""
    delay_ms = float(options.params.get("delay_ms", 50))
    half = options.duration_s / 2
    settings = {"default.replication.factor": 3, "min.insync.replicas": 2, "log.level": "WARNING"}
    recorder.manifest["settings"] |= {"delay_ms": delay_ms, "culprit": 0, **settings}
    async with brokers_for(options, 3, settings, recorder) as brokers:
        async with AdminClient(brokers.bootstrap) as admin:
            await admin.create_topic("grey", options.partitions, replication_factor=3)
        with Steps(options.duration_s, options.progress) as steps:
            async with (
                Scraper(recorder, brokers.admins),
                Producer(brokers.bootstrap, acks=-1, linger_ms=0) as producer,
            ):
                load = asyncio.ensure_future(_produce_load(producer, recorder, "grey", options))
                try:
                    recorder.begin_phase("baseline")
                    await steps.sleep(half, "baseline")
                    await admin_call(
                        brokers.admin(0),
                        "POST",
                        "/v1/faults",
                        {
                            "name": "grey-failure",
                            "kind": "latency",
                            "delay_ms": delay_ms,
                            "jitter_ms": delay_ms / 10,
                        },
                    )
                    recorder.begin_phase("fault", broker=0, delay_ms=delay_ms)
                    await steps.sleep(half, f"inbound latency {delay_ms:g} ms on broker 0")
                finally:
                    load.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await load
                    with contextlib.suppress(RuntimeError, OSError):
                        await admin_call(brokers.admin(0), "DELETE", "/v1/faults/grey-failure")
    return {"delay_ms": delay_ms, "culprit": 0, "samples": dict(recorder.counts)}


async def _produce_load(
    producer: Producer, recorder: Recorder, topic: str, options: Options
) -> None:
    """acks=-1 produce requests at a steady pace, each one a latency sample."""
    rate = float(options.params.get("rate", 200))
    partitions = options.partitions
    sent = 0
    started = time.monotonic()
    while True:
        partition = sent % partitions
        before = time.perf_counter()
        future = await producer.send(topic, b"x" * 100, partition=partition)
        await producer.flush()
        with contextlib.suppress(Exception):
            await future
            leader = producer.cluster.leader_for(topic, partition)
            recorder.sample(
                "produce", "client", f"broker-{leader}", (time.perf_counter() - before) * 1000
            )
        sent += 1
        await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))


# -- purgatory (the timing-wheel post) -----------------------------------------------------


async def purgatory(recorder: Recorder, options: Options) -> dict[str, Any]:
    """The wheel vs heap sweep of the purgatory benchmark, for the post's two cases."""
    from purgatory.broker.purgatory.perf import CASES, result_dict, run, saturation

    rates = [
        float(r) for r in str(options.params.get("rates", "25000,50000,100000,150000")).split(",")
    ]
    impls = str(options.params.get("impls", "wheel,wheel-purge,heap")).split(",")
    num = int(options.params.get("num", options.records))
    recorder.manifest["settings"] |= {"rates": rates, "impls": impls, "num": num}
    results = []
    with Steps(len(CASES) * len(impls) * len(rates), options.progress) as steps:
        for case, shape in CASES.items():
            for impl in impls:
                recorder.begin_phase(f"{case}/{impl}")
                for rate in rates:
                    steps.describe(f"{case} timeout rate, {impl}, {rate:g}/s")
                    result = result_dict(
                        await run(
                            impl, num=num, rate=rate, pct75=shape["pct75"], pct50=shape["pct50"]
                        )
                    )
                    row = {"case": case, **result}
                    results.append(row)
                    recorder.write("purgatory.jsonl", row)
                    recorder.flush()
                    steps.advance()
    return {"saturation": saturation(results), "runs": len(results)}


# -- remote-backfill (KIP-1018) ------------------------------------------------------------


async def remote_backfill(recorder: Recorder, options: Options) -> dict[str, Any]:
    """A backfill over many partitions of a tiered topic from a slow remote store, once per
    value of remote.fetch.max.wait.ms."""
    timeouts = [int(t) for t in str(options.params.get("timeouts", "100,2000")).split(",")]
    p50 = float(options.params.get("remote_p50_ms", 100))
    p99 = float(options.params.get("remote_p99_ms", 800))
    segment_bytes = int(options.params.get("segment_bytes", 4096))
    settings = {
        "remote.log.manager.task.interval.ms": 200,
        "remote.log.reader.threads": 4,
        "log.level": "WARNING",
    }
    recorder.manifest["settings"] |= {
        "timeouts_ms": timeouts,
        "remote_latency": {"distribution": "lognormal", "p50_ms": p50, "p99_ms": p99},
        **settings,
    }
    out: dict[str, Any] = {"runs": []}
    partitions, records = options.partitions, options.records
    async with brokers_for(options, 1, settings, recorder) as brokers:
        base = brokers.admin(0)
        async with AdminClient(brokers.bootstrap) as admin:
            await admin.create_topic(
                "backfill",
                partitions,
                configs={
                    "remote.log.storage.enable": "true",
                    "segment.bytes": str(segment_bytes),
                    "local.retention.bytes": "0",
                },
            )
        recorder.begin_phase("fill")
        # Small batches, so that segments close and go to the remote tier.
        async with Producer(brokers.bootstrap, linger_ms=5, batch_size=1024) as producer:
            for i in range(records):
                for p in range(partitions):
                    await producer.send("backfill", f"{i}".encode() * 20, partition=p)
            await producer.flush()
        await _wait_tiered(base, "backfill", partitions)
        await set_config(base, "remote.storage.latency.distribution", "lognormal")
        await set_config(base, "remote.storage.latency.p99.ms", p99)
        await set_config(base, "remote.storage.latency.ms", p50)
        with Steps(len(timeouts) * partitions * records, options.progress) as steps:
            async with Scraper(recorder, brokers.admins):
                for timeout in timeouts:
                    await set_config(base, "remote.fetch.max.wait.ms", timeout)
                    recorder.begin_phase(f"timeout={timeout}", remote_fetch_max_wait_ms=timeout)
                    steps.describe(f"backfill, remote.fetch.max.wait.ms={timeout}")
                    expired = await metric(base, "purgatory_remote_fetch_expirations_total")
                    started = time.monotonic()
                    got = await _backfill(
                        brokers, recorder, partitions, records, segment_bytes, steps
                    )
                    run = {
                        "remote_fetch_max_wait_ms": timeout,
                        "records": got,
                        "seconds": round(time.monotonic() - started, 3),
                        "expirations": await metric(
                            base, "purgatory_remote_fetch_expirations_total"
                        )
                        - expired,
                    }
                    out["runs"].append(run)
                    recorder.write("backfill.jsonl", run)
    return out


async def _wait_tiered(base: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        state = await admin_call(base, "GET", "/v1/state")
        rows = [p for p in state["partitions"] if p["topic"] == topic]
        if len(rows) == partitions and all(
            p["local_log_start_offset"] > p["log_start_offset"] for p in rows
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} did not move to the remote tier in {timeout}s")
        await asyncio.sleep(0.1)


async def _backfill(
    brokers: Brokers,
    recorder: Recorder,
    partitions: int,
    records: int,
    fetch_bytes: int,
    steps: Steps,
) -> int:
    """Consume every partition from offset 0, ``fetch_bytes`` per partition per fetch."""

    def on_fetch(broker_id: int, total: float, wait: float) -> None:
        recorder.sample(
            "consumer_fetch", "consumer", f"broker-{broker_id}", total * 1000, wait * 1000
        )

    got = 0
    async with Consumer(
        brokers.bootstrap,
        auto_offset_reset="earliest",
        on_fetch=on_fetch,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=fetch_bytes,
    ) as consumer:
        consumer.assign([("backfill", p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek(("backfill", p), 0)
        while got < partitions * records:
            batch = await consumer.poll(timeout_ms=500)
            got += len(batch)
            steps.advance(len(batch))
    return got


# -- consumer-lag (the old consumer's MaxLag) ---------------------------------------------


async def consumer_lag(recorder: Recorder, options: Options) -> dict[str, Any]:
    """A slow application behind queues of different sizes: the fetcher's MaxLag against
    the offset checker's lag (log end - committed), sampled every 100 ms."""
    shapes = [
        tuple(int(x) for x in shape.split("x"))
        for shape in str(options.params.get("shapes", "1x1024,100x1024,1000x65536")).split(",")
    ]  # queued.max.message.chunks x fetch.message.max.bytes
    per_poll_s = float(options.params.get("poll_interval_s", 0.02))
    per_poll = int(options.params.get("records_per_poll", 1))
    settings = {"log.level": "WARNING"}
    recorder.manifest["settings"] |= {
        "shapes": shapes,
        "poll_interval_s": per_poll_s,
        "records_per_poll": per_poll,
    }
    out: dict[str, Any] = {"runs": []}
    async with brokers_for(options, 1, settings, recorder) as brokers:
        seconds = options.duration_s / len(shapes)
        with Steps(options.duration_s, options.progress) as steps:
            for chunks, fetch_bytes in shapes:
                topic = f"lag-{chunks}x{fetch_bytes}"
                async with AdminClient(brokers.bootstrap) as admin:
                    await admin.create_topic(topic, 1)
                # Small batches: a chunk is whole batches, so they bound its size.
                async with Producer(brokers.bootstrap, linger_ms=5, batch_size=1024) as producer:
                    for _ in range(options.records):
                        await producer.send(topic, b"v" * 100, partition=0)
                    await producer.flush()
                recorder.begin_phase(
                    topic, queued_max_message_chunks=chunks, fetch_message_max_bytes=fetch_bytes
                )
                steps.describe(f"consumer lag, {chunks} chunks x {fetch_bytes} bytes")
                run = await _lag_run(
                    brokers,
                    recorder,
                    topic,
                    (chunks, fetch_bytes),
                    (per_poll, per_poll_s),
                    seconds,
                    steps,
                )
                out["runs"].append(run)
    return out


async def _lag_run(
    brokers: Brokers,
    recorder: Recorder,
    topic: str,
    shape: tuple[int, int],
    pace: tuple[int, float],
    seconds: float,
    steps: Steps,
) -> dict[str, Any]:
    """Consume ``pace[0]`` records every ``pace[1]`` s, committing, for ``seconds``;
    sample both lags every 100 ms. The run's figures are the medians of the samples."""
    chunks, fetch_bytes = shape
    per_poll, per_poll_s = pace
    group = f"{topic}-group"
    tp = (topic, 0)
    samples: dict[str, list[int]] = {"max_lag": [], "checker_lag": []}
    consumed = 0
    async with (
        AdminClient(brokers.bootstrap) as admin,
        Consumer(
            brokers.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            queued_max_message_chunks=chunks,
            fetch_message_max_bytes=fetch_bytes,
        ) as consumer,
    ):
        consumer.assign([tp])
        end = time.monotonic() + seconds
        next_sample = time.monotonic() + 0.1
        while time.monotonic() < end:
            batch = await consumer.poll(timeout_ms=200, max_records=per_poll)
            consumed += len(batch)
            if batch:
                await consumer.commit()
            if time.monotonic() >= next_sample:
                committed = (await admin.group_offsets(group, [tp]))[tp][0]
                log_end = (await admin.log_end_offsets([tp]))[tp]
                row: dict[str, Any] = {
                    "ts": time.time(),
                    "phase": topic,
                    "queued_max_message_chunks": chunks,
                    "fetch_message_max_bytes": fetch_bytes,
                    "max_lag": consumer.max_lag(),
                    "checker_lag": log_end - max(committed, 0),
                    "queued_chunks": consumer.queued_chunks(),
                    "consumed": consumed,
                }
                recorder.write("lag.jsonl", row)
                samples["max_lag"].append(row["max_lag"])
                samples["checker_lag"].append(row["checker_lag"])
                next_sample = time.monotonic() + 0.1
            steps.advance(per_poll_s)
            await asyncio.sleep(per_poll_s)  # the slow application
        recorder.flush()
    return {
        "topic": topic,
        "chunks": chunks,
        "fetch_bytes": fetch_bytes,
        "consumed": consumed,
        "samples": len(samples["max_lag"]),
        **{f"median_{k}": statistics.median(v) if v else None for k, v in samples.items()},
        **{f"peak_{k}": max(v, default=None) for k, v in samples.items()},
    }


SCENARIOS: dict[str, Callable[[Recorder, Options], Awaitable[dict[str, Any]]]] = {
    "grey-failure": grey_failure,
    "purgatory": purgatory,
    "remote-backfill": remote_backfill,
    "consumer-lag": consumer_lag,
    "leader-failover": leader_failover,
    "chaos": chaos,
}
