"""Arguments of the testing package's commands: `purgatory certs` and the benchmarks
(`purgatory perf cluster-start`, `scale`, `soak`, `compare`, `transactions`,
`rebalance-join`, `tls`)."""

from __future__ import annotations

from typing import Any

from purgatory.common.lazy_command import lazy


def add_commands(sub: Any) -> None:
    certs = sub.add_parser(
        "certs",
        help="write a test CA, a broker certificate and client certificates as Kafka's PEM "
        "stores, and print the broker and client configs that use them",
    )
    certs.add_argument("--out", required=True, metavar="DIR", help="directory to write into")
    certs.add_argument(
        "--broker-host",
        action="append",
        metavar="HOST",
        help="a host name or address the broker certificate is valid for, repeatable "
        "(default: 127.0.0.1 and localhost)",
    )
    certs.add_argument(
        "--client",
        action="append",
        metavar="NAME",
        help="write client-NAME.pem, a client certificate with CN=NAME, repeatable",
    )
    certs.add_argument(
        "--key-password",
        metavar="P",
        help="encrypt the private keys with this password (ssl.key.password)",
    )
    certs.set_defaults(func=lazy("purgatory.testing.certs", "certs_command"))


def add_perf_commands(sub: Any) -> None:
    start = sub.add_parser(
        "cluster-start",
        help="what a test suite pays for a cluster of its own: a Cluster ready, a first "
        "topic, a per-test topic, in thread and process mode",
    )
    start.add_argument("--brokers", type=int, default=3, help="brokers per cluster (default 3)")
    start.add_argument(
        "--modes", default="thread,process", help="thread and/or process (default both)"
    )
    start.add_argument("--runs", type=int, default=5, help="clusters started per mode (default 5)")
    start.add_argument(
        "--topics", type=int, default=50, help="per-test topics created per cluster (default 50)"
    )
    start.add_argument("--partitions", type=int, default=1, help="partitions per topic (default 1)")
    start.add_argument("--json", action="store_true", help="one line of JSON")
    start.set_defaults(func=lazy("purgatory.testing.startup_bench", "main"))

    scale = sub.add_parser(
        "scale",
        help="cost as the work grows: partitions, idle connections, parked fetches, broker "
        "start, many brokers",
    )
    scale.add_argument(
        "--modes",
        default="partitions,connections,parked-fetches,start",
        help="any of partitions, connections, parked-fetches, start, brokers (default all "
        "but brokers)",
    )
    scale.add_argument(
        "--partition-counts",
        type=_counts,
        default=[10, 100, 1000, 10000],
        help="partitions of the produced topic, in turn (default 10,100,1000,10000)",
    )
    scale.add_argument(
        "--connection-counts",
        type=_counts,
        default=[1, 100, 1000, 10000],
        help="idle connections open, in turn (default 1,100,1000,10000)",
    )
    scale.add_argument(
        "--requests", type=int, default=30000, help="produce requests per step (default 30000)"
    )
    scale.add_argument(
        "--fetches", type=int, default=10000, help="parked fetches, one per connection"
    )
    scale.add_argument("--runs", type=int, default=5, help="broker starts timed (default 5)")
    scale.add_argument(
        "--brokers", type=int, default=50, help="brokers of the brokers mode (default 50)"
    )
    scale.add_argument("--json", action="store_true", help="one line of JSON")
    scale.set_defaults(func=lazy("purgatory.testing.scale_bench", "main"))

    soak = sub.add_parser(
        "soak",
        help="an hour of mixed load (acks=all produce, a consumer group with churn, long "
        "polls) on broker processes: RSS and latency percentiles per minute",
    )
    soak.add_argument("--duration", type=float, default=3600, help="seconds of load (3600)")
    soak.add_argument("--interval", type=float, default=60, help="seconds per row (60)")
    soak.add_argument("--brokers", type=int, default=3, help="broker processes (default 3)")
    soak.add_argument("--partitions", type=int, default=6, help="partitions of the topic (6)")
    soak.add_argument("--rate", type=float, default=1000, help="records/s in all (1000)")
    soak.add_argument("--producers", type=int, default=2, help="producers sharing the rate (2)")
    soak.add_argument("--record-size", type=int, default=100, help="bytes per record (100)")
    soak.add_argument(
        "--retention-bytes",
        type=int,
        default=8 << 20,
        help="retention.bytes of the topic, per partition (8 MiB; segments of 1 MiB)",
    )
    soak.add_argument("--members", type=int, default=3, help="consumer group members (3)")
    soak.add_argument(
        "--churn-every",
        type=float,
        default=300,
        help="seconds between replacing a group member (300; 0: never)",
    )
    soak.add_argument(
        "--long-polls", type=int, default=100, help="connections long-polling an empty topic"
    )
    soak.add_argument("--out", help="directory for soak.json and soak.png")
    soak.add_argument("--json", action="store_true", help="one line of JSON")
    soak.set_defaults(func=lazy("purgatory.testing.soak_bench", "main"))

    compare = sub.add_parser(
        "compare",
        help="Purgatory beside Apache Kafka, franz-go's kfake and librdkafka's mock cluster "
        "with the same client: start to first record, produce and consume throughput, "
        "end-to-end latency, RSS",
        description="Starts each system in turn (--brokers each; Kafka from `make "
        "kafka-jars`, kfake from `make go-clients`), measures it with confluent-kafka and "
        "stops it; --runs rounds with the order rotating; prints the medians, Purgatory's "
        "ratios to Kafka against issue 44's targets, and every sample as JSON.",
    )
    compare.add_argument(
        "--systems",
        default="purgatory,kafka,kfake,mock",
        help="any of purgatory, kafka, kfake, mock (default all four)",
    )
    compare.add_argument("--brokers", type=int, default=3, help="brokers per system (3)")
    compare.add_argument("--runs", type=int, default=3, help="rounds of all systems (3)")
    compare.add_argument(
        "--num-records", type=int, default=200000, help="records per throughput phase (200000)"
    )
    compare.add_argument("--record-size", type=int, default=100, help="bytes per value (100)")
    compare.add_argument("--rate", type=int, default=200, help="records/s, latency phase (200)")
    compare.add_argument(
        "--seconds", type=float, default=5.0, help="length of the latency phase (5)"
    )
    output = compare.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one line of JSON")
    output.add_argument(
        "--markdown", action="store_true", help="the medians as a Markdown table, not JSON"
    )
    compare.set_defaults(func=lazy("purgatory.testing.compare_bench", "main"))

    txn = sub.add_parser(
        "transactions",
        help="what a transaction costs beside Apache Kafka (and kfake, librdkafka's mock): "
        "commit latency, commit to read_committed visibility, transactional against "
        "idempotent produce throughput",
        description="Starts each system in turn (--brokers each), measures it with "
        "confluent-kafka and stops it; --runs rounds with the order rotating; prints the "
        "medians and every sample as JSON.",
    )
    txn.add_argument(
        "--systems", default="purgatory,kafka", help="any of purgatory, kafka, kfake, mock"
    )
    txn.add_argument("--brokers", type=int, default=3, help="brokers per system (3)")
    txn.add_argument("--runs", type=int, default=3, help="rounds of all systems (3)")
    txn.add_argument(
        "--transactions", type=int, default=200, help="transactions timed one by one (200)"
    )
    txn.add_argument(
        "--num-records", type=int, default=100000, help="records per throughput phase (100000)"
    )
    txn.add_argument("--batch", type=int, default=1000, help="records per transaction (1000)")
    txn.add_argument("--record-size", type=int, default=100, help="bytes per value (100)")
    txn_output = txn.add_mutually_exclusive_group()
    txn_output.add_argument("--json", action="store_true", help="one line of JSON")
    txn_output.add_argument(
        "--markdown", action="store_true", help="the medians as a Markdown table, not JSON"
    )
    txn.set_defaults(func=lazy("purgatory.testing.transaction_bench", "main"))

    join = sub.add_parser(
        "rebalance-join",
        help="what a member joining a consumer group costs the others: classic eager range, "
        "classic cooperative-sticky and KIP-848's consumer protocol side by side (rebalance "
        "round, the new member's first record, gaps on partitions that stayed)",
        description="Starts Purgatory (and with --kafka Apache Kafka) with --brokers each; "
        "per run and protocol, the protocols' order rotating, a fresh topic with a steady "
        "producer and --members confluent-kafka consumers, then one more member joins; "
        "prints the medians and every sample as JSON, and fails unless every acknowledged "
        "record was consumed.",
    )
    join.add_argument(
        "--protocols",
        default="classic-range,classic-cooperative-sticky,consumer",
        help="any of classic-range, classic-cooperative-sticky, consumer (default all three)",
    )
    join.add_argument("--kafka", action="store_true", help="also measure Apache Kafka")
    join.add_argument("--brokers", type=int, default=3, help="brokers per system (3)")
    join.add_argument("--runs", type=int, default=3, help="rounds of every protocol (3)")
    join.add_argument("--partitions", type=int, default=12, help="partitions of the topic (12)")
    join.add_argument("--rate", type=int, default=2000, help="records/s produced (2000)")
    join.add_argument("--members", type=int, default=3, help="members before the join (3)")
    join.add_argument(
        "--steady",
        type=float,
        default=3.0,
        help="seconds of steady reading before the join, the gaps' baseline (3)",
    )
    join.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="seconds without an assignment change that end a round (3)",
    )
    join.add_argument(
        "--timeout", type=float, default=120.0, help="seconds any step may take (120)"
    )
    join_output = join.add_mutually_exclusive_group()
    join_output.add_argument("--json", action="store_true", help="one line of JSON")
    join_output.add_argument(
        "--markdown", action="store_true", help="the medians as a Markdown table, not JSON"
    )
    join.set_defaults(func=lazy("purgatory.testing.rebalance_bench", "main"))

    tls = sub.add_parser(
        "tls",
        help="what TLS costs produce: the same idempotent acks=all workload on a PLAINTEXT, "
        "an SSL and a SASL_SSL (SCRAM-SHA-512) listener of one broker, side by side",
        description="Starts one broker with the three listeners; --runs rounds, each "
        "producing with confluent-kafka on every listener in turn (the order rotating); "
        "prints each listener's medians (records/s, MB/s, produce p50/p99, broker CPU "
        "seconds per MB), the TLS cost against PLAINTEXT and every sample as JSON.",
    )
    tls.add_argument(
        "--listeners",
        default="PLAINTEXT,SSL,SASL_SSL",
        help="PLAINTEXT and any of SSL, SASL_SSL (default all three)",
    )
    tls.add_argument("--runs", type=int, default=5, help="rounds of all listeners (5)")
    tls.add_argument(
        "--num-records", type=int, default=200000, help="records per throughput phase (200000)"
    )
    tls.add_argument("--record-size", type=int, default=1000, help="bytes per value (1000)")
    tls.add_argument("--rate", type=int, default=500, help="records/s, latency phase (500)")
    tls.add_argument("--seconds", type=float, default=4.0, help="length of the latency phase (4)")
    tls.add_argument("--json", action="store_true", help="one line of JSON")
    tls.set_defaults(func=lazy("purgatory.testing.tls_bench", "main"))


def _counts(text: str) -> list[int]:
    """``10,100,1000`` as [10, 100, 1000]; argparse turns a ValueError into a usage error."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise ValueError(text)
    return counts
