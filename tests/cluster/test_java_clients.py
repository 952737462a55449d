"""Apache Kafka's Java client (kafka-clients 4.x and 3.x, unmodified) against a 3-broker
Purgatory: an idempotent producer, a group consumer on the classic protocol, two members
splitting a topic and one taking it all when the other leaves, on the classic protocol and
(4.x) on KIP-848's consumer protocol with describeConsumerGroups, the AdminClient (with
describeLogDirs, describeProducers and describeTopics paged by DescribeTopicPartitions),
topics made with Kafka Streams' configs and a LogAppendTime lz4 topic, config changes
(incrementalAlterConfigs of a topic and of the brokers' cluster-wide default), transactions
(commit and abort as each isolation level reads them, offsets sent to a transaction, a
zombie fenced), and a Kafka Streams application (a repartition and a count, restarted onto
its changelog; and exactly_once_v2).

Each scenario is one JVM running one program of tests/java (`make java-clients` builds
them), which prints what the client saw as JSON. JAVA_CLIENT_LOG_LEVEL=debug shows the
client's own log on a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from purgatory.testing import Cluster

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
# Keep in step with JAVA_CLIENT_VERSIONS in the Makefile.
VERSIONS = ["4.1.1", "3.9.1"]
LOG_LEVEL = os.environ.get("JAVA_CLIENT_LOG_LEVEL", "warn")
COUNT = 30
PARTITIONS = 3


def classpath(version: str) -> str:
    """The built programs and their dependencies for one client version, or skip."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the Java client tests need a Java 17+ runtime")
    built = ROOT / "build" / "java-clients" / version
    listed = built / "classpath.txt"
    if not listed.is_file():
        pytest.skip(
            f"the Java client programs for kafka-clients {version} are not built: "
            "`make java-clients` builds them (a JDK, Maven, and Maven Central the first time)"
        )
    return f"{built / 'classes'}{os.pathsep}{listed.read_text().strip()}"


def run(version: str, scenario: str, cluster: Cluster, **options: object) -> dict[str, Any]:
    return run_scenario(version, scenario, cluster.bootstrap_servers, **options)


def run_scenario(
    version: str, scenario: str, bootstrap: str, *, errors_expected: bool = False, **options: object
) -> dict[str, Any]:
    """One JVM running one scenario against ``bootstrap``; its JSON answer. The client
    logging an ERROR fails, unless ``errors_expected``."""
    command = [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={LOG_LEVEL}",
        "-cp",
        classpath(version),
        "dev.purgatory.javaclients.JavaClients",
        scenario,
        "--bootstrap",
        bootstrap,
    ]
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    log = done.stderr[-20000:]
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (
        f"{scenario} exited {done.returncode}:\n{done.stdout}\n{log}"
    )
    result: dict[str, Any] = json.loads(lines[-1])
    assert result["client_version"] == version
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert errors_expected or not errors, f"the Java client logged errors:\n{log}"
    return result


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as started:
        yield started


@pytest.fixture(scope="module", params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    classpath(request.param)  # skip before anything starts
    return str(request.param)


@pytest.fixture(scope="module")
def produced(version: str, cluster: Cluster) -> dict[str, Any]:
    topic = f"java-produce-{version}"
    cluster.create_topic(topic, partitions=PARTITIONS)
    result = run(version, "produce", cluster, topic=topic, count=COUNT)
    result["topic"] = topic
    return result


def test_an_idempotent_producer_has_every_record_acknowledged_in_order_per_partition(
    produced: dict[str, Any], cluster: Cluster
) -> None:
    acks = produced["acknowledged"]
    assert [a["seq"] for a in acks] == list(range(COUNT))
    assert produced["record-error-total"] == 0 and produced["record-retry-total"] == 0
    for partition in range(PARTITIONS):
        sent = [a for a in acks if a["partition"] == partition]
        assert sent, f"no record went to partition {partition}"
        # Acknowledged at consecutive offsets in the order sent: nothing lost, nothing twice.
        assert [a["offset"] for a in sent] == list(range(len(sent)))
        stored = cluster.records(produced["topic"], partition)
        assert [(o, k, v) for o, k, v in stored] == [
            (a["offset"], a["key"].encode(), f"value-{a['seq']}".encode()) for a in sent
        ]


def test_a_group_consumer_reads_every_record_with_its_headers_and_commits_its_position(
    version: str, cluster: Cluster, produced: dict[str, Any]
) -> None:
    topic = produced["topic"]
    result = run(
        version, "consume", cluster, topic=topic, group=f"java-consume-{version}", count=COUNT
    )
    assert result["assignments"] == [list(range(PARTITIONS))]
    assert result["generation"] >= 1 and result["member_id"].startswith("java-consumer-")
    records = result["records"]
    assert len(records) == COUNT
    acked = {a["seq"]: a for a in produced["acknowledged"]}
    ends = {}
    for partition in range(PARTITIONS):
        read = [r for r in records if r["partition"] == partition]
        assert [r["offset"] for r in read] == list(range(len(read)))
        for r in read:
            seq = int(r["key"].removeprefix("key-"))
            assert r["value"] == f"value-{seq}"
            assert r["headers"] == [["seq", str(seq)], ["source", "java"]]
            assert (acked[seq]["partition"], acked[seq]["offset"]) == (partition, r["offset"])
            assert r["timestamp"] == acked[seq]["timestamp"]
        ends[str(partition)] = len(read)
    assert result["committed"] == ends
    assert result["end_offsets"] == ends


def test_two_members_split_the_partitions_and_one_takes_them_all_when_the_other_leaves(
    version: str, cluster: Cluster
) -> None:
    topic, partitions, count = f"java-group-{version}", 4, 40
    cluster.create_topic(topic, partitions=partitions)
    result = run(
        version,
        "group",
        cluster,
        topic=topic,
        group=f"java-group-{version}",
        partitions=partitions,
        count=count,
    )
    everything = list(range(partitions))
    assert result["alone"] == everything
    first, second = result["split"]["first"], result["split"]["second"]
    assert first and second and sorted(first + second) == everything
    for member, owned in (("first", first), ("second", second)):
        read = result["split_read"][member]
        assert {r["partition"] for r in read} == set(owned), member
        assert len(read) == count // partitions * len(owned)
    per_partition = count // partitions
    assert result["second_committed"] == {str(p): per_partition for p in second}
    assert result["after_leave"] == everything
    # The survivor reads only what came after the leave: it starts where each partition's
    # previous owner committed, so nothing is read twice.
    after = result["after_leave_read"]
    assert len(after) == count
    assert sorted((r["partition"], r["offset"]) for r in after) == [
        (p, per_partition + i) for p in everything for i in range(per_partition)
    ]
    assert all(r["key"].startswith("after-leave-") for r in after)
    assert result["first_committed"] == {str(p): 2 * per_partition for p in everything}
    events = result["events"]
    assert events["second"][0] == {"event": "assigned", "partitions": second}
    assert events["second"][-1] == {"event": "revoked", "partitions": second}
    assigned = [e["partitions"] for e in events["first"] if e["event"] == "assigned"]
    assert assigned[0] == everything and first in assigned and assigned[-1] == everything
    assert not [e for e in events["first"] + events["second"] if e["event"] == "lost"]


def test_two_members_on_the_consumer_protocol_split_the_partitions_and_one_takes_over(
    version: str, cluster: Cluster
) -> None:
    """KIP-848's consumer group protocol (group.protocol=consumer): the coordinator assigns,
    each member reconciles by heartbeat, and describeConsumerGroups (ConsumerGroupDescribe)
    shows a CONSUMER group. kafka-clients 3.9's consumer protocol was a preview (KIP-848 was
    production-ready from 4.0): only 4.x runs it."""
    if int(version.split(".")[0]) < 4:
        pytest.skip(f"kafka-clients {version}: the consumer protocol is a preview before 4.0")
    topic, partitions, count = f"java-848-{version}", 4, 40
    cluster.create_topic(topic, partitions=partitions)
    result = run(
        version,
        "group",
        cluster,
        topic=topic,
        group=f"java-848-{version}",
        partitions=partitions,
        count=count,
        group_protocol="consumer",
    )
    everything = list(range(partitions))
    assert result["alone"] == everything
    first, second = result["split"]["first"], result["split"]["second"]
    assert first and second and sorted(first + second) == everything
    per_partition = count // partitions
    for member, owned in (("first", first), ("second", second)):
        read = result["split_read"][member]
        assert sorted((r["partition"], r["offset"]) for r in read) == [
            (p, i) for p in owned for i in range(per_partition)
        ], member
    assert result["second_committed"] == {str(p): per_partition for p in second}
    # The coordinator's view, once both members have acknowledged what they own.
    described = result["described_split"]
    assert (described["type"], described["state"], described["assignor"]) == (
        "CONSUMER",
        "STABLE",
        "uniform",
    )
    members = described["members"]
    assert sorted(members) == ["java-first", "java-second"]
    assert members["java-first"]["partitions"] == first
    assert members["java-second"]["partitions"] == second
    assert all(m["host"] == "/127.0.0.1" and m["consumer_id"] for m in members.values())
    assert members["java-first"]["consumer_id"] != members["java-second"]["consumer_id"]

    assert result["after_leave"] == everything
    after = result["after_leave_read"]
    assert sorted((r["partition"], r["offset"]) for r in after) == [
        (p, per_partition + i) for p in everything for i in range(per_partition)
    ]
    assert all(r["key"].startswith("after-leave-") for r in after)
    assert result["first_committed"] == {str(p): 2 * per_partition for p in everything}
    left = result["described_after_leave"]
    assert (left["type"], left["state"]) == ("CONSUMER", "STABLE")
    assert list(left["members"]) == ["java-first"]
    assert left["members"]["java-first"]["partitions"] == everything
    assert left["members"]["java-first"]["consumer_id"] == members["java-first"]["consumer_id"]
    # The consumer protocol's callbacks are incremental: each names only what changed, and
    # every reconciliation ends with onPartitionsAssigned, of nothing new if need be.
    events = {
        m: [(e["event"], e["partitions"]) for e in result["events"][m]] for m in result["events"]
    }
    assert events == {
        "first": [
            ("assigned", everything),
            ("revoked", second),
            ("assigned", []),
            ("assigned", second),
            ("revoked", everything),  # as it closes
        ],
        "second": [("assigned", []), ("assigned", second), ("revoked", second)],
    }


def test_the_admin_client_manages_topics_and_groups_and_names_errors_as_kafka_does(
    version: str, cluster: Cluster
) -> None:
    topic, group, missing = f"java-admin-{version}", f"java-admin-{version}", "java-no-such-topic"
    result = run(
        version,
        "admin",
        cluster,
        topic=topic,
        group=group,
        missing_topic=missing,
        partitions=PARTITIONS,
    )
    create = result["create"]
    assert (create["partitions"], create["replication_factor"]) == (PARTITIONS, 3)
    assert create["retention_ms"] == "3600000"
    described = result["describe_topic"]
    assert described["name"] == topic and described["topic_id"] == create["topic_id"]
    assert not described["internal"]
    assert [p["partition"] for p in described["partitions"]] == list(range(PARTITIONS))
    for p in described["partitions"]:
        assert sorted(p["replicas"]) == [0, 1, 2] and sorted(p["isr"]) == [0, 1, 2]
        assert p["leader"] in p["replicas"]
    assert result["describe_configs"] == {
        "retention_ms": "3600000",
        "retention_ms_source": "DYNAMIC_TOPIC_CONFIG",
    }
    described_cluster = result["describe_cluster"]
    ports = [int(a.rsplit(":", 1)[1]) for a in cluster.bootstrap_servers.split(",")]
    assert described_cluster["nodes"] == [
        {"id": i, "host": "127.0.0.1", "port": port} for i, port in enumerate(ports)
    ]
    assert described_cluster["controller"] in (0, 1, 2) and described_cluster["cluster_id"]
    assert topic in result["list_topics"]
    assert not [t for t in result["list_topics"] if t.startswith("__")]  # internal ones hidden
    offsets = result["list_offsets"]
    assert (offsets["earliest_0"], offsets["latest_0"], offsets["latest_1"]) == (0, 5, 0)
    assert 0 <= offsets["max_timestamp_0"] <= 4
    listed = {g["group_id"]: g for g in result["list_groups"]}
    assert listed[group] == {"group_id": group, "simple": False, "state": "Stable"}
    stable = result["describe_group"]
    assert (stable["state"], stable["assignor"], stable["simple"]) == ("Stable", "range", False)
    [member] = stable["members"]
    assert member["client_id"] == "java-admin-consumer"
    assert member["assignment"] == list(range(PARTITIONS))
    assert stable["coordinator"] in (0, 1, 2)
    left = result["describe_group_after_leave"]
    assert (left["state"], left["members"]) == ("Empty", [])
    # Partition 0 had the 5 records; the others, empty, are committed at 0 if at all (the
    # consumer commits the positions it has, and may not have one yet for an empty partition).
    assert result["group_offsets"]["0"] == 5
    assert {v for k, v in result["group_offsets"].items() if k != "0"} <= {0}
    errors = {e["operation"]: e["exception"] for e in result["errors"]}
    assert errors == {
        "create_existing": "TopicExistsException",
        "describe_missing": "UnknownTopicOrPartitionException",
        "delete_missing": "UnknownTopicOrPartitionException",
    }
    assert result["after_delete"] == {
        "listed": False,
        "describe": "UnknownTopicOrPartitionException",
    }


def test_the_admin_client_describes_log_dirs_producers_and_topics_page_by_page(
    version: str, cluster: Cluster
) -> None:
    """describeLogDirs, describeProducers, and describeTopics paged one partition per
    DescribeTopicPartitions answer (the client follows the cursor)."""
    topic = f"java-log-info-{version}"
    result = run(version, "log-info", cluster, topic=topic, partitions=PARTITIONS, count=4)
    # Every broker holds a replica of every partition, in its one in-memory log dir.
    assert sorted(result["log_dirs"]) == ["0", "1", "2"]
    for broker, dirs in result["log_dirs"].items():
        assert list(dirs) == [f"memory:/broker-{broker}"]
        (described,) = dirs.values()
        assert described["error"] is None
        assert described["total_bytes"] is not None and described["usable_bytes"] is not None
        replicas = described["replicas"]
        assert sorted(replicas) == [str(p) for p in range(PARTITIONS)]
        assert all(r["offset_lag"] == 0 and not r["future"] for r in replicas.values())
        assert replicas["1"]["size"] == 0
    assert {
        dirs[f"memory:/broker-{b}"]["replicas"]["0"]["size"]
        for b, dirs in result["log_dirs"].items()
    } != {0}
    # The idempotent producer wrote partition 0 only: sequences 0..3, no transaction.
    (state,) = result["producers"]["0"]
    assert (state["producer_epoch"], state["last_sequence"]) == (0, 3)
    assert state["producer_id"] >= 0 and state["last_timestamp"] > 0
    assert (state["coordinator_epoch"], state["txn_start_offset"]) == (None, None)
    assert all(result["producers"][str(p)] == [] for p in range(1, PARTITIONS))
    assert [p["partition"] for p in result["described_partitions"]] == list(range(PARTITIONS))
    assert all(
        p["leader"] in (0, 1, 2) and (p["replicas"], p["isr"]) == (3, 3)
        for p in result["described_partitions"]
    )


def test_the_admin_client_creates_kafka_streams_topics_and_a_log_append_time_topic(
    version: str, cluster: Cluster
) -> None:
    """Kafka Streams' changelog and repartition configs through createTopics, read back
    from CreateTopicsResult.config and describeConfigs; a bad config refused in Kafka's
    words; a LogAppendTime topic in lz4 stamping a gzip producer's records, which the Java
    consumer (Kafka's strict lz4 reader) reads."""
    result = run(version, "topic-configs", cluster, prefix=f"java-streams-{version}")
    assert result["created_changelog"]["cleanup.policy"] == "compact"
    assert result["created_changelog"]["max.compaction.lag.ms"] == "9223372036854775807"
    changelog = result["changelog"]
    assert changelog["cleanup.policy"] == {
        "value": "compact",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "type": "LIST",
        "synonyms": [
            "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact",
            "DEFAULT_CONFIG:log.cleanup.policy=delete",
        ],
    }
    assert changelog["min.cleanable.dirty.ratio"]["type"] == "DOUBLE"
    # As Kafka: no broker synonym before log.roll.ms, which has no default.
    assert changelog["segment.ms"]["synonyms"] == ["DYNAMIC_TOPIC_CONFIG:segment.ms=604800000"]
    repartition = result["repartition"]
    assert {k: v["value"] for k, v in repartition.items()} == {
        "cleanup.policy": "delete",
        "segment.bytes": "52428800",
        "retention.ms": "-1",
        "message.timestamp.type": "CreateTime",
    }
    assert repartition["retention.ms"]["type"] == "LONG"
    assert result["refused"] == {
        "error": "InvalidConfigurationException",
        "message": "Invalid value shred for configuration cleanup.policy: String must be one "
        "of: compact, delete",
    }
    stamped = result["stamped"]
    low, high = stamped["window"]
    assert [r["value"] for r in stamped["records"]] == ["v0", "v1", "v2"]
    for record in stamped["records"]:
        assert record["timestamp_type"] == "LOG_APPEND_TIME"
        assert low <= record["timestamp"] <= high
    assert all(low <= t <= high for t in stamped["acknowledged"])  # log_append_time


def test_a_consumer_validates_its_position_with_offset_for_leader_epoch_after_a_leader_change(
    version: str, cluster: Cluster, tmp_path: Path
) -> None:
    """KIP-320: the consumer reads 5 records, the partition's leadership moves (a new
    leader epoch), and it validates its position (OffsetForLeaderEpoch) before reading the
    next 5: every record once, in order, the later ones under the new epoch."""
    topic, count = f"java-validate-{version}", 5
    cluster.create_topic(topic, partitions=1)
    go = tmp_path / "leader-moved"
    served_before = _offset_for_leader_epoch_requests(cluster)
    command = [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={LOG_LEVEL}",
        "-cp",
        classpath(version),
        "dev.purgatory.javaclients.JavaClients",
        "validate",
        *("--bootstrap", cluster.bootstrap_servers, "--topic", topic),
        *("--count", str(count), "--go-file", str(go)),
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as jvm:
        try:
            assert jvm.stdout is not None
            assert jvm.stdout.readline().strip() == "READY"
            before = cluster.partition(topic)
            other = next(r for r in before.replicas if r != before.leader)
            cluster.elect_leader(topic, 0, other)
            go.touch()
            out, err = jvm.communicate(timeout=120)
        finally:
            if jvm.poll() is None:
                jvm.kill()
    assert jvm.returncode == 0, f"validate exited {jvm.returncode}:\n{out}\n{err[-20000:]}"
    records = json.loads(out.strip().splitlines()[-1])["records"]
    assert [(r["offset"], r["value"]) for r in records] == [
        (i, f"value-{i}") for i in range(2 * count)
    ]
    assert records[-1]["leader_epoch"] > records[0]["leader_epoch"]
    assert _offset_for_leader_epoch_requests(cluster) > served_before


def _offset_for_leader_epoch_requests(cluster: Cluster) -> float:
    return sum(
        value
        for b in range(3)
        for (name, labels), value in cluster.metrics(b).items()
        if name == "purgatory_requests_total"
        and ("request", "OffsetForLeaderEpoch") in labels
        and ("listener", "PURGATORY") not in labels  # the followers' own, on our protocol
    )


def test_the_admin_client_changes_topic_configs_and_the_brokers_default(
    version: str, cluster: Cluster
) -> None:
    """incrementalAlterConfigs (issue 45): a topic's retention.ms set and cleanup.policy
    appended to, described as DYNAMIC_TOPIC_CONFIG; a bad value refused in Kafka's words;
    the cluster-wide default broker resource set (DYNAMIC_DEFAULT_BROKER_CONFIG) and
    deleted."""
    result = run(version, "alter-configs", cluster, topic=f"java-altered-{version}")
    assert result["retention.ms"] == {"value": "60000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert result["cleanup.policy"] == {
        "value": "delete,compact",
        "source": "DYNAMIC_TOPIC_CONFIG",
    }
    assert result["refused"] == {
        "error": "InvalidConfigurationException",
        "message": "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    }
    assert result["default"] == {
        "value": "123456789",
        "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
    }
    assert result["default_after_delete"] is None


WORDS = ["apple", "banana", "cherry", "damson", "elder"]


def _produce_words(cluster: Cluster, topic: str, first: int, count: int) -> None:
    """Records writer-i -> WORDS[i % 5] for i in [first, first + count), all acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, WORDS[i % len(WORDS)].encode(), key=f"writer-{i}".encode())
    assert producer.flush(30) == 0


def _counts_written(cluster: Cluster, topic: str) -> dict[str, list[int]]:
    """Every count the application wrote to its output topic, per word in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p))[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        written: dict[str, list[int]] = {}
        read = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 15
        while any(read[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"{topic}: read {read} of {ends} in 15 s"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            read[message.partition()] = message.offset() + 1
            count = int.from_bytes(message.value(), "big", signed=True)
            written.setdefault(message.key().decode(), []).append(count)
        return written
    finally:
        consumer.close()


def _topic_configs(cluster: Cluster, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(timeout=15)
    return {name: entry.value for name, entry in described.items()}


def _word_count(
    version: str,
    cluster: Cluster,
    application: str,
    expected: int,
    state_dir: Path,
    **options: object,
) -> dict[str, Any]:
    """One run of StreamsWordCount from ``<application>-input`` to ``<application>-output``
    until its counts add up to ``expected``."""
    return run(
        version,
        "streams-word-count",
        cluster,
        application_id=application,
        input=f"{application}-input",
        output=f"{application}-output",
        expected=expected,
        partitions=PARTITIONS,
        state_dir=state_dir,
        **options,
    )


def test_a_kafka_streams_application_counts_words_and_resumes_from_its_changelog(
    version: str, cluster: Cluster, tmp_path: Path
) -> None:
    """Kafka Streams (at_least_once) groups words by a new key and counts them: it creates
    its repartition and changelog topics with the configs it asks for, purges the
    repartition topic with DeleteRecords, and writes each word's count. A second run of the
    same application.id, with an empty state.dir, restores the store from the changelog and
    resumes from the committed offsets: the counts go on, none repeated, none doubled.
    DeleteRecords' purge moves the log start of the repartition topic on every replica."""
    application = f"java-streams-wc-{version}-{uuid.uuid4().hex[:8]}"
    source, sink = f"{application}-input", f"{application}-output"
    cluster.create_topic(source, partitions=PARTITIONS)
    cluster.create_topic(sink, partitions=PARTITIONS)
    first, second = 60, 40

    def count_words(expected: int, state_dir: Path) -> dict[str, Any]:
        return _word_count(version, cluster, application, expected, state_dir)

    _produce_words(cluster, source, 0, first)
    result = count_words(expected=first, state_dir=tmp_path / "first")
    assert result["counts"] == dict.fromkeys(WORDS, first // len(WORDS))
    assert "RUNNING" in result["states"]
    assert (result["closed"], result["state"]) == (True, "NOT_RUNNING")
    purged = {int(p): start for p, start in result["repartition_log_starts"].items() if start > 0}
    assert purged, result["repartition_log_starts"]
    cluster.wait_for(
        lambda: all(
            (replica := cluster.state(broker).replica(f"{application}-counts-repartition", p))
            is not None
            and replica.log_start_offset >= start
            for broker in range(3)
            for p, start in purged.items()
        ),
        message=f"every replica of the repartition topic to start at {purged} or later",
    )
    repartition = _topic_configs(cluster, f"{application}-counts-repartition")
    assert {k: repartition[k] for k in ("cleanup.policy", "retention.ms")} == {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
    }
    assert repartition["message.timestamp.type"] == "CreateTime"
    assert repartition["segment.bytes"] == "52428800"
    changelog = _topic_configs(cluster, f"{application}-counts-changelog")
    assert changelog["cleanup.policy"] == "compact"
    assert changelog["message.timestamp.type"] == "CreateTime"

    _produce_words(cluster, source, first, second)
    result = count_words(expected=first + second, state_dir=tmp_path / "second")
    total = (first + second) // len(WORDS)
    assert result["counts"] == dict.fromkeys(WORDS, total)
    assert (result["closed"], result["state"]) == (True, "NOT_RUNNING")
    assert _counts_written(cluster, sink) == {word: list(range(1, total + 1)) for word in WORDS}


COMMITTED = [f"committed-{i}" for i in range(10)]
ABORTED = [f"aborted-{i}" for i in range(5)]


def test_a_transactional_producer_commits_and_aborts_and_read_committed_sees_only_the_commit(
    version: str, cluster: Cluster
) -> None:
    """10 records committed, 5 sent and aborted: read_committed reads the 10, up to the last
    stable offset; read_uncommitted all 15; neither is handed a control record (the two
    markers take offsets 10 and 16)."""
    topic = f"java-txn-{version}"
    cluster.create_topic(topic, partitions=1)
    result = run(version, "txn-commit-abort", cluster, topic=topic, transactional_id=topic)
    assert result["read_committed"] == {"values": COMMITTED, "end_offset": 17}
    assert result["read_uncommitted"] == {"values": COMMITTED + ABORTED, "end_offset": 17}


def test_offsets_sent_to_a_transaction_become_the_groups_only_when_it_commits(
    version: str, cluster: Cluster
) -> None:
    """Consume-transform-produce: a member reads 3 records and a transaction writes them on
    with the member's position (sendOffsetsToTransaction with its group metadata). Aborted,
    the group has no committed offset and the member reads the 3 again; committed, the
    group's offset is 3. The output holds both attempts, read_committed only the second.
    Offsets sent with metadata of an older generation are refused."""
    name = f"java-txn-offsets-{version}"
    source, sink = f"{name}-input", f"{name}-output"
    cluster.create_topic(source, partitions=1)
    cluster.create_topic(sink, partitions=1)
    result = run(
        version,
        "txn-send-offsets",
        cluster,
        input=source,
        output=sink,
        group=name,
        transactional_id=name,
    )
    first = [f"in-{i}" for i in range(3)]
    assert result["abort"] == {"read": first, "next": 3, "during": None, "after": None}
    assert result["commit"] == {"read": first, "next": 3, "during": None, "after": 3}
    # KIP-447: the member's metadata of an older generation is refused (ILLEGAL_GENERATION).
    assert result["stale_generation"] == "CommitFailedException"
    assert result["after_stale_generation"] == 3
    transformed = [f"out-{v}" for v in first]
    # Two transactions of 3 records and a marker each.
    assert result["read_committed"] == {"values": transformed, "end_offset": 8}
    assert result["read_uncommitted"] == {"values": transformed * 2, "end_offset": 8}


def test_a_second_producer_of_a_transactional_id_fences_the_first(
    version: str, cluster: Cluster
) -> None:
    """The successor's initTransactions aborts the zombie's open transaction and bumps the
    epoch: the zombie's commit throws ProducerFencedException, its record stays invisible
    to read_committed."""
    topic = f"java-txn-fence-{version}"
    cluster.create_topic(topic, partitions=1)
    result = run(version, "txn-fence", cluster, topic=topic, transactional_id=topic)
    assert result["zombie_commit"] == "ProducerFencedException"
    # The zombie's record, the abort marker, the successor's and its commit marker.
    assert result["read_committed"] == {"values": ["successor"], "end_offset": 4}
    assert result["read_uncommitted"] == {"values": ["zombie", "successor"], "end_offset": 4}


def _read_committed_counts(cluster: Cluster, topic: str) -> dict[str, list[int]]:
    """``_counts_written``, read_committed: each partition read until its last stable offset
    reaches the high watermark (the application's last commit ends before its markers are
    written; they take offsets no record is read at)."""
    from confluent_kafka import Consumer, TopicPartition

    def consumer(isolation: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": f"{topic}-reader",
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
            }
        )

    uncommitted, committed = consumer("read_uncommitted"), consumer("read_committed")
    try:
        ends = {
            p: uncommitted.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
        committed.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        written: dict[str, list[int]] = {}
        at_end: set[int] = set()
        deadline = time.monotonic() + 15
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: {at_end} of {ends} read in 15 s"
            message = committed.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == -191, error  # _PARTITION_EOF, at the offset reached
                if message.offset() >= ends[message.partition()]:
                    at_end.add(message.partition())
                continue
            count = int.from_bytes(message.value(), "big", signed=True)
            written.setdefault(message.key().decode(), []).append(count)
        return written
    finally:
        uncommitted.close()
        committed.close()


def test_a_kafka_streams_application_counts_words_exactly_once(
    version: str, cluster: Cluster, tmp_path: Path
) -> None:
    """The word count with processing.guarantee=exactly_once_v2: one transactional producer
    per thread writes the repartition, changelog and output records and the input offsets
    in each transaction. A second run, with an empty state.dir, restores its store from the
    changelog (read_committed, past the markers in it) and counts on. The output, read
    read_committed, holds each count once, in order."""
    application = f"java-streams-eos-{version}-{uuid.uuid4().hex[:8]}"
    source, sink = f"{application}-input", f"{application}-output"
    cluster.create_topic(source, partitions=PARTITIONS)
    cluster.create_topic(sink, partitions=PARTITIONS)
    total = 0
    for run_index, words in enumerate((60, 40)):
        _produce_words(cluster, source, total, words)
        total += words
        result = _word_count(
            version,
            cluster,
            application,
            total,
            tmp_path / str(run_index),
            processing_guarantee="exactly_once_v2",
        )
        assert result["counts"] == dict.fromkeys(WORDS, total // len(WORDS))
        assert (result["closed"], result["state"]) == (True, "NOT_RUNNING")
    written = _read_committed_counts(cluster, sink)
    assert written == {word: list(range(1, total // len(WORDS) + 1)) for word in WORDS}
