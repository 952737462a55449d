"""franz-go's own kgo integration suite (unmodified, at the version tests/go/go.mod pins)
against a 3-broker Purgatory: every test of tests/go/franz_go_passing.txt, one `go test`
binary run each (`make go-clients` builds it), must pass. The slow ones run only under
FRANZ_GO_ALL=1 (`make franz-go-suite`), the SASL ones in test_go_security.py;
tests/go/franz_go_failing.txt says why the others do not pass. KGO_LOG_LEVEL=debug in the
environment shows the client's log."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from purgatory.testing import Cluster
from tests.cluster.go_test_binary import assert_go_test_passes, go_tests

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "go-clients"
BINARY = BUILT / "kgo.test"
PASSING = ROOT / "tests" / "go" / "franz_go_passing.txt"
FAILING = ROOT / "tests" / "go" / "franz_go_failing.txt"
ALL = os.environ.get("FRANZ_GO_ALL") == "1"
# Records each producing test sends (the suite's default is 500,000).
RECORDS = 500


def listed(path: Path) -> dict[str, str]:
    """Test name -> the rest of its line, from one of the list files."""
    names = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, *rest = line.split(None, 1)
            names[name] = rest[0].strip() if rest else ""
    return names


def listed_version(path: Path) -> str:
    return path.read_text().split()[2].rstrip(":")


PASSING_TESTS = listed(PASSING)


def kgo_binary() -> Path:
    """The built suite, of the version the lists are for, or skip."""
    if not BINARY.is_file():
        pytest.skip(
            "franz-go's kgo suite is not built: `make go-clients` builds it (Go, and the Go "
            "module proxy the first time)"
        )
    built = (BUILT / "franz-go.version").read_text().strip()
    assert built == listed_version(PASSING) == listed_version(FAILING), (
        f"build/go-clients has franz-go {built}, the lists are for {listed_version(PASSING)}: "
        "run the whole suite against the new version and update both lists"
    )
    return BINARY


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    kgo_binary()  # skip before anything starts
    with Cluster(brokers=3, mode="process") as started:
        yield started


def test_every_listed_name_is_a_test_of_that_franz_go_version() -> None:
    tests = set(go_tests(kgo_binary()))
    failing = listed(FAILING)
    assert not set(PASSING_TESTS) & set(failing)
    assert set(PASSING_TESTS) | set(failing) <= tests
    assert all(failing.values()), "every failing test needs its reason"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                tag == "slow" and not ALL, reason="slow: FRANZ_GO_ALL=1 runs it"
            ),
        )
        for name, tag in PASSING_TESTS.items()
        if tag != "sasl"  # on a SASL listener: tests/cluster/test_go_security.py
    ],
)
def test_franz_go_kgo_integration_test_passes(name: str, cluster: Cluster, tmp_path: Path) -> None:
    env = {
        "KGO_SEEDS": cluster.bootstrap_servers,
        "KGO_TEST_RF": "3",
        "KGO_TEST_RECORDS": str(RECORDS),
        "KGO_LOG_LEVEL": os.environ.get("KGO_LOG_LEVEL", "info"),
    }
    assert_go_test_passes(kgo_binary(), name, env, tmp_path, timeout_s=120, cluster=cluster)
