"""Kafka's DefaultSslEngineFactory: the ``ssl.SSLContext`` of an SSL (or SASL_SSL) listener,
and of a broker connecting to another broker's, from the ssl.* configs
(broker/config/ssl_configs.py).

Keystores and truststores are PEM (a file holding the private key and its certificate
chain, or Kafka's inline ``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` /
``ssl.truststore.certificates`` strings) or PKCS12 (read with the ``cryptography`` package).
Whatever is wrong with them is a SslConfigError naming the config and the reason, for the
broker to print at start. Python's ssl loads a key and chain only from a path: inline PEM
goes through an anonymous in-memory file (Linux's memfd) where there is one, else a file
readable by this user only in a private temporary directory, deleted once loaded.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from purgatory.broker.config.ssl_configs import SSL_CONFIGS

_VERIFY_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_DEFAULTS = {d.name: d.default for d in SSL_CONFIGS}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")


class SslConfigError(ValueError):
    """An ssl.* config that cannot make a context: ``config`` names it, the message says
    what is wrong and what to do."""

    def __init__(self, config: str, reason: str) -> None:
        super().__init__(f"{config}: {reason}")
        self.config = config
        self.reason = reason


def server_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of an SSL listener: it presents the keystore (which it must have) and,
    as ``ssl.client.auth`` says, asks clients for a certificate that chains to the
    truststore (none: CERT_NONE, requested: CERT_OPTIONAL, required: CERT_REQUIRED)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, values)
    client_auth = (_value(values, "ssl.client.auth") or "none").lower()
    if client_auth not in _VERIFY_MODES:
        raise SslConfigError(
            "ssl.client.auth", f"{client_auth!r} is not one of none, requested, required"
        )
    if not _load_keystore(context, values):
        raise SslConfigError(
            "ssl.keystore.location",
            "an SSL listener needs a keystore: set ssl.keystore.location (a PEM file with the "
            "private key and its certificate chain), or ssl.keystore.key and "
            "ssl.keystore.certificate.chain (`purgatory certs` writes a test one)",
        )
    context.verify_mode = _VERIFY_MODES[client_auth]
    if not _load_truststore(context, values) and client_auth != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of a broker connecting to another broker's SSL listener: it trusts the
    truststore (else the system's CAs), presents the keystore when there is one, and checks
    the other broker's host name when ``ssl.endpoint.identification.algorithm`` is https."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(context, values)
    algorithm = (_value(values, "ssl.endpoint.identification.algorithm") or "").lower()
    if algorithm not in ("", "https"):
        raise SslConfigError(
            "ssl.endpoint.identification.algorithm", f"{algorithm!r} is not https or empty"
        )
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_keystore(context, values)
    if not _load_truststore(context, values):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context


def _value(values: Mapping[str, Any], name: str) -> str | None:
    """A config's value (its default when ``values`` lacks it), None when unset (Kafka's
    null) or empty."""
    value = values[name] if name in values else _DEFAULTS[name]
    if value is None or value == "":
        return None
    return str(value)


def _store_type(values: Mapping[str, Any], name: str) -> str:
    kind = (_value(values, name) or "PEM").upper()
    if kind == "JKS":
        raise SslConfigError(
            name,
            "JKS cannot be read here (Python's ssl reads PEM; PKCS12 with the cryptography "
            "package): convert it with `keytool -importkeystore -deststoretype PKCS12`, or use "
            "PEM",
        )
    if kind not in ("PEM", "PKCS12"):
        raise SslConfigError(name, f"{kind!r} is not one of PEM, PKCS12")
    return kind


def _set_protocols(context: ssl.SSLContext, values: Mapping[str, Any]) -> None:
    names = [p.strip() for p in (_value(values, "ssl.enabled.protocols") or "").split(",")]
    names = [p for p in names if p]
    if names:
        unknown = [p for p in names if p not in _VERSIONS]
        if unknown:
            raise SslConfigError(
                "ssl.enabled.protocols",
                f"unknown protocols {unknown} (known: {', '.join(_VERSIONS)})",
            )
        versions = sorted(_VERSIONS[p] for p in names)
        context.minimum_version = versions[0]
        context.maximum_version = versions[-1]
    suites = _value(values, "ssl.cipher.suites")
    if suites:
        try:
            context.set_ciphers(":".join(s.strip() for s in suites.split(",") if s.strip()))
        except ssl.SSLError:
            raise SslConfigError(
                "ssl.cipher.suites",
                f"OpenSSL knows none of {suites!r}; give OpenSSL's names "
                "(ECDHE-RSA-AES128-GCM-SHA256, not TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
            ) from None


def _load_keystore(context: ssl.SSLContext, values: Mapping[str, Any]) -> bool:
    """Load the keystore into ``context``; False when none is configured."""
    kind = _store_type(values, "ssl.keystore.type")
    location = _value(values, "ssl.keystore.location")
    chain = _value(values, "ssl.keystore.certificate.chain")
    key = _value(values, "ssl.keystore.key")
    store_password = _value(values, "ssl.keystore.password")
    key_password = _value(values, "ssl.key.password")
    if chain is not None or key is not None:
        if kind != "PEM":
            raise SslConfigError(
                "ssl.keystore.key", "inline keys and chains are PEM: set ssl.keystore.type=PEM"
            )
        if location is not None:
            raise SslConfigError(
                "ssl.keystore.location",
                "give either a keystore file or ssl.keystore.key and "
                "ssl.keystore.certificate.chain, not both",
            )
        if key is None or chain is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise SslConfigError(
                missing, "ssl.keystore.key and ssl.keystore.certificate.chain go together"
            )
        _refuse_pem_store_password(store_password, "ssl.keystore.password")
        _check_pem("ssl.keystore.key", key, "the inline key", need_key=True, need_cert=False)
        _check_pem(
            "ssl.keystore.certificate.chain",
            chain,
            "the inline chain",
            need_key=False,
            need_cert=True,
        )
        with _private_file((key.strip() + "\n" + chain.strip() + "\n").encode()) as path:
            _load_pem_chain(context, path, "ssl.keystore.key", "the inline key", key, key_password)
        return True
    if location is None:
        return False
    if kind == "PKCS12":
        _load_pkcs12_keystore(context, location, store_password, key_password)
        return True
    _refuse_pem_store_password(store_password, "ssl.keystore.password")
    text = _read("ssl.keystore.location", location).decode("latin-1")
    _check_pem("ssl.keystore.location", text, location, need_key=True, need_cert=True)
    _load_pem_chain(context, location, "ssl.keystore.location", location, text, key_password)
    return True


def _refuse_pem_store_password(password: str | None, name: str) -> None:
    if password is not None:
        raise SslConfigError(
            name,
            "a PEM store has no store password (as in Kafka): unset it, and give the "
            "private key's password as ssl.key.password",
        )


def _read(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SslConfigError(name, f"cannot read {path}: {exc.strerror or exc}") from None


def _check_pem(name: str, text: str, what: str, *, need_key: bool, need_cert: bool) -> None:
    labels = _PEM_BLOCK.findall(text)
    if need_key and not any(label.endswith("PRIVATE KEY") for label in labels):
        raise SslConfigError(
            name,
            f"{what} holds no PEM private key (-----BEGIN PRIVATE KEY-----); a PEM keystore "
            "holds the private key and its certificate chain",
        )
    if need_cert and "CERTIFICATE" not in labels:
        raise SslConfigError(name, f"{what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")


def _load_pem_chain(
    context: ssl.SSLContext, path: str, name: str, what: str, text: str, password: str | None
) -> None:
    encrypted = "ENCRYPTED PRIVATE KEY" in text or "Proc-Type: 4,ENCRYPTED" in text
    if encrypted and password is None:
        raise SslConfigError(
            "ssl.key.password", f"the private key in {what} is encrypted: set its password"
        )

    def give_password() -> bytes:  # never OpenSSL's prompt on the terminal
        if password is None:
            raise SslConfigError("ssl.key.password", f"the private key in {what} is encrypted")
        return password.encode()

    try:
        context.load_cert_chain(path, password=give_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise SslConfigError(
                name, f"the private key in {what} is not the key of its first certificate"
            ) from None
        if encrypted:
            raise SslConfigError(
                "ssl.key.password", f"wrong password for the private key in {what}"
            ) from None
        raise SslConfigError(name, f"{what} is not a usable PEM keystore: {exc}") from None


def _load_truststore(context: ssl.SSLContext, values: Mapping[str, Any]) -> bool:
    """Load the trusted certificates into ``context``; False when none are configured."""
    kind = _store_type(values, "ssl.truststore.type")
    location = _value(values, "ssl.truststore.location")
    inline = _value(values, "ssl.truststore.certificates")
    password = _value(values, "ssl.truststore.password")
    if inline is not None:
        if kind != "PEM":
            raise SslConfigError(
                "ssl.truststore.certificates",
                "inline certificates are PEM: set ssl.truststore.type=PEM",
            )
        if location is not None:
            raise SslConfigError(
                "ssl.truststore.location",
                "give either a trust store file or ssl.truststore.certificates, not both",
            )
        _refuse_pem_store_password(password, "ssl.truststore.password")
        _check_pem(
            "ssl.truststore.certificates",
            inline,
            "the inline certificates",
            need_key=False,
            need_cert=True,
        )
        _load_trusted(context, "ssl.truststore.certificates", "the inline certificates", inline)
        return True
    if location is None:
        return False
    data = _read("ssl.truststore.location", location)
    if kind == "PKCS12":
        _load_trusted(
            context,
            "ssl.truststore.location",
            location,
            _pkcs12_certificates(location, data, password),
        )
        return True
    _refuse_pem_store_password(password, "ssl.truststore.password")
    text = data.decode("latin-1")
    _check_pem("ssl.truststore.location", text, location, need_key=False, need_cert=True)
    _load_trusted(context, "ssl.truststore.location", location, text)
    return True


def _load_trusted(context: ssl.SSLContext, name: str, what: str, pem: str) -> None:
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:
        raise SslConfigError(
            name, f"{what} holds a certificate that does not load: {exc}"
        ) from None


def _load_pkcs12_keystore(
    context: ssl.SSLContext, location: str, store_password: str | None, key_password: str | None
) -> None:
    """A PKCS12 keystore, re-written as PEM with the key encrypted under a one-time password
    (so the in-memory or temporary file never holds it in the clear)."""
    serialization, pkcs12 = _cryptography("ssl.keystore.type")
    data = _read("ssl.keystore.location", location)
    password = store_password if store_password is not None else key_password
    try:
        key, cert, others = pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None
        )
    except ValueError as exc:
        raise SslConfigError(
            "ssl.keystore.password",
            f"{location} does not open with the given password, or is not PKCS12: {exc}",
        ) from None
    if key is None or cert is None:
        raise SslConfigError(
            "ssl.keystore.location", f"{location} holds no private key with its certificate"
        )
    one_time = secrets.token_hex(16)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (cert, *others))
    with _private_file(pem) as path:
        _load_pem_chain(context, path, "ssl.keystore.location", location, pem.decode(), one_time)


def _pkcs12_certificates(location: str, data: bytes, password: str | None) -> str:
    serialization, pkcs12 = _cryptography("ssl.truststore.type")
    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError as exc:
        raise SslConfigError(
            "ssl.truststore.password",
            f"{location} does not open with the given password, or is not PKCS12: {exc}",
        ) from None
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.insert(0, store.cert.certificate)
    if not certs:
        raise SslConfigError("ssl.truststore.location", f"{location} holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _cryptography(name: str) -> tuple[Any, Any]:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ModuleNotFoundError:
        raise SslConfigError(
            name,
            "PKCS12 stores are read with the cryptography package, which is not installed: "
            "pip install cryptography, or use PEM",
        ) from None
    return serialization, pkcs12


@contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path to ``data`` that only this process (memfd) or this user (a 0600 file in a 0700
    temporary directory) can read; gone when the block ends."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("purgatory-ssl", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="purgatory-ssl-") as directory:
        path = os.path.join(directory, "store.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
