"""KafkaJS (unmodified, the version tests/js/package-lock.json locks) over a broker's SSL
and SASL_SSL listeners (issue 47): an idempotent producer and a group consumer with
`sasl: {mechanism: 'scram-sha-512' | 'plain'}` and `ssl: {ca}`, and with mutual TLS
(`ssl: {ca, cert, key}`); a wrong password fails `connect()` with
KafkaJSSASLAuthenticationError on the broker's answer, not after KafkaJS's retries.

Each case is one Node process running tests/js/security.js (`make js-clients`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.secured_broker import SecuredBroker, secured_broker
from tests.cluster.test_kafkajs import JS, answer, environment, errors_but, kafkajs_version

pytestmark = pytest.mark.cluster

COUNT = 20


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredBroker]:
    kafkajs_version()  # skip before anything starts
    with secured_broker() as started:
        yield started


def run(secured: SecuredBroker, listener: str, **options: object) -> dict[str, Any]:
    line = ["node", str(JS / "security.js"), "--bootstrap", secured.bootstrap(listener)]
    line += ["--ca", str(secured.certs.ca)]
    for name, value in options.items():
        line += [f"--{name.replace('_', '-')}", str(value)]
    done = subprocess.run(line, capture_output=True, text=True, timeout=60, env=environment())
    return answer("security", done.returncode, done.stdout, done.stderr)


def credentials(mechanism: str | None) -> dict[str, str]:
    """security.js's options for a SASL ``mechanism`` and its user; none: mutual TLS."""
    if mechanism is None:
        return {}
    username, password = SecuredBroker.user(mechanism)
    return {"mechanism": mechanism, "username": username, "password": password}


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [("SASL_SSL", "scram-sha-512"), ("SASL_SSL", "plain"), ("SSL", None)],
)
def test_kafkajs_produces_and_consumes_over_a_secured_listener(
    secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    topic = f"kafkajs-{listener}-{mechanism or 'mtls'}".lower()
    keystore = {} if mechanism else {"keystore": secured.client_keystore}
    before = secured.authentications()
    result = run(
        secured,
        listener,
        scenario="round-trip",
        topic=topic,
        count=COUNT,
        **credentials(mechanism),
        **keystore,
    )
    assert result["base_offsets"] == ["0"]
    assert sorted(result["values"], key=lambda v: int(v.split("-")[1])) == [
        f"value-{i}" for i in range(COUNT)
    ]
    assert not errors_but(result)
    counted = (mechanism or "SSL").upper()
    assert secured.authenticated_since(before, listener, counted, "success") >= 2
    assert secured.authenticated_since(before, listener, counted, "failure") == 0


@pytest.mark.parametrize("mechanism", ["scram-sha-512", "plain"])
def test_a_wrong_password_fails_connect_with_kafkajs_sasl_authentication_error(
    secured: SecuredBroker, mechanism: str
) -> None:
    before = secured.authentications()
    wrong = {**credentials(mechanism), "password": "wrong"}
    result = run(secured, "SASL_SSL", scenario="refused", **wrong)
    error = result["error"]
    assert error is not None and error["name"] == "KafkaJSSASLAuthenticationError", result
    assert "Authentication failed" in error["message"], error
    # On the broker's first answer: KafkaJS does not retry an authentication error.
    assert result["seconds"] < 5, result
    print(f"KafkaJS {mechanism}: {error['name']} after {result['seconds']:.3f} s")
    failures = secured.authenticated_since(before, "SASL_SSL", mechanism.upper(), "failure")
    assert failures == 1
