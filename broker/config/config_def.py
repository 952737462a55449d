"""ConfigDef (Kafka's): one config's name, type, default, meaning and check, and the
checks the config tables share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from purgatory.broker.config.addresses import parse_host_port


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key and what is wrong."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: type
    default: Any
    doc: str
    validate: Callable[[Any], str | None] | None = None  # returns a complaint, or None
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    dynamic: bool = False
    topic_name: str | None = None  # the topic-level config this broker config defaults
    sensitive: bool = False  # never shown (Kafka's PASSWORD type: described as null)


def at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be >= {n}"


def minus_one_or_at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v == -1 or v >= n else f"must be -1 (unlimited) or >= {n}"


def between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def parses(parse: Callable[[str], Any]) -> Callable[[Any], str | None]:
    """A check that ``parse`` accepts the value (its ValueError is the complaint)."""

    def check(value: Any) -> str | None:
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None

    return check


host_port = parses(parse_host_port)
