"""Addresses in configs: ``host:port`` (optionally ``PLAINTEXT://host:port``) and the
``id@host:port,...`` list of cluster members."""

from __future__ import annotations


def parse_host_port(value: str) -> tuple[str, int]:
    text = value.split("://", 1)[1] if "://" in value else value
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected host:port, got {value!r}")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"port {port!r} in {value!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port {number} in {value!r} is out of range")
    return host.strip("[]"), number


def parse_members(value: str) -> dict[int, tuple[str, int]]:
    """Parse ``0@127.0.0.1:9092,1@127.0.0.1:9093`` into {id: (host, port)}."""
    members: dict[int, tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        ident, sep, address = item.partition("@")
        if not sep:
            raise ValueError(f"member {item!r} is not of the form id@host:port")
        try:
            broker_id = int(ident)
        except ValueError:
            raise ValueError(f"broker id {ident!r} in {item!r} is not a number") from None
        if broker_id < 0:
            raise ValueError(f"broker id {broker_id} in {item!r} is negative")
        if broker_id in members:
            raise ValueError(f"broker id {broker_id} appears twice")
        members[broker_id] = parse_host_port(address)
    return members
