"""The SSL listener's contexts from the ssl.* configs (Kafka's DefaultSslEngineFactory):
PEM keystores in files and inline, encrypted keys, clear errors, and real handshakes
(mutual TLS with the client's principal through ssl.principal.mapping.rules)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trustme")

from purgatory.broker.security.ssl_factory import SslConfigError, client_context, server_context
from purgatory.broker.security.ssl_principal_mapper import SslPrincipalMapper, distinguished_name
from purgatory.testing.certs import CN_MAPPING_RULES, TestCA, write_certs


@pytest.fixture(scope="module")
def ca() -> TestCA:
    return TestCA()


def _handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, host: str = "127.0.0.1"
) -> ssl.SSLObject:
    """Run a TLS handshake in memory (no sockets); the server's SSLObject after it. An
    ssl.SSLError from either side propagates."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    client_side = client.wrap_bio(c_in, c_out, server_hostname=host)
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLSv1.3: the server's verdict on the client's certificate reaches the client
            # after its handshake; a round of application data brings it.
            client_side.write(b"ping")
            s_in.write(c_out.read())
            assert server_side.read(4) == b"ping"
            server_side.write(b"pong")
            c_in.write(s_out.read())
            assert client_side.read(4) == b"pong"
            return server_side
    raise AssertionError("the handshake did not finish")


def _broker(ca: TestCA, **extra: Any) -> dict[str, Any]:
    keystore = ca.broker()
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": keystore.chain_pem,
        "ssl.keystore.key": keystore.key_pem,
        "ssl.truststore.certificates": ca.certificate_pem,
        **extra,
    }


def test_a_server_context_from_a_pem_keystore_file_serves_a_client_trusting_the_ca(
    ca: TestCA, tmp_path: Path
) -> None:
    files = write_certs(tmp_path)
    server = server_context({"ssl.keystore.location": str(files.broker)})
    client = client_context({"ssl.truststore.location": str(files.ca)})
    assert client.check_hostname  # ssl.endpoint.identification.algorithm defaults to https
    session = _handshake(server, client)
    assert session.version() in ("TLSv1.2", "TLSv1.3")
    assert session.getpeercert() is None  # ssl.client.auth=none asks for no certificate


def test_inline_pem_strings_make_the_same_contexts(ca: TestCA) -> None:
    server = server_context(_broker(ca))
    client = client_context({"ssl.truststore.certificates": ca.certificate_pem})
    _handshake(server, client)


def test_the_client_checks_the_brokers_host_name_unless_the_algorithm_is_empty(
    ca: TestCA,
) -> None:
    server = server_context(_broker(ca))
    trusting = {"ssl.truststore.certificates": ca.certificate_pem}
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(server, client_context(trusting), host="broker.example")
    relaxed = client_context({**trusting, "ssl.endpoint.identification.algorithm": ""})
    _handshake(server, relaxed, host="broker.example")


def test_a_client_not_trusting_the_ca_is_refused(ca: TestCA) -> None:
    other = TestCA()
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(
            server_context(_broker(ca)),
            client_context({"ssl.truststore.certificates": other.certificate_pem}),
        )


def test_mutual_tls_gives_the_clients_principal_through_the_mapping_rules(ca: TestCA) -> None:
    alice = ca.client("alice")
    server = server_context(_broker(ca, **{"ssl.client.auth": "required"}))
    assert server.verify_mode == ssl.CERT_REQUIRED
    client = client_context(
        {
            "ssl.truststore.certificates": ca.certificate_pem,
            "ssl.keystore.certificate.chain": alice.chain_pem,
            "ssl.keystore.key": alice.key_pem,
        }
    )
    session = _handshake(server, client)
    der = session.getpeercert(binary_form=True)
    assert der is not None
    dn = distinguished_name(der)
    assert dn == "CN=alice,OU=test,O=Purgatory"
    assert distinguished_name(session.getpeercert()) == dn  # type: ignore[arg-type]
    assert SslPrincipalMapper.from_rules(CN_MAPPING_RULES).name(dn) == "alice"
    assert SslPrincipalMapper.from_rules("DEFAULT").name(dn) == dn


def test_client_auth_required_refuses_a_client_without_a_certificate(ca: TestCA) -> None:
    server = server_context(_broker(ca, **{"ssl.client.auth": "required"}))
    client = client_context({"ssl.truststore.certificates": ca.certificate_pem})
    with pytest.raises(ssl.SSLError):
        _handshake(server, client)


def test_client_auth_requested_serves_a_client_without_a_certificate(ca: TestCA) -> None:
    server = server_context(_broker(ca, **{"ssl.client.auth": "requested"}))
    assert server.verify_mode == ssl.CERT_OPTIONAL
    session = _handshake(
        server, client_context({"ssl.truststore.certificates": ca.certificate_pem})
    )
    assert session.getpeercert(binary_form=True) is None  # Kafka's User:ANONYMOUS


def test_an_encrypted_key_loads_with_its_password(ca: TestCA, tmp_path: Path) -> None:
    files = write_certs(tmp_path, key_password="s3cret")
    assert "ENCRYPTED PRIVATE KEY" in files.broker.read_text()
    server = server_context(
        {"ssl.keystore.location": str(files.broker), "ssl.key.password": "s3cret"}
    )
    _handshake(server, client_context({"ssl.truststore.location": str(files.ca)}))


def test_an_encrypted_key_without_its_password_names_ssl_key_password(tmp_path: Path) -> None:
    files = write_certs(tmp_path, key_password="s3cret")
    with pytest.raises(
        SslConfigError, match=r"^ssl\.key\.password: the private key in .* is encrypted"
    ):
        server_context({"ssl.keystore.location": str(files.broker)})


def test_a_wrong_key_password_names_ssl_key_password(tmp_path: Path) -> None:
    files = write_certs(tmp_path, key_password="s3cret")
    with pytest.raises(SslConfigError, match=r"^ssl\.key\.password: wrong password") as caught:
        server_context({"ssl.keystore.location": str(files.broker), "ssl.key.password": "nope"})
    assert caught.value.config == "ssl.key.password"


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({}, r"^ssl\.keystore\.location: an SSL listener needs a keystore"),
        (
            {"ssl.keystore.location": "/no/such/keystore.pem"},
            r"^ssl\.keystore\.location: cannot read /no/such/keystore\.pem: No such file",
        ),
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"},
            r"^ssl\.keystore\.type: JKS cannot be read here .*PKCS12",
        ),
        ({"ssl.keystore.type": "BKS"}, r"^ssl\.keystore\.type: 'BKS' is not one of PEM, PKCS12"),
        ({"ssl.client.auth": "maybe"}, r"^ssl\.client\.auth: 'maybe' is not one of"),
        (
            {"ssl.enabled.protocols": "SSLv3"},
            r"^ssl\.enabled\.protocols: unknown protocols \['SSLv3'\]",
        ),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, r"^ssl\.cipher\.suites: OpenSSL knows none"),
    ],
)
def test_configs_that_cannot_make_a_context_name_the_config(
    values: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(SslConfigError, match=pattern):
        server_context(values)


def test_a_keystore_without_a_key_or_without_a_certificate_says_so(
    ca: TestCA, tmp_path: Path
) -> None:
    only_chain = tmp_path / "chain.pem"
    only_chain.write_text(ca.broker().chain_pem)
    with pytest.raises(
        SslConfigError, match=r"^ssl\.keystore\.location: .*holds no PEM private key"
    ):
        server_context({"ssl.keystore.location": str(only_chain)})
    only_key = tmp_path / "key.pem"
    only_key.write_text(ca.broker().key_pem)
    with pytest.raises(
        SslConfigError, match=r"^ssl\.keystore\.location: .*holds no PEM certificate"
    ):
        server_context({"ssl.keystore.location": str(only_key)})
    with pytest.raises(SslConfigError, match=r"^ssl\.keystore\.certificate\.chain: .*go together"):
        server_context({"ssl.keystore.key": ca.broker().key_pem})


def test_a_key_that_is_not_the_certificates_says_so(ca: TestCA) -> None:
    values = _broker(ca, **{"ssl.keystore.key": ca.broker().key_pem})  # another key
    with pytest.raises(SslConfigError, match="is not the key of its first certificate"):
        server_context(values)


def test_a_pem_store_refuses_a_store_password_as_kafka_does(ca: TestCA) -> None:
    with pytest.raises(
        SslConfigError, match=r"^ssl\.keystore\.password: a PEM store has no store password"
    ):
        server_context(_broker(ca, **{"ssl.keystore.password": "x"}))


def test_a_truststore_that_is_not_pem_says_so(ca: TestCA, tmp_path: Path) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(
        SslConfigError, match=r"^ssl\.truststore\.location: .*holds no PEM certificate"
    ):
        client_context({"ssl.truststore.location": str(junk)})


def test_a_pkcs12_keystore_and_truststore_are_read_with_cryptography(
    ca: TestCA, tmp_path: Path
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    keystore = ca.broker()
    key = serialization.load_pem_private_key(keystore.key_pem.encode(), None)
    leaf, *chain = x509.load_pem_x509_certificates(keystore.chain_pem.encode())
    store = tmp_path / "broker.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker",
            key,  # type: ignore[arg-type]
            leaf,
            chain,
            serialization.BestAvailableEncryption(b"storepass"),
        )
    )
    trust = tmp_path / "trust.p12"
    ca_cert = x509.load_pem_x509_certificate(ca.certificate_pem.encode())
    trust.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [ca_cert], serialization.BestAvailableEncryption(b"trustpass")
        )
    )
    server = server_context(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(store),
            "ssl.keystore.password": "storepass",
        }
    )
    client = client_context(
        {
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(trust),
            "ssl.truststore.password": "trustpass",
        }
    )
    _handshake(server, client)
    with pytest.raises(SslConfigError, match=r"^ssl\.keystore\.password: .*does not open"):
        server_context(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(store),
                "ssl.keystore.password": "no",
            }
        )


async def test_mutual_tls_over_a_loopback_connection_with_asyncio(ca: TestCA) -> None:
    alice = ca.client("alice")
    server = server_context(_broker(ca, **{"ssl.client.auth": "required"}))
    client = client_context(
        {
            "ssl.truststore.certificates": ca.certificate_pem,
            "ssl.keystore.certificate.chain": alice.chain_pem,
            "ssl.keystore.key": alice.key_pem,
        }
    )
    mapper = SslPrincipalMapper.from_rules(CN_MAPPING_RULES)
    principals: asyncio.Queue[str] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        await principals.put(mapper.name(distinguished_name(der)))
        writer.write(await reader.readexactly(4))
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 10) == b"ping"
        assert await asyncio.wait_for(principals.get(), 10) == "alice"
        writer.close()
        await writer.wait_closed()
    finally:
        listener.close()
        await listener.wait_closed()


def test_inline_pem_goes_through_a_private_file_that_is_gone_after(
    ca: TestCA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where there is no memfd (macOS), a 0600 file in a private temporary directory.
    import os
    import tempfile

    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _handshake(
        server_context(_broker(ca)),
        client_context({"ssl.truststore.certificates": ca.certificate_pem}),
    )
    assert list(tmp_path.iterdir()) == []
