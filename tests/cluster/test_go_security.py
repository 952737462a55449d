"""franz-go and IBM/sarama (unmodified, at the versions tests/go/go.mod pins) over a broker's
SSL and SASL_SSL listeners (issue 47): SCRAM-SHA-512 and PLAIN over TLS and mutual TLS, a
wrong password failing with SASL_AUTHENTICATION_FAILED (tests/go/security, built by `make
go-clients`); and franz-go's own SASL tests of its kgo suite (TestSCRAMAuth,
TestSCRAMAuthBadCredentials, TestOAuthAuth), which need a SASL_PLAINTEXT listener
(KGO_TEST_SCRAM_SEEDS, KGO_TEST_OAUTH_SEEDS), against the same broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.go_test_binary import assert_go_test_passes, go_tests
from tests.cluster.secured_broker import SecuredBroker, secured_broker
from tests.cluster.test_franz_go_suite import PASSING_TESTS, kgo_binary
from tests.cluster.test_go_clients import binary

pytestmark = pytest.mark.cluster

# tests/go/security's tests; the first test below holds the binary to this list.
TESTS = [
    "TestFranzGoProducesAndConsumesOverSaslSslAndMutualTls",
    "TestFranzGoWrongPasswordFailsWithSaslAuthenticationFailed",
    "TestSaramaProducesAndConsumesOverSaslSslAndMutualTls",
    "TestSaramaWrongPasswordFailsWithSaslAuthenticationFailed",
]
# franz-go's kgo tests that franz_go_passing.txt marks `sasl`: they run here.
SASL_SUITE_TESTS = [name for name, tag in PASSING_TESTS.items() if tag == "sasl"]


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredBroker]:
    binary("security")  # skip before anything starts
    with secured_broker() as started:
        yield started


def test_the_built_go_tests_are_the_ones_listed_here() -> None:
    assert sorted(go_tests(binary("security"))) == sorted(TESTS)


@pytest.mark.parametrize("name", TESTS)
def test_go_client_over_secured_listeners(
    name: str, secured: SecuredBroker, tmp_path: Path
) -> None:
    env = {
        "SECURED_SASL_SSL": secured.bootstrap("SASL_SSL"),
        "SECURED_SSL": secured.bootstrap("SSL"),
        "SECURED_CA": str(secured.certs.ca),
        "SECURED_KEYSTORE": str(secured.client_keystore),
    }
    for mechanism in ("SCRAM", "PLAIN"):
        user, password = secured.user(mechanism)
        env[f"SECURED_{mechanism}_USER"], env[f"SECURED_{mechanism}_PASSWORD"] = user, password
    before = secured.authentications()
    assert_go_test_passes(binary("security"), name, env, tmp_path, timeout_s=60)
    # The broker saw each way of connecting: a producer and a consumer each, or a refusal.
    sasl = [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
    if "WrongPassword" in name:
        ways = [(*way, "failure") for way in sasl]
    else:
        ways = [(*way, "success") for way in [*sasl, ("SSL", "SSL")]]
    for listener, mechanism, result in ways:
        assert secured.authenticated_since(before, listener, mechanism, result) >= 1, mechanism


@pytest.mark.parametrize("name", SASL_SUITE_TESTS)
def test_franz_go_kgo_sasl_test_passes(name: str, secured: SecuredBroker, tmp_path: Path) -> None:
    listener = secured.bootstrap("SASL_PLAINTEXT")
    env = {
        # Its other tests' seeds, which these do not use: the PLAINTEXT listener.
        "KGO_SEEDS": secured.bootstrap("PLAINTEXT"),
        "KGO_TEST_SCRAM_SEEDS": listener,
        "KGO_TEST_SCRAM": ":".join((*secured.user("SCRAM-SHA-256"), "256")),
        "KGO_TEST_OAUTH_SEEDS": listener,
    }
    assert_go_test_passes(kgo_binary(), name, env, tmp_path, timeout_s=60)
