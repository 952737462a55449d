"""What each listener's security protocol needs, built once at start from the listener's
configs (Kafka's ChannelBuilders): the TLS context of an SSL or SASL_SSL listener, the
principal mapping of its client certificates, and the SASL mechanisms of a SASL_PLAINTEXT
or SASL_SSL listener. A listener whose protocol cannot be served as configured stops the
broker at start with the reason; never a plaintext listener in its place."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from purgatory.broker.config.listeners import Listener, ListenerRole
from purgatory.broker.config.security_configs import (
    LISTENER_PREFIX,
    MECHANISMS,
    jaas_config_name,
    parse_mechanisms,
)
from purgatory.broker.security import ssl_factory
from purgatory.broker.security.sasl import SaslServer
from purgatory.broker.security.sasl.oauthbearer import OAuthBearerSaslServer
from purgatory.broker.security.sasl.plain import PlainSaslServer, plain_users
from purgatory.broker.security.sasl.scram import CredentialLookup, ScramSaslServer
from purgatory.broker.security.sasl_server_authenticator import SaslListener
from purgatory.broker.security.ssl_principal_mapper import SslPrincipalMapper
from purgatory.common.jaas import JaasConfig, parse_jaas_config

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


@dataclass(frozen=True)
class BrokerLogin:
    """How brokers authenticate to each other on a SASL listener (instead of proving
    cluster.secret): the mechanism, and the user they all log in as."""

    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None = None  # the server's, on SSL and SASL_SSL
    principal_mapper: SslPrincipalMapper | None = None  # client certificates' principals
    sasl: SaslListener | None = None
    broker_login: BrokerLogin | None = None  # brokers log in with SASL here

    @property
    def uses_ssl(self) -> bool:
        return self.ssl_context is not None


def listener_security(
    listener: Listener, values: Mapping[str, Any], scram: CredentialLookup
) -> ListenerSecurity:
    """``values``: the listener's configs (BrokerConfig.listener_values). ValueError names
    the listener, the config and what to set."""
    protocol = listener.security_protocol
    context = mapper = sasl = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl_factory.server_context(values)
        except ValueError as exc:
            raise ValueError(f"listener {listener.name} is {protocol}: {exc}") from None
        if protocol == "SSL":
            try:
                mapper = SslPrincipalMapper.from_rules(values["ssl.principal.mapping.rules"])
            except ValueError as exc:
                raise ValueError(f"ssl.principal.mapping.rules: {exc}") from None
    login = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        sasl = _sasl_listener(listener, values, scram)
        login = _broker_login(listener, values, sasl)
    return ListenerSecurity(protocol, context, mapper, sasl, login)


def _broker_login(
    listener: Listener, values: Mapping[str, Any], sasl: SaslListener
) -> BrokerLogin | None:
    """The SASL login of brokers on an inter-broker or controller listener, when
    ``sasl.mechanism.inter.broker.protocol`` (``...controller.protocol``) names a served
    mechanism: its user from the listener's JAAS config (``username``, ``password``)."""
    if listener.role is ListenerRole.CLIENT:
        return None
    controller = listener.role is ListenerRole.CONTROLLER
    config = (
        "sasl.mechanism.controller.protocol"
        if controller
        else "sasl.mechanism.inter.broker.protocol"
    )
    mechanism = values[config].strip().upper()
    if mechanism not in MECHANISMS:
        return None  # GSSAPI, Kafka's default: brokers prove cluster.secret
    name = listener.name
    if mechanism == "OAUTHBEARER" or (controller and mechanism != "PLAIN"):
        raise ValueError(
            f"{config} is {mechanism}: brokers log in with "
            f"{'PLAIN' if controller else 'PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512'} here"
        )
    if mechanism not in sasl.mechanisms:
        raise ValueError(
            f"{config} is {mechanism}, which listener {name}'s sasl.enabled.mechanisms "
            f"({', '.join(sasl.mechanisms)}) does not enable"
        )
    jaas = jaas_config_name(mechanism)
    text = values.get(jaas)
    options = parse_jaas_config(text).options if text else {}
    username, password = options.get("username", ""), options.get("password", "")
    if not username or not password:
        raise ValueError(
            f"brokers log in to listener {name} with {mechanism} ({config}): set username and "
            f"password in {LISTENER_PREFIX}{name.lower()}.{jaas}"
        )
    return BrokerLogin(mechanism, username, password)


def _sasl_listener(
    listener: Listener, values: Mapping[str, Any], scram: CredentialLookup
) -> SaslListener:
    name = listener.name
    scope = f"{LISTENER_PREFIX}{name.lower()}."
    mechanisms = parse_mechanisms(values["sasl.enabled.mechanisms"])
    unserved = [m for m in mechanisms if m not in MECHANISMS]
    if unserved or not mechanisms:
        raise ValueError(
            f"listener {name} is {listener.security_protocol}, and sasl.enabled.mechanisms "
            f"({values['sasl.enabled.mechanisms'] or 'empty'}) names "
            f"{'none' if not mechanisms else ', '.join(unserved)}, which is not served: set "
            f"{scope}sasl.enabled.mechanisms (or sasl.enabled.mechanisms) to some of "
            f"{', '.join(MECHANISMS)}"
        )
    jaas: dict[str, JaasConfig] = {}
    for mechanism in mechanisms:
        config = jaas_config_name(mechanism)
        text = values.get(config)
        if text is None:
            if mechanism == "PLAIN":
                raise ValueError(
                    f"listener {name} enables PLAIN, whose users are the options of "
                    f"{scope}{config}: set it, e.g. '{_LOGIN_MODULES['PLAIN']} required "
                    'user_alice="alice-secret";\''
                )
            continue
        try:
            jaas[mechanism] = parse_jaas_config(text)
        except ValueError as exc:
            raise ValueError(f"{scope}{config}: {exc}") from None
        if jaas[mechanism].login_module != _LOGIN_MODULES[mechanism]:
            raise ValueError(
                f"{scope}{config} names {jaas[mechanism].login_module}, but {mechanism} "
                f"takes {_LOGIN_MODULES[mechanism]}"
            )
    if "OAUTHBEARER" in mechanisms:  # its options checked now, not at a client's login
        OAuthBearerSaslServer(jaas["OAUTHBEARER"].options if "OAUTHBEARER" in jaas else {})
    users = plain_users(jaas["PLAIN"].options) if "PLAIN" in jaas else {}

    def new_server(mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainSaslServer(users)
        if mechanism == "OAUTHBEARER":
            options = jaas["OAUTHBEARER"].options if "OAUTHBEARER" in jaas else {}
            return OAuthBearerSaslServer(options)
        return ScramSaslServer(mechanism, scram)

    return SaslListener(
        mechanisms,
        new_server,
        max_reauth_ms=values["connections.max.reauth.ms"],
        failed_delay_ms=values["connection.failed.authentication.delay.ms"],
        max_receive_size=values["sasl.server.max.receive.size"],
    )


def unknown_listener_overrides(
    overrides: Mapping[str, Mapping[str, Any]], listeners: Mapping[str, Listener]
) -> str | None:
    """Why a ``listener.name.<listener>.`` config names no listener, if one does."""
    for name in overrides:
        if name not in listeners:
            return (
                f"listener.name.{name.lower()}.* configs name listener {name}, which listeners "
                f"does not ({', '.join(listeners)})"
            )
    return None
