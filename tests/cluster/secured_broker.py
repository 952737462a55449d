"""One broker with Kafka's four security protocols on four listeners (issue 47), for the
tests of the other languages' clients (Java, KafkaJS, Go): PLAINTEXT, SSL with client
certificates required (principal: the certificate's CN), SASL_PLAINTEXT and SASL_SSL with
PLAIN (bob/bob-secret) and SCRAM-SHA-256/512 (alice/alice-secret, seeded as
`purgatory broker --add-scram` does). The broker runs in this process, on a loop thread
of its own; the clients are other processes."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from purgatory.broker.server import Broker, start_broker
from purgatory.testing.certs import (
    CertFiles,
    write_certs,
)
from purgatory.testing.loop_thread import LoopThread
from tests.integration.test_security import security_settings
from tests.support import broker_config, wait_until

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
PLAIN_USER, PLAIN_PASSWORD = "bob", "bob-secret"
# The client certificate's CN: User:alice on the SSL listener.
CERTIFICATE_USER = "alice"
SCRAM_CREDENTIALS = " ".join(
    f"SCRAM-SHA-{bits}=[name={SCRAM_USER},password={SCRAM_PASSWORD}]" for bits in (256, 512)
)

Authentications = dict[tuple[str, str, str], float]


@dataclass
class SecuredBroker:
    """The running broker, its certificates, and what it counted."""

    broker: Broker
    certs: CertFiles
    loop: LoopThread

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.ports[listener]}"

    @staticmethod
    def user(mechanism: str) -> tuple[str, str]:
        """The name and password of the user of a SASL ``mechanism`` (any case)."""
        if mechanism.upper() == "PLAIN":
            return PLAIN_USER, PLAIN_PASSWORD
        return SCRAM_USER, SCRAM_PASSWORD

    @property
    def client_keystore(self) -> Path:
        """The client's PEM keystore (its key, then its certificate chain)."""
        return self.certs.clients[CERTIFICATE_USER]

    def authentications(self) -> Authentications:
        """purgatory_authentications_total by (listener, mechanism, result)."""

        async def collect() -> Authentications:
            families = {m.name: m for m in self.broker.metrics.registry.collect()}
            counted: Authentications = {}
            # (No family before the first authentication.)
            family = families.get("purgatory_authentications")
            for s in family.samples if family is not None else ():
                if s.name.endswith("_total"):
                    key = (s.labels["listener"], s.labels["mechanism"], s.labels["result"])
                    counted[key] = counted.get(key, 0) + s.value
            return counted

        return self.loop.run(collect(), 10)

    def authenticated_since(
        self, before: Authentications, listener: str, mechanism: str, result: str
    ) -> float:
        """How many authentications of this kind the broker counted since ``before``."""
        key = (listener, mechanism, result)
        return self.authentications().get(key, 0) - before.get(key, 0)


@contextlib.contextmanager
def secured_broker(**extra: Any) -> Iterator[SecuredBroker]:
    """Start the broker (``extra``: more broker configs), stop it when the block ends."""
    with tempfile.TemporaryDirectory(prefix="purgatory-secured-") as scratch:
        certs = _write_certs(Path(scratch) / "certs")
        settings = {
            **security_settings(certs),
            "bootstrap.scram.credentials": SCRAM_CREDENTIALS,
            "metadata.log.dir": f"{scratch}/metadata",
            # A group's first generation at once, not after Kafka's 3 s.
            "group.initial.rebalance.delay.ms": 0,
            **extra,
        }
        loop = LoopThread("purgatory-secured-broker")
        try:
            broker = loop.run(start_broker(broker_config(**settings)), 30)
            try:
                secured = SecuredBroker(broker, certs, loop)
                # The active controller writes bootstrap.scram.credentials into the log.
                loop.run(_wait_for_scram_user(broker), 30)
                yield secured
            finally:
                loop.run(broker.stop(), 30)
        finally:
            loop.close()


async def _wait_for_scram_user(broker: Broker) -> None:
    await wait_until(
        lambda: all(
            broker.metadata.scram_credential(f"SCRAM-SHA-{bits}", SCRAM_USER) is not None
            for bits in (256, 512)
        ),
        timeout=20,
        message=f"{SCRAM_USER}'s SCRAM credentials in the broker's metadata",
    )


def _write_certs(out: Path) -> CertFiles:
    """`write_certs`' files (ca.pem, broker.pem, client-alice.pem), in a private
    temporary directory: no one else reads the keys."""
    return write_certs(out, clients=[CERTIFICATE_USER])
