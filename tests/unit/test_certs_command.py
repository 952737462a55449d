"""`purgatory certs` writes a CA, a broker keystore and client keystores that make working
TLS contexts, and prints the configs that use them."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

pytest.importorskip("trustme")

from purgatory.broker.security.ssl_factory import client_context, server_context
from purgatory.cli import main


def test_certs_writes_stores_that_make_a_mutual_tls_handshake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    assert main(["certs", "--out", str(out), "--client", "alice", "--key-password", "pw"]) == 0
    printed = capsys.readouterr().out
    ca, broker, alice = out / "ca.pem", out / "broker.pem", out / "client-alice.pem"
    assert f"--set ssl.keystore.location={broker}" in printed
    assert "--set ssl.key.password=pw" in printed
    assert f"ssl.certificate.location={alice}" in printed  # librdkafka's
    assert f"ssl.keystore.location={alice}" in printed  # Java's
    assert broker.stat().st_mode & 0o777 == 0o600
    server = server_context(
        {
            "ssl.keystore.location": str(broker),
            "ssl.key.password": "pw",
            "ssl.truststore.location": str(ca),
            "ssl.client.auth": "required",
        }
    )
    client = client_context(
        {
            "ssl.truststore.location": str(ca),
            "ssl.keystore.location": str(alice),
            "ssl.key.password": "pw",
        }
    )
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    client_side = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client_side, server_side):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    peer = server_side.getpeercert()
    assert peer is not None
    assert peer["subject"][-1] == (("commonName", "alice"),)


def test_certs_refuses_a_bad_client_name_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["certs", "--out", str(tmp_path), "--client", "no spaces"])
    assert exited.value.code == 2
    assert "client name 'no spaces'" in capsys.readouterr().err


def test_certs_says_when_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["certs", "--out", str(blocker / "certs")]) == 1
    assert "purgatory certs: cannot write" in capsys.readouterr().err
