"""What an API handler returns, on either protocol, and the network layer acts on:

- the response body (a msgspec Struct on our protocol, a kio dataclass on Kafka's);
- ``None`` when no response is due (Produce with acks=0);
- a ``Deferred`` when the answer waits in a purgatory (its future resolves to a domain
  result, turned into the body when it does);
- an awaitable of a body when the answer needs another broker (metadata with topic
  auto-creation, CreateTopics forwarded to the controller, registrations);
- or it raises ``CloseConnection`` (a failed acks=0 produce) or a ``RequestError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Deferred(NamedTuple, Generic[T]):
    """An answer waiting in a purgatory: ``to_response`` turns what ``future`` resolves
    to into the response body (called by the network layer when it resolves)."""

    future: asyncio.Future[T]
    to_response: Callable[[T], Any]


# Any of the above: the two protocols' bodies share no type.
Result = Any


class CloseConnection(Exception):
    """Kafka's answer to a failed acks=0 produce: close the connection so the client notices."""


def answer(result: T | asyncio.Future[T], to_response: Callable[[T], Any]) -> Result:
    """The response now, or a Deferred one when ``result`` is still a future (the group
    coordinator answers either way)."""
    if isinstance(result, asyncio.Future):
        return Deferred(result, to_response)
    return to_response(result)
