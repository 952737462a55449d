"""Apache Kafka's Java client (kafka-clients 4.x and 3.x, unmodified) over a broker's SSL and
SASL_SSL listeners (issue 47): an idempotent producer and a group consumer with SCRAM-SHA-512
and with PLAIN (`sasl.jaas.config`, ScramLoginModule and PlainLoginModule) over TLS, and
with mutual TLS (PEM keystore and truststore); a wrong SCRAM password fails the send with
SaslAuthenticationException on the broker's answer, not on a timeout.

Each case is one JVM running JavaClients' `secured-round-trip` or `authentication-failure`
(tests/java, `make java-clients`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.secured_broker import SecuredBroker, secured_broker
from tests.cluster.test_java_clients import VERSIONS, classpath, run_scenario

pytestmark = pytest.mark.cluster

COUNT = 20


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredBroker]:
    classpath(VERSIONS[0])  # skip before anything starts
    with secured_broker() as started:
        yield started


@pytest.fixture(scope="module", params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    classpath(request.param)
    return str(request.param)


def security(secured: SecuredBroker, listener: str, mechanism: str | None) -> dict[str, Any]:
    """JavaClients' security options for ``listener``: SASL ``mechanism`` with its user,
    or, without one, the client certificate."""
    options: dict[str, Any] = {
        "security_protocol": listener,
        "truststore": secured.certs.ca,
    }
    if mechanism is not None:
        username, password = secured.user(mechanism)
        options.update(mechanism=mechanism, username=username, password=password)
    else:
        options["keystore"] = secured.client_keystore
    return options


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"), ("SSL", None)],
)
def test_the_java_client_produces_and_consumes_over_a_secured_listener(
    version: str, secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    topic = f"java-{listener}-{mechanism or 'mtls'}-{version}".lower()
    before = secured.authentications()
    result = run_scenario(
        version,
        "secured-round-trip",
        secured.bootstrap(listener),
        topic=topic,
        count=COUNT,
        **security(secured, listener, mechanism),
    )
    assert result["offsets"] == list(range(COUNT))
    assert result["values"] == [f"value-{i}" for i in range(COUNT)]
    # Every connection the producer and the consumer made authenticated that way.
    assert secured.authenticated_since(before, listener, mechanism or "SSL", "success") >= 2
    assert secured.authenticated_since(before, listener, mechanism or "SSL", "failure") == 0


def test_a_wrong_scram_password_fails_the_send_with_sasl_authentication_exception(
    version: str, secured: SecuredBroker
) -> None:
    before = secured.authentications()
    options = security(secured, "SASL_SSL", "SCRAM-SHA-512")
    result = run_scenario(
        version,
        "authentication-failure",
        secured.bootstrap("SASL_SSL"),
        errors_expected=True,  # the client logs the failed authentication at ERROR
        topic=f"java-refused-{version}",
        **{**options, "password": "wrong"},
    )
    assert result["exception"] == ("org.apache.kafka.common.errors.SaslAuthenticationException"), (
        result
    )
    assert "Authentication failed" in result["message"] or "invalid" in result["message"].lower()
    # On the broker's answer: max.block.ms (20 s) would be a timeout's exception.
    assert result["seconds"] < 5, result
    print(f"kafka-clients {version}: SaslAuthenticationException after {result['seconds']:.3f} s")
    assert secured.authenticated_since(before, "SASL_SSL", "SCRAM-SHA-512", "failure") >= 1
