"""The SASL configs of the broker (Kafka's BrokerSecurityConfigs and SaslConfigs), and the
listener prefix that scopes a security config to one listener, as Kafka's
``listener.name.<listener>.<config>``: ``listener.name.sasl_ssl.ssl.keystore.location``,
``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``. The SSL configs are in
ssl_configs.py."""

from __future__ import annotations

import re

from purgatory.broker.config.config_def import ConfigDef, at_least, parses
from purgatory.broker.security.authorizer.standard_authorizer import (
    STANDARD_AUTHORIZER,
    parse_super_users,
)

LISTENER_PREFIX = "listener.name."
# The SASL mechanisms served, by Kafka's names (GSSAPI, Kerberos, is not).
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
JAAS_CONFIG = "sasl.jaas.config"


def parse_mechanisms(value: str) -> list[str]:
    """``sasl.enabled.mechanisms``: a comma-separated list of mechanism names."""
    names = [name.strip().upper() for name in value.split(",") if name.strip()]
    for name in names:
        if not re.fullmatch(r"[A-Z0-9_-]{1,20}", name):
            raise ValueError(f"{name!r} is not a SASL mechanism name")
    return names


SASL_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "sasl.enabled.mechanisms",
        str,
        "GSSAPI",
        "The SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener serves, comma-separated: "
        'PLAIN (users from the listener\'s `plain.sasl.jaas.config`, `user_NAME="password"`), '
        "SCRAM-SHA-256 and SCRAM-SHA-512 (users from the metadata log: `purgatory configs "
        "--entity-type users`), OAUTHBEARER (Kafka's unsecured JWT validation). Kafka's "
        "default, GSSAPI (Kerberos), is not served: a SASL listener with only it refuses to "
        "start. Scoped to one listener as `listener.name.<listener>.sasl.enabled.mechanisms`.",
        parses(parse_mechanisms),
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        int,
        0,
        "The longest a SASL session lasts before the client must re-authenticate (KIP-368): "
        "SaslAuthenticate v1+ tells the client this lifetime (or an OAUTHBEARER token's "
        "shorter one), and a request after it on a connection that did not re-authenticate "
        "closes the connection. 0: sessions never expire.",
        at_least(0),
    ),
    ConfigDef(
        "sasl.server.max.receive.size",
        int,
        524288,
        "The largest request accepted on a SASL listener before its client authenticated; a "
        "larger one closes the connection.",
        at_least(1),
    ),
    ConfigDef(
        "sasl.mechanism.inter.broker.protocol",
        str,
        "GSSAPI",
        "The SASL mechanism brokers authenticate to each other with on a SASL_PLAINTEXT or "
        "SASL_SSL inter-broker listener: PLAIN or SCRAM-SHA-256/512, with the `username` and "
        "`password` options of that listener's `<mechanism>.sasl.jaas.config`; a connection "
        "that authenticates as that user is a broker (served the inter-broker APIs), and "
        "`cluster.secret` is then not needed for it. Kafka's default, GSSAPI, is not "
        "served: brokers then prove `cluster.secret` on every listener, as on PLAINTEXT.",
        parses(lambda v: parse_mechanisms(v)[:1] or [""]),
    ),
    ConfigDef(
        "sasl.mechanism.controller.protocol",
        str,
        "GSSAPI",
        "As `sasl.mechanism.inter.broker.protocol`, for the controller listener "
        "(`controller.listener.names`): PLAIN only, as in Kafka (SCRAM's users live in the "
        "metadata log the quorum must first agree on).",
        parses(lambda v: parse_mechanisms(v)[:1] or [""]),
    ),
    ConfigDef(
        "authorizer.class.name",
        str,
        "",
        "The authorizer that decides every request by the ACLs of the metadata log: "
        f"`{STANDARD_AUTHORIZER}` (Kafka's StandardAuthorizer). Empty: none, every "
        "principal may do anything, and CreateAcls, DescribeAcls and DeleteAcls answer "
        "SECURITY_DISABLED, as Kafka does.",
        choices=("", STANDARD_AUTHORIZER),
    ),
    ConfigDef(
        "super.users",
        str,
        "",
        "Principals the authorizer allows everything, whatever the ACLs say, "
        "semicolon-separated: `User:admin;User:alice`.",
        parses(parse_super_users),
    ),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        bool,
        False,
        "With the authorizer: whether an action on a resource no ACL applies to is allowed "
        "(Kafka's default: denied).",
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        int,
        100,
        "How long a failed authentication's answer (SASL_AUTHENTICATION_FAILED) and the "
        "connection's close wait, as Kafka delays them to slow password guessing.",
        at_least(0),
    ),
)

# What ``listener.name.<listener>.`` may scope, beside the SSL configs and the
# ``<mechanism>.sasl.jaas.config`` of each mechanism.
LISTENER_SASL_CONFIGS = ("sasl.enabled.mechanisms", "connections.max.reauth.ms")


def jaas_config_name(mechanism: str) -> str:
    """The config holding a mechanism's JAAS configuration on a listener:
    ``scram-sha-512.sasl.jaas.config``."""
    return f"{mechanism.lower()}.{JAAS_CONFIG}"


_JAAS_SUFFIX = re.compile(
    r"\.(?P<mechanism>plain|scram[.-]sha[.-]256|scram[.-]sha[.-]512|oauthbearer|gssapi)"
    r"\.sasl\.jaas\.config$",
    re.IGNORECASE,
)


def split_listener_config(name: str, scoped: tuple[str, ...]) -> tuple[str, str]:
    """``listener.name.<listener>.<config>`` as (LISTENER, config); ``scoped``: the configs
    a listener may scope. A name from the environment has dots for underscores
    (``listener.name.sasl.ssl.scram.sha.512.sasl.jaas.config``): the listener's dots are
    read as underscores, a mechanism's as dashes. ValueError says what is wrong."""
    rest = name[len(LISTENER_PREFIX) :]
    match = _JAAS_SUFFIX.search(rest)
    if match:
        mechanism = match["mechanism"].upper().replace(".", "-")
        listener, config = rest[: match.start()], jaas_config_name(mechanism)
    else:
        config = next((c for c in scoped if rest.lower().endswith("." + c)), "")
        listener = rest[: -len(config) - 1] if config else ""
        if not config:
            raise ValueError(
                f"{name!r}: a listener scopes only its ssl.* and sasl.* configs "
                f"({', '.join(scoped)}, <mechanism>.sasl.jaas.config)"
            )
    listener = listener.replace(".", "_").upper()
    if not re.fullmatch(r"[A-Z0-9_-]+", listener):
        raise ValueError(f"{name!r} names no listener (listener.name.<listener>.{config})")
    return listener, config
