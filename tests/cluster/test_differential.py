"""Differential tests with Apache Kafka as the oracle: every scenario of the corpus
(tests/differential/scenarios/) runs against a 1-node Apache Kafka 4.3.1 and a 1-broker
Purgatory with the same settings, and their normalised answers must agree, except for
the differences listed in KNOWN (each with its reason; docs/protocol.md, "Differences
from Apache Kafka", says the same). An unlisted difference fails, and so does a listed
one that no longer occurs (remove it from KNOWN and the docs).

The security scenarios (SECURED_SCENARIOS) run against a second pair configured alike
with SECURED: a SASL_PLAINTEXT listener beside PLAINTEXT (PLAIN users from JAAS, SCRAM
users seeded at format, OAUTHBEARER's unsecured JWTs, connections.max.reauth.ms) and the
StandardAuthorizer, whose super users are User:admin and User:ANONYMOUS (the PLAINTEXT
listeners', Kafka's own inter-broker and controller connections among them). The second
Kafka starts beside the first, so it costs little time."""

from __future__ import annotations

import asyncio
import concurrent.futures
import fnmatch
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from purgatory.testing import Cluster
from purgatory.testing.loop_thread import LoopThread
from purgatory.testing.real_kafka import RealKafka, unavailable
from tests.differential.harness import Difference, differences, run
from tests.differential.scenarios import SCENARIOS, SECURED_SCENARIOS
from tests.differential.scenarios.security import (
    AUTHORIZER,
    OAUTHBEARER_JAAS,
    PLAIN_JAAS,
    REAUTH_MS,
    SCRAM_JAAS,
    SCRAM_USERS,
    SUPER_USERS,
)

pytestmark = pytest.mark.cluster

# The same settings on both: no auto-creation (the corpus asks for unknown topics).
CONFIG = {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}

# Kafka's settings that Purgatory does not have, set to what Purgatory does: a consumer
# group's new target assignment is computed at once, in the heartbeat that bumps the group
# epoch (Kafka 4.3.1 batches them, at most one per group.consumer.assignment.interval.ms;
# a share group's, group.share.assignment.interval.ms).
KAFKA_ONLY = {
    "group.consumer.assignment.interval.ms": "0",
    "group.share.assignment.interval.ms": "0",
}

SASL = "SASL_PLAINTEXT"
SECURED = {
    **CONFIG,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
    "connections.max.reauth.ms": str(REAUTH_MS),
    # A failed authentication answered at once (Kafka's 100 ms delay: scenarios fail many).
    "connection.failed.authentication.delay.ms": "0",
    "authorizer.class.name": AUTHORIZER,
    "super.users": SUPER_USERS,
}


@dataclass(frozen=True)
class Known:
    """A difference we know of: in scenarios matching ``scenario``, at paths matching
    ``path`` (fnmatch patterns). ``issue``: the issue that brings Kafka's behaviour; none
    for a deliberate difference."""

    scenario: str
    path: str
    reason: str
    issue: int | None = None


KNOWN = [
    Known(
        "*",
        "*.configs.segment.bytes.value",
        "a topic's segment.bytes defaults to 16 MiB (Kafka: 1 GiB): logs live in memory",
    ),
    Known(
        "*",
        "*.configs.retention.bytes.value",
        "a topic's retention.bytes defaults to 256 MiB (Kafka: unlimited): logs live in memory",
    ),
    Known(
        "*",
        "*.configs.min.insync.replicas.config_source",
        "min.insync.replicas is DEFAULT_CONFIG where Kafka's storage format sets it as a "
        "cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG); cluster-wide dynamic "
        "configs come with AlterConfigs",
        issue=45,
    ),
    Known(
        "describe_broker_topic_defaults_by_name",
        "describe.results[0].configs.*.read_only",
        "the broker defaults of topic configs (log.cleanup.policy, message.max.bytes, ...) "
        "are read-only: Kafka changes them on a running broker with AlterConfigs, which "
        "Purgatory does not serve yet",
        issue=45,
    ),
    Known(
        "fetch_session_asked_for",
        "new_session.session_id",
        "fetch sessions (KIP-227) are declined: session id 0 (which the protocol lets a "
        "broker answer), every fetch a full one",
    ),
    Known(
        "fetch_and_list_offsets_with_leader_epochs",
        "fetch_at_3_last_fetched_epoch_5.responses[0].partitions[0].*",
        "a Kafka client's last_fetched_epoch (KIP-320's divergence check, which followers "
        "send) is not checked: Purgatory's followers fetch over its own protocol, and Kafka's "
        "consumers send -1",
    ),
    Known(
        "fetch_out_of_range",
        "*.responses[0].partitions[0].*_offset",
        "OFFSET_OUT_OF_RANGE carries the partition's real log start offset, high watermark "
        "and last stable offset, where Kafka answers -1 for all three: more for a client "
        "to reset with, and no client reads them from an error",
    ),
    Known(
        "fetch_out_of_range",
        "*.responses[0].partitions[0].high_watermark",
        "as above (the high watermark of an OFFSET_OUT_OF_RANGE answer)",
    ),
    Known(
        "produce_offset_deltas_out_of_order",
        "*.partition_responses[0].*",
        "a v2 batch whose records' offset deltas are not 0, 1, 2, ... is INVALID_RECORD: "
        "Kafka stores an uncompressed one as it is (its consumers then read repeated or "
        "skipped offsets) and rewrites a compressed one; Purgatory never rewrites stored "
        "bytes, and its reads and time index take the deltas as offsets",
    ),
    Known(
        "produce_negative_timestamp",
        "*.partition_responses[0].*",
        "a record timestamp below -1 is INVALID_TIMESTAMP: Kafka stores it (it is only "
        "'no timestamp' at -1); no Kafka client writes one, and ListOffsets by timestamp "
        "could not answer for it",
    ),
    Known(
        "delete_records_moves_the_log_start",
        "fetch_below_the_start.responses[0].partitions[0].*",
        "a fetch below the new log start: OFFSET_OUT_OF_RANGE with the real offsets, as in "
        "fetch_out_of_range",
    ),
    Known(
        "produce_idempotent_sequences",
        "retry_of_seq_0.responses[0].partition_responses[0].log_append_time",
        "a retried idempotent batch is answered log_append_time -1 (the topic keeps create "
        "time); Kafka echoes the batch's last record timestamp there",
    ),
    Known(
        "acls_refused",
        "*unknown_*",
        "an UNKNOWN (0) resource type, pattern type, operation or permission in CreateAcls, "
        "DescribeAcls or DeleteAcls is INVALID_REQUEST with the reason: Kafka's request "
        "parser refuses it and closes the connection",
    ),
    Known(
        "acls_refused",
        "any_*",
        "a CreateAcls binding of ANY (resource type, pattern type, operation, permission) or "
        "a MATCH pattern is INVALID_REQUEST with the reason (Kafka's AclControlManager's "
        "checks), the request's other bindings created: Kafka's broker fails building the "
        "binding and answers every binding of the request UNKNOWN_SERVER_ERROR",
    ),
    Known(
        "acls_refused",
        "match_pattern.*",
        "as above (a MATCH pattern)",
    ),
    Known(
        "acls_refused",
        "delete_mine.filter_results[1].matching_acls",
        "as above: the good binding created beside a refused one exists only in Purgatory",
    ),
    Known(
        "produce_compressed_batches",
        "refused_*.responses[0].partition_responses[0].*",
        "a batch of an unknown codec, or whose records do not decompress, is CORRUPT_MESSAGE "
        "(no log information, as for a bad CRC): Kafka answers UNKNOWN_SERVER_ERROR, its "
        "validator's exception left unmapped",
    ),
    Known(
        "consumer_group_regex_subscription",
        "join.*",
        "a ConsumerGroupHeartbeat joining with a regex is assigned the matching topics in its "
        "answer (RE2, in the heartbeat, cached per metadata image): Kafka resolves regexes in "
        "a background task, answers the join with epoch 1 and nothing, and bumps the epoch "
        "when they are resolved",
    ),
    Known(
        "share_fetch_sessions",
        "*unknown_topic.*",
        "a ShareFetch naming a topic id the broker does not know answers that partition "
        "UNKNOWN_TOPIC_ID and serves the others: Kafka 4.3.1 fails the whole request "
        "UNKNOWN_SERVER_ERROR",
    ),
]


def known(scenario: str, difference: Difference) -> Known | None:
    for entry in KNOWN:
        path = entry.path.replace("[", "[[]")  # an index in a path is literal, not a set
        if fnmatch.fnmatchcase(scenario, entry.scenario) and fnmatch.fnmatchcase(
            difference.path, path
        ):
            return entry
    return None


@pytest.fixture(scope="module")
def secured_kafka_start(
    request: pytest.FixtureRequest,
) -> Iterator[concurrent.futures.Future[RealKafka] | None]:
    """The secured Kafka, starting on a thread of its own (which lives until the module's
    end: a JVM dies with the thread that started it) while the first one starts; None
    when no secured scenario is to run."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    if not any(item.name.startswith("test_secured_") for item in request.session.items):
        yield None
        return
    secured = RealKafka(
        nodes=1,
        config=SECURED,
        listeners={SASL: SASL},
        add_scram=SCRAM_USERS,
        stop_timeout=0,  # killed at the end: nothing of it is kept
    )
    with concurrent.futures.ThreadPoolExecutor(1, "secured-kafka") as starter:
        future = starter.submit(lambda: (secured.start(), secured)[1])
        try:
            yield future
        finally:
            starter.submit(secured.stop).result()


@pytest.fixture(scope="module")
def kafka(secured_kafka_start: concurrent.futures.Future[RealKafka] | None) -> Iterator[RealKafka]:
    with RealKafka(nodes=1, config={**CONFIG, **KAFKA_ONLY}) as started:
        yield started


@pytest.fixture(scope="module")
def purgatory() -> Iterator[Cluster]:
    with Cluster(brokers=1, config=CONFIG) as started:
        yield started


@pytest.fixture(scope="module")
def secured_kafka(secured_kafka_start: concurrent.futures.Future[RealKafka] | None) -> RealKafka:
    assert secured_kafka_start is not None  # a secured scenario asks for it
    return secured_kafka_start.result(timeout=180)


@pytest.fixture(scope="module")
def secured_purgatory() -> Iterator[dict[str, int]]:
    """A broker configured as the secured Kafka; its listeners' ports by name."""
    from purgatory.broker.server import start_broker
    from tests.support import broker_config, wait_until

    with tempfile.TemporaryDirectory(prefix="purgatory-secured-") as scratch:
        settings = {
            **SECURED,
            "listeners": f"PLAINTEXT://127.0.0.1:0,{SASL}://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "bootstrap.scram.credentials": " ".join(SCRAM_USERS),
            "metadata.log.dir": f"{scratch}/metadata",
        }
        loop = LoopThread("purgatory-secured")
        try:
            broker = loop.run(start_broker(broker_config(**settings)), 30)
            try:
                # The active controller writes bootstrap.scram.credentials into the log.
                loop.run(
                    wait_until(
                        lambda: broker.metadata.scram_credential("SCRAM-SHA-512", "alice"),
                        timeout=20,
                        message="the SCRAM users in the broker's metadata",
                    ),
                    30,
                )
                yield dict(broker.ports)
            finally:
                loop.run(broker.stop(), 30)
        finally:
            loop.close()


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_purgatory_answers_as_kafka(name: str, kafka: RealKafka, purgatory: Cluster) -> None:
    async with asyncio.timeout(60):
        from_kafka, from_purgatory = await asyncio.gather(
            run(SCENARIOS[name], name, kafka.ports[0]),
            run(SCENARIOS[name], name, purgatory.ports[0]),
        )
    compare(name, from_kafka, from_purgatory)


@pytest.mark.parametrize("name", list(SECURED_SCENARIOS))
async def test_secured_purgatory_answers_as_kafka(
    name: str, secured_kafka: RealKafka, secured_purgatory: dict[str, int]
) -> None:
    scenario = SECURED_SCENARIOS[name]
    kafka_ports = {listener: secured_kafka.port(listener) for listener in ("PLAINTEXT", SASL)}
    async with asyncio.timeout(60):
        from_kafka, from_purgatory = await asyncio.gather(
            run(scenario, name, kafka_ports["PLAINTEXT"], kafka_ports),
            run(scenario, name, secured_purgatory["PLAINTEXT"], secured_purgatory),
        )
    compare(name, from_kafka, from_purgatory)


def compare(name: str, from_kafka: Any, from_purgatory: Any) -> None:
    if name == "api_versions":
        report_api_versions(from_kafka[0][1], from_purgatory[0][1])
    found = differences(from_kafka, from_purgatory)
    unexplained = [str(d) for d in found if known(name, d) is None]
    assert not unexplained, "Purgatory answers differently from Kafka:\n" + "\n".join(unexplained)
    used = {id(known(name, d)) for d in found}
    stale = [
        k.path for k in KNOWN if k.scenario == name and id(k) not in used
    ]  # a listed difference of this very scenario that no longer occurs
    assert not stale, f"listed in KNOWN but no longer different (remove them): {stale}"


def report_api_versions(kafka: dict[str, Any], purgatory: dict[str, Any]) -> None:
    """The APIs and version ranges of both, as information: printed, compared only for the
    error code (Purgatory serves fewer APIs and, for some, older versions, on purpose)."""
    ranges = {
        side: {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer.pop("api_keys")}
        for side, answer in (("kafka", kafka), ("purgatory", purgatory))
    }
    for key in sorted(ranges["purgatory"]):
        print(f"api {key}: Kafka {ranges['kafka'].get(key)}, Purgatory {ranges['purgatory'][key]}")
    print(f"APIs only Kafka serves: {sorted(set(ranges['kafka']) - set(ranges['purgatory']))}")
