"""Named listeners, as Kafka has them: ``listeners`` (``NAME://host:port,...``), each
name's security protocol (``listener.security.protocol.map``), the addresses clients are
given (``advertised.listeners``), and which listener brokers use between them
(``inter.broker.listener.name``) and which serve the metadata quorum
(``controller.listener.names``).

Each listener plays one role: a *client* listener serves client APIs only; the
*inter-broker* listener serves them too, and the inter-broker APIs (follower fetches,
ControlledShutdown, ...) to authenticated brokers; a *controller* listener serves
authenticated brokers only (votes, the metadata log, registrations, heartbeats, ...).
Without ``controller.listener.names`` the inter-broker listener is the controller's too,
as with the single listener of the default.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from enum import Enum
from typing import Any

from purgatory.broker.config.addresses import parse_host_port

# Kafka's default listener.security.protocol.map.
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


class ListenerRole(Enum):
    CLIENT = "client"
    INTER_BROKER = "inter-broker"  # also the controller's, without controller.listener.names
    CONTROLLER = "controller"


@dataclass(frozen=True)
class Listener:
    """One bound listener: its name, address (port 0: any free port) and role."""

    name: str
    host: str
    port: int
    role: ListenerRole
    security_protocol: str = "PLAINTEXT"

    @property
    def serves_clients(self) -> bool:
        return self.role is not ListenerRole.CONTROLLER

    @property
    def serves_brokers(self) -> bool:
        return self.role is not ListenerRole.CLIENT


def parse_listeners(value: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` as (name, host, port); a bare ``host:port`` is PLAINTEXT."""
    out: list[tuple[str, str, int]] = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        if not _NAME.fullmatch(name):
            raise ValueError(f"listener name {name!r} in {item!r} is not a name (A-Z, 0-9, _, -)")
        host, port = parse_host_port(address)
        out.append((name.upper(), host, port))
    names = [name for name, _, _ in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"listener name {twice[0]} appears twice: each listener needs its own")
    ports = [port for _, _, port in out if port]
    if len(set(ports)) < len(ports):
        raise ValueError("two listeners bind the same port")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` (listener.security.protocol.map)."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not _NAME.fullmatch(name):
            raise ValueError(f"expected NAME:PROTOCOL, got {item!r}")
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"{protocol!r} (listener {name}) is not a security protocol: one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        out[name.upper()] = protocol.upper()
    return out


def parse_names(value: str) -> list[str]:
    return [n.strip().upper() for n in value.split(",") if n.strip()]


@dataclass(frozen=True)
class ListenerConfig:
    """The listeners of one broker, checked against each other."""

    listeners: tuple[Listener, ...]
    advertised: dict[str, tuple[str, int]]  # named in advertised.listeners
    inter_broker: str
    controller: tuple[str, ...]

    def get(self, name: str) -> Listener:
        return next(listener for listener in self.listeners if listener.name == name)

    @property
    def broker_facing(self) -> Listener:
        """Where the other nodes reach this one (its ``cluster.members`` address): the
        controller listener when there is one, else the inter-broker listener."""
        for listener in self.listeners:
            if listener.role is ListenerRole.CONTROLLER:
                return listener
        return self.get(self.inter_broker)

    def advertised_endpoints(self, bound: dict[str, int]) -> list[tuple[str, str, int]]:
        """(name, host, port) clients and brokers are given for each listener but the
        controller's: advertised.listeners, else the bound address (a wildcard host as
        this machine's name)."""
        out = []
        for listener in self.listeners:
            if listener.role is ListenerRole.CONTROLLER:
                continue
            if listener.name in self.advertised:
                host, port = self.advertised[listener.name]
            else:
                host, port = listener.host, bound.get(listener.name, listener.port)
                if host in ("0.0.0.0", "::", ""):
                    host = socket.gethostname()
            out.append((listener.name, host, port))
        return out


def listener_config(values: dict[str, Any], roles: tuple[str, ...]) -> ListenerConfig:
    """Check the listener settings against each other as Kafka does; ValueError names the
    setting and what to change."""
    bound = parse_listeners(values["listeners"])
    if not bound:
        raise ValueError("listeners is empty: a broker needs at least one")
    names = [name for name, _, _ in bound]
    explicit_map = values["listener.security.protocol.map"] != DEFAULT_PROTOCOL_MAP
    protocols = parse_protocol_map(values["listener.security.protocol.map"])
    controller = parse_names(values["controller.listener.names"])
    if not explicit_map:
        # As Kafka: with the default map, controller listeners are PLAINTEXT.
        protocols.update({name: "PLAINTEXT" for name in controller if name not in protocols})
    for name in names:
        protocol = protocols.get(name)
        if protocol is None:
            raise ValueError(
                f"listener {name} has no security protocol: add {name}:PLAINTEXT (or SSL, "
                "SASL_PLAINTEXT, SASL_SSL) to listener.security.protocol.map"
            )
    if "controller" in roles:
        unbound = [n for n in controller if n not in names]
        if unbound:
            raise ValueError(
                f"controller.listener.names names {unbound[0]}, which listeners does not: "
                "a controller binds its controller listeners"
            )
    else:
        bound_controller = [n for n in controller if n in names]
        if bound_controller:
            raise ValueError(
                f"listener {bound_controller[0]} is a controller listener, but this node is "
                "not a controller (process.roles): remove it from listeners"
            )
    inter_broker = values["inter.broker.listener.name"].strip().upper()
    others = [n for n in names if n not in controller]
    if not others and "broker" in roles:
        raise ValueError(
            "every listener is a controller listener: a broker needs one for clients and "
            "brokers (listeners)"
        )
    if not inter_broker:
        if len(others) == 1:
            inter_broker = others[0]
        elif "PLAINTEXT" in others:
            inter_broker = "PLAINTEXT"
        elif others:
            raise ValueError(
                f"set inter.broker.listener.name to the listener brokers use between them: "
                f"one of {', '.join(others)}"
            )
        else:
            inter_broker = controller[0]  # a controller only: it has no other
    elif inter_broker not in names:
        raise ValueError(
            f"inter.broker.listener.name {inter_broker} is not among listeners ({', '.join(names)})"
        )
    elif inter_broker in controller:
        raise ValueError(
            f"inter.broker.listener.name {inter_broker} is a controller listener: brokers "
            "replicate on a listener of their own"
        )
    advertised: dict[str, tuple[str, int]] = {}
    if values["advertised.listeners"]:
        for name, host, port in parse_listeners(values["advertised.listeners"]):
            if name not in names:
                raise ValueError(
                    f"advertised.listeners names {name}, which listeners does not "
                    f"({', '.join(names)})"
                )
            if name in controller:
                raise ValueError(
                    f"advertised.listeners names the controller listener {name}: brokers "
                    "reach controllers at controller.quorum.voters (cluster.members)"
                )
            if port == 0:
                raise ValueError(f"advertised listener {name} has port 0: clients need one")
            advertised[name] = (host, port)

    def role(name: str) -> ListenerRole:
        if name in controller:
            return ListenerRole.CONTROLLER
        return ListenerRole.INTER_BROKER if name == inter_broker else ListenerRole.CLIENT

    return ListenerConfig(
        tuple(Listener(n, h, p, role(n), protocols[n]) for n, h, p in bound),
        advertised,
        inter_broker,
        tuple(controller),
    )
