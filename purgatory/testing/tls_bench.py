"""`purgatory perf tls`: what TLS costs a produce workload, measured side by side with
plaintext on one broker in one run.

One `purgatory broker` process listens on PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512, a
user written into its metadata log at start), its certificates from `write_certs`. Per
round, each listener in turn (the order rotating from one round to the next, so a drift
of the machine falls on all of them) gets the same workload from a new confluent-kafka
(librdkafka) producer, idempotent and so acks=all, connected and warmed up before the
clock starts:

- throughput: ``--num-records`` records of ``--record-size`` bytes as fast as the
  producer takes them (linger.ms 5), into a topic of 3 partitions: records/s and MB/s
  (10^6 bytes of values), the broker process's CPU seconds (user + system, from /proc)
  per MB, and this process's (the client's) beside it;
- latency: ``--rate`` records/s for ``--seconds`` (linger.ms 0), each record timed from produce() to
  its acknowledgement: p50 and p99 in ms.

The JSON on stdout holds each listener's medians of the rounds, the TLS cost (each TLS
listener against PLAINTEXT: the medians of the rounds' ratios and differences, each
round's listeners measured minutes apart at most) and every sample; progress to stderr.
Client and broker share the machine: on few cores the client's own TLS work competes
with the broker's.

    purgatory perf tls --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from purgatory.common.percentiles import percentile
from purgatory.experiments.kafka_mock import produce_all
from purgatory.testing.compare_bench import CompareError, _progress, rounds

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
TOPIC = "tls-bench"
PARTITIONS = 3
MB = 1_000_000
SCRAM_USER, SCRAM_PASSWORD = "bench", "bench-secret"
# Each listener's medians; the ratio and difference of each against PLAINTEXT is its cost.
MEASURES = (
    "records_per_s",
    "mb_per_s",
    "produce_p50_ms",
    "produce_p99_ms",
    "broker_cpu_s_per_mb",
    "client_cpu_s_per_mb",
)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TlsBroker:
    """One broker process serving every listener of LISTENERS, with the certificates and
    the SCRAM user the clients need; ``close`` stops it and removes the certificates."""

    def __init__(self) -> None:
        from purgatory.broker.ops.supervisor import Supervisor
        from purgatory.experiments.processes import free_ports
        from purgatory.testing.certs import write_certs

        self._dir = tempfile.TemporaryDirectory(prefix="purgatory-tls-bench-")
        self.certs = write_certs(Path(self._dir.name))
        *ports, admin = free_ports(len(LISTENERS) + 1)
        self.ports = dict(zip(LISTENERS, ports, strict=True))
        settings = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.location": str(self.certs.broker),
            "ssl.truststore.location": str(self.certs.ca),
        }
        command = [
            *(sys.executable, "-m", "purgatory", "broker", "--id", "0"),
            *("--admin-port", str(admin), "--log-level", "ERROR"),
            *("--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"),
        ]
        for name, value in settings.items():
            command += ["--set", f"{name}={value}"]
        self._supervisor = Supervisor(
            [command], [f"http://127.0.0.1:{admin}"], Path(self._dir.name) / "logs"
        )
        try:
            self._supervisor.start_all()
            self._supervisor.wait_healthy([0])
        except Exception:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return int(self._supervisor.procs[0].pid)

    def client_config(self, listener: str) -> dict[str, Any]:
        """librdkafka's settings for ``listener``."""
        config: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[listener]}",
            "security.protocol": listener,
        }
        if listener in ("SSL", "SASL_SSL"):
            config["ssl.ca.location"] = str(self.certs.ca)
        if listener == "SASL_SSL":
            config["sasl.mechanism"] = "SCRAM-SHA-512"
            config["sasl.username"] = SCRAM_USER
            config["sasl.password"] = SCRAM_PASSWORD
        return config

    def close(self) -> None:
        try:
            self._supervisor.stop_all()
        finally:
            self._dir.cleanup()


def create_topic(broker: TlsBroker) -> None:
    """The topic of the workload; retention keeps the broker's memory level over rounds."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(broker.client_config("PLAINTEXT"))
    topic = NewTopic(
        TOPIC,
        PARTITIONS,
        1,
        config={"retention.bytes": str(32 << 20), "segment.bytes": str(1 << 20)},
    )
    admin.create_topics([topic], operation_timeout=10)[TOPIC].result(timeout=20)


def _producer(broker: TlsBroker, listener: str, linger_ms: int) -> Any:
    """An idempotent producer on ``listener``, connected, its producer id granted and
    every partition's leader known: what follows times produce alone."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            **broker.client_config(listener),
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "queue.buffering.max.messages": 1_000_000,
            "message.timeout.ms": 60_000,
        }
    )
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, b"warm-up", partition=partition)
    if producer.flush(30):
        raise CompareError(f"{listener}: the warm-up records were not acknowledged")
    return producer


def throughput(broker: TlsBroker, listener: str, records: int, size: int) -> dict[str, float]:
    """``records`` values of ``size`` bytes as fast as the producer takes them."""
    producer = _producer(broker, listener, linger_ms=5)
    failed: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    value = b"x" * size
    broker_cpu, client_cpu = cpu_seconds(broker.pid), time.process_time()
    started = time.perf_counter()
    produce_all(producer, TOPIC, value, records, delivered)
    if producer.flush(120):
        raise CompareError(f"{listener}: records were not acknowledged within 120 s")
    elapsed = time.perf_counter() - started
    broker_cpu = cpu_seconds(broker.pid) - broker_cpu
    client_cpu = time.process_time() - client_cpu
    if failed:
        raise CompareError(f"{listener}: {len(failed)} records failed, the first: {failed[0]}")
    megabytes = records * size / MB
    return {
        "records_per_s": round(records / elapsed),
        "mb_per_s": round(megabytes / elapsed, 2),
        "broker_cpu_s_per_mb": round(broker_cpu / megabytes, 4),
        "client_cpu_s_per_mb": round(client_cpu / megabytes, 4),
    }


def latency(
    broker: TlsBroker, listener: str, rate: int, seconds: float, size: int
) -> dict[str, float]:
    """``rate`` records/s for ``seconds`` with linger.ms 0 (each request's own cost, no
    batching wait), each timed by librdkafka from produce() to its acknowledgement
    (``Message.latency()``)."""
    producer = _producer(broker, listener, linger_ms=0)
    samples: list[float] = []
    failed: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            samples.append(message.latency() * 1000)
        else:
            failed.append(error)

    value = b"x" * size
    total = max(1, round(rate * seconds))
    started = time.perf_counter()
    for n in range(total):
        while (wait := started + n / rate - time.perf_counter()) > 0:
            producer.poll(min(wait, 0.01))
        producer.produce(TOPIC, value, on_delivery=delivered)
    if producer.flush(60):
        raise CompareError(f"{listener}: records were not acknowledged within 60 s")
    if failed:
        raise CompareError(f"{listener}: {len(failed)} records failed, the first: {failed[0]}")
    ordered = sorted(samples)
    return {"produce_p50_ms": percentile(ordered, 0.5), "produce_p99_ms": percentile(ordered, 0.99)}


def measure_once(broker: TlsBroker, listener: str, args: argparse.Namespace) -> dict[str, float]:
    try:
        return {
            **throughput(broker, listener, args.num_records, args.record_size),
            **latency(broker, listener, args.rate, args.seconds, args.record_size),
        }
    except CompareError:
        raise
    except Exception as exc:
        raise CompareError(f"{listener}: {exc!r}") from exc


def tls_cost(
    samples: dict[str, list[dict[str, float]]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Each TLS listener against PLAINTEXT, per measure: the median over the rounds of
    the round's ratio (listener / PLAINTEXT) and difference (listener - PLAINTEXT)."""
    plain = samples["PLAINTEXT"]
    cost: dict[str, dict[str, dict[str, float]]] = {}
    for listener, results in samples.items():
        if listener == "PLAINTEXT":
            continue
        pairs = list(zip(results, plain, strict=True))
        cost[listener] = {
            name: {
                "ratio": _median_ratio([(t[name], p[name]) for t, p in pairs]),
                "difference": round(statistics.median(t[name] - p[name] for t, p in pairs), 4),
            }
            for name in MEASURES
        }
    return cost


def _median_ratio(pairs: list[tuple[float, float]]) -> float:
    """The median of ``tls / plain`` over the rounds whose plaintext figure is not 0 (a
    CPU time below the clock's tick); 0 when there is none."""
    ratios = [tls / plain for tls, plain in pairs if plain]
    return round(statistics.median(ratios), 3) if ratios else 0.0


def run(args: argparse.Namespace, listeners: list[str]) -> dict[str, Any]:
    try:
        broker = TlsBroker()
    except Exception as exc:
        raise CompareError(f"the broker did not start: {exc}") from exc
    try:
        create_topic(broker)
        samples, medians = rounds(
            listeners, args.runs, lambda listener: measure_once(broker, listener, args)
        )
    finally:
        broker.close()
    return {
        "benchmark": "tls",
        "records": args.num_records,
        "record_size": args.record_size,
        "rate": args.rate,
        "seconds": args.seconds,
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "median": medians,
        "tls_cost_vs_plaintext": tls_cost(samples),
        "samples": samples,
    }


def main(args: argparse.Namespace) -> int:
    try:
        import confluent_kafka  # noqa: F401
        import trustme  # noqa: F401
    except ImportError as exc:
        _progress(f"purgatory perf tls: needs {exc.name} (pip install {exc.name})")
        return 1
    listeners = [n.strip().upper() for n in args.listeners.split(",") if n.strip()]
    if "PLAINTEXT" not in listeners or set(listeners) - set(LISTENERS):
        _progress("purgatory perf tls: --listeners takes PLAINTEXT and any of SSL, SASL_SSL")
        return 2
    if min(args.runs, args.num_records, args.record_size, args.rate) < 1 or args.seconds <= 0:
        _progress(
            "purgatory perf tls: --runs, --num-records, --record-size and --rate must be >= 1, "
            "--seconds > 0"
        )
        return 2
    try:
        result = run(args, listeners)
    except CompareError as exc:
        _progress(f"purgatory perf tls: {exc}")
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0
