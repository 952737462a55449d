"""Go's other Kafka clients, IBM/sarama and segmentio/kafka-go (unmodified, at the versions
tests/go/go.mod pins), against a 3-broker Purgatory: per client, a producer with acks=all
and keys whose every record is read back, a consumer group (sarama's ConsumerGroup of two
members, kafka-go's Reader with a GroupID) committing what it read, and topics created,
described and deleted through the client's admin. Each is a Go test of tests/go, built by
`make go-clients`, run here against the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from purgatory.testing import Cluster
from tests.cluster.go_test_binary import assert_go_test_passes, go_tests

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "go-clients"
# The Go tests of each client's package in tests/go; the first test below holds the binaries
# to this list, so a Go test added there and not here fails rather than never running.
TESTS = {
    "sarama": [
        "TestSaramaIdempotentProducerAcksAllAndEveryRecordReadsBack",
        "TestSaramaConsumerGroupOfTwoSplitsTheTopicAndCommitsWhatItRead",
        "TestSaramaClusterAdminCreatesDescribesAndDeletesTopics",
    ],
    "kafkago": [
        "TestKafkaGoWriterAcksAllAndPartitionReadersReadEveryRecordBack",
        "TestKafkaGoGroupReaderReadsEveryRecordAndCommitsItsPosition",
        "TestKafkaGoClientCreatesDescribesAndDeletesTopics",
    ],
}


def binary(client: str) -> Path:
    built = BUILT / f"{client}.test"
    if not built.is_file():
        pytest.skip(
            f"the Go {client} tests are not built: `make go-clients` builds them (Go, and "
            "the Go module proxy the first time)"
        )
    return built


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    binary("sarama")  # skip before anything starts
    with Cluster(brokers=3, mode="process") as started:
        yield started


@pytest.mark.parametrize("client", sorted(TESTS))
def test_the_built_go_tests_are_the_ones_listed_here(client: str) -> None:
    assert sorted(go_tests(binary(client))) == sorted(TESTS[client])


@pytest.mark.parametrize(
    ("client", "name"), [(client, name) for client, names in TESTS.items() for name in names]
)
def test_go_client_against_purgatory(
    client: str, name: str, cluster: Cluster, tmp_path: Path
) -> None:
    env = {"PURGATORY_BOOTSTRAP": cluster.bootstrap_servers}
    assert_go_test_passes(binary(client), name, env, tmp_path, timeout_s=90, cluster=cluster)
