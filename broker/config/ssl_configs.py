"""The TLS configs of SSL and SASL_SSL listeners (Kafka's SslConfigs and the ssl.* of
BrokerSecurityConfigs): keystore, truststore, client authentication, protocols and the
principal mapping. broker/security/ssl_factory.py makes the contexts from them."""

from __future__ import annotations

from typing import Any

from purgatory.broker.config.config_def import ConfigDef, parses
from purgatory.broker.security.ssl_principal_mapper import SslPrincipalMapper

STORE_TYPES = ("PEM", "PKCS12", "JKS")
CLIENT_AUTH = ("none", "requested", "required")
PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")


def _store_type(value: Any) -> str | None:
    if value.upper() == "JKS":
        return (
            "cannot be read here (Python's ssl reads PEM; PKCS12 with the cryptography "
            "package): convert the store with `keytool -importkeystore -deststoretype PKCS12` "
            "or use PEM (`purgatory certs` writes a test CA and PEM keystores)"
        )
    if value.upper() not in STORE_TYPES:
        return "is not one of PEM, PKCS12"
    return None


def _protocols(value: Any) -> str | None:
    unknown = [p for p in (s.strip() for s in value.split(",")) if p and p not in PROTOCOLS]
    return f"names unknown protocols {unknown} (known: {', '.join(PROTOCOLS)})" if unknown else None


SSL_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "ssl.keystore.type",
        str,
        "PEM",
        "The file format of the key store file: `PEM` (the private key and its certificate "
        "chain in one file, or inline in `ssl.keystore.key` and "
        "`ssl.keystore.certificate.chain`) or `PKCS12` (read with the cryptography package). "
        "Kafka's default is JKS, a Java format Python cannot read, so the default here is "
        "PEM; JKS is refused at start with the way to convert it.",
        _store_type,
    ),
    ConfigDef(
        "ssl.keystore.location",
        str,
        None,
        "The location of the key store file: the broker's private key and certificate chain, "
        "presented to clients (and, from the inter-broker listener's configs, to other "
        "brokers).",
    ),
    ConfigDef(
        "ssl.keystore.password",
        str,
        None,
        "The store password for the key store file (PKCS12). A PEM keystore has no store "
        "password, as in Kafka: its key's password is `ssl.key.password`.",
        sensitive=True,
    ),
    ConfigDef(
        "ssl.key.password",
        str,
        None,
        "The password of the private key in the key store file or the PEM key specified in "
        "`ssl.keystore.key`; needed when the key is encrypted.",
        sensitive=True,
    ),
    ConfigDef(
        "ssl.keystore.certificate.chain",
        str,
        None,
        "Certificate chain in the format specified by `ssl.keystore.type`: PEM, the "
        "certificates one after another (X.509), with `ssl.keystore.key`, instead of a "
        "keystore file.",
    ),
    ConfigDef(
        "ssl.keystore.key",
        str,
        None,
        "Private key in the format specified by `ssl.keystore.type`: PEM, PKCS#8 (encrypted "
        "with `ssl.key.password` or not), with `ssl.keystore.certificate.chain`.",
        sensitive=True,
    ),
    ConfigDef(
        "ssl.truststore.type",
        str,
        "PEM",
        "The file format of the trust store file: `PEM` (certificates one after another) or "
        "`PKCS12`. Kafka's default is JKS; here PEM, as `ssl.keystore.type`.",
        _store_type,
    ),
    ConfigDef(
        "ssl.truststore.location",
        str,
        None,
        "The location of the trust store file: the CAs a client's (or another broker's) "
        "certificate must chain to. Unset: the system's CAs.",
    ),
    ConfigDef(
        "ssl.truststore.password",
        str,
        None,
        "The password for the trust store file (PKCS12). A PEM trust store has none, as in Kafka.",
        sensitive=True,
    ),
    ConfigDef(
        "ssl.truststore.certificates",
        str,
        None,
        "Trusted certificates in the format specified by `ssl.truststore.type`: PEM, one "
        "after another, instead of a trust store file.",
    ),
    ConfigDef(
        "ssl.client.auth",
        str,
        "none",
        "Whether the broker asks clients for a certificate (mutual TLS): `required` refuses "
        "a client without one that chains to the trust store; `requested` asks, and a client "
        "may choose not to give one (it is then `User:ANONYMOUS`); `none` does not ask. A "
        "client's certificate makes its principal (`ssl.principal.mapping.rules`).",
        choices=CLIENT_AUTH,
    ),
    ConfigDef(
        "ssl.enabled.protocols",
        str,
        "TLSv1.2,TLSv1.3",
        "The list of protocols enabled for SSL connections. Python's ssl enables the range "
        "from the oldest to the newest named.",
        _protocols,
    ),
    ConfigDef(
        "ssl.protocol",
        str,
        "TLSv1.3",
        "The SSL protocol used to generate the SSLContext (Java's name for it). Accepted so "
        "Kafka's files work; `ssl.enabled.protocols` alone decides the versions here.",
    ),
    ConfigDef(
        "ssl.cipher.suites",
        str,
        "",
        "A list of cipher suites for TLSv1.2 and older, comma-separated, by OpenSSL's names "
        "(`ECDHE-RSA-AES128-GCM-SHA256`; Java's `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256` are "
        "not known to OpenSSL). Empty: OpenSSL's defaults. TLSv1.3's suites are always "
        "OpenSSL's.",
    ),
    ConfigDef(
        "ssl.endpoint.identification.algorithm",
        str,
        "https",
        "The endpoint identification algorithm to validate server hostname using server "
        "certificate: `https` checks a broker's name (or address) against its certificate "
        "when this broker connects to another one; empty does not.",
    ),
    ConfigDef(
        "ssl.principal.mapping.rules",
        str,
        "DEFAULT",
        "A list of rules for mapping from the distinguished name of a client certificate to "
        "a short name, `RULE:pattern/replacement/[LU]` or `DEFAULT` (the distinguished name "
        "itself, as Java writes it: `CN=alice,OU=eng,O=acme`), comma-separated, tried in "
        "order; the first that matches gives the principal `User:NAME`. A name no rule "
        "matches fails the connection's authentication.",
        parses(SslPrincipalMapper),
    ),
)
