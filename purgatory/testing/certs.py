"""Test certificates for TLS listeners (`purgatory certs`): a throw-away CA, a broker
certificate for its host names and client certificates by common name, written as Kafka's
PEM stores (the private key and its certificate chain in one file; the CA alone as the
truststore), so tests and users need no openssl recipe. Made with the ``trustme`` package.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BROKER_HOSTS = ("127.0.0.1", "localhost")
ORGANIZATION = "Purgatory"
ORGANIZATION_UNIT = "test"
# The principal mapping that makes a client certificate of `TestCA.client` User:<its CN>.
CN_MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
# A client's keystore properties, by client library.
_LIBRDKAFKA_KEYSTORE = ("ssl.certificate.location={path}", "ssl.key.location={path}")
_JAVA_KEYSTORE = ("ssl.keystore.type=PEM", "ssl.keystore.location={path}")
_CLIENT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Keystore:
    """A PEM keystore: ``key_pem`` (PKCS#8, encrypted when ``key_password`` is set) and its
    certificate chain, leaf first."""

    key_pem: str
    chain_pem: str
    key_password: str | None = None

    @property
    def pem(self) -> str:
        """The keystore file's text (``ssl.keystore.type=PEM``)."""
        return self.key_pem + self.chain_pem


class TestCA:
    """A certificate authority of its own, for one test run."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        import trustme

        self._ca = trustme.CA(organization_name=ORGANIZATION, organization_unit_name="test CA")

    @property
    def certificate_pem(self) -> str:
        """The CA's certificate: the truststore of clients and brokers."""
        return self._ca.cert_pem.bytes().decode()

    def broker(
        self, hosts: Sequence[str] = DEFAULT_BROKER_HOSTS, *, key_password: str | None = None
    ) -> Keystore:
        """A broker certificate valid for ``hosts`` (names or IP addresses), CN the first."""
        if not hosts:
            raise ValueError("a broker certificate needs at least one host name or address")
        try:
            leaf = self._ca.issue_cert(
                *hosts,
                common_name=hosts[0],
                organization_name=ORGANIZATION,
                organization_unit_name=ORGANIZATION_UNIT,
            )
        except ValueError as exc:  # a name that is neither an address nor a DNS name
            raise ValueError(f"broker hosts {', '.join(hosts)}: {exc}") from None
        return self._keystore(leaf, key_password)

    def client(self, name: str, *, key_password: str | None = None) -> Keystore:
        """A client certificate whose subject is ``CN=name,OU=test,O=Purgatory``: the
        principal ``User:CN=name,OU=test,O=Purgatory`` under the DEFAULT mapping,
        ``User:name`` under CN_MAPPING_RULES."""
        if not _CLIENT_NAME.match(name):
            raise ValueError(f"client name {name!r}: use letters, digits, '.', '_' and '-'")
        # A subjectAltName with a name in it: trustme's otherwise empty (critical) one is
        # refused by Java's X.509 parser ("No data available in passed DER encoded value").
        leaf = self._ca.issue_cert(
            f"{name}.client.test",
            common_name=name,
            organization_name=ORGANIZATION,
            organization_unit_name=ORGANIZATION_UNIT,
        )
        return self._keystore(leaf, key_password)

    @staticmethod
    def _keystore(leaf: object, key_password: str | None) -> Keystore:
        from cryptography.hazmat.primitives import serialization

        # PKCS#8 always: trustme writes an EC key as SEC1 ("BEGIN EC PRIVATE KEY"), which
        # Java's PEM keystore does not read.
        private = serialization.load_pem_private_key(
            leaf.private_key_pem.bytes(),  # type: ignore[attr-defined]
            None,
        )
        encryption: serialization.KeySerializationEncryption = (
            serialization.NoEncryption()
            if key_password is None
            else serialization.BestAvailableEncryption(key_password.encode())
        )
        key = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        chain = b"".join(p.bytes() for p in leaf.cert_chain_pems)  # type: ignore[attr-defined]
        return Keystore(key.decode(), chain.decode(), key_password)


@dataclass(frozen=True)
class CertFiles:
    """What `write_certs` wrote."""

    ca: Path
    broker: Path
    clients: dict[str, Path] = field(default_factory=dict)
    key_password: str | None = None


def write_certs(
    out: Path,
    *,
    broker_hosts: Sequence[str] = DEFAULT_BROKER_HOSTS,
    clients: Sequence[str] = (),
    key_password: str | None = None,
) -> CertFiles:
    """Write ca.pem (the truststore), broker.pem and client-<name>.pem (keystores) under
    ``out``; the keystores readable by their owner only."""
    ca = TestCA()
    out.mkdir(parents=True, exist_ok=True)
    ca_path = out / "ca.pem"
    ca_path.write_text(ca.certificate_pem)
    broker_path = _write_private(
        out / "broker.pem", ca.broker(broker_hosts, key_password=key_password).pem
    )
    client_paths = {
        name: _write_private(
            out / f"client-{name}.pem", ca.client(name, key_password=key_password).pem
        )
        for name in dict.fromkeys(clients)
    }
    return CertFiles(ca_path, broker_path, client_paths, key_password)


def _write_private(path: Path, text: str) -> Path:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text)
    return path


def usage(files: CertFiles) -> str:
    """How to use the files: the broker's --set lines and each client's properties."""
    ca, broker = files.ca.resolve(), files.broker.resolve()
    settings = [
        "listeners=SSL://127.0.0.1:9093",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={broker}",
        *([f"ssl.key.password={files.key_password}"] if files.key_password is not None else []),
        f"ssl.truststore.location={ca}",
        "ssl.client.auth=required",
        f"ssl.principal.mapping.rules={CN_MAPPING_RULES}",
    ]
    lines = [
        "# A broker with a TLS listener (mutual TLS: ssl.client.auth=required):",
        "purgatory broker \\",
        " \\\n".join(f"  --set {shlex.quote(setting)}" for setting in settings),
    ]
    for client, trust, keystore in (
        ("librdkafka (confluent-kafka, kcat)", ["ssl.ca.location={ca}"], _LIBRDKAFKA_KEYSTORE),
        (
            "Java clients (Kafka 2.7+ reads PEM stores)",
            ["ssl.truststore.type=PEM", "ssl.truststore.location={ca}"],
            _JAVA_KEYSTORE,
        ),
    ):
        lines += ["", f"# {client}:", "security.protocol=SSL"]
        lines += [line.format(ca=ca) for line in trust]
        for name, path in files.clients.items():
            lines.append(f"# as User:{name}:")
            lines += [line.format(path=path.resolve()) for line in keystore]
            if files.key_password is not None:
                lines.append(f"ssl.key.password={files.key_password}")
    return "\n".join(lines)


def certs_command(args: argparse.Namespace) -> int:
    """`purgatory certs`: write the files and print how to use them."""
    try:
        files = write_certs(
            Path(args.out),
            broker_hosts=args.broker_host or DEFAULT_BROKER_HOSTS,
            clients=args.client or (),
            key_password=args.key_password,
        )
    except ValueError as exc:
        args.command_parser.error(str(exc))
    except OSError as exc:
        print(
            f"purgatory certs: cannot write {exc.filename or args.out}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    print(f"# wrote {files.ca}, {files.broker}" + "".join(f", {p}" for p in files.clients.values()))
    print(usage(files))
    return 0
