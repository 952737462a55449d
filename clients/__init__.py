"""Async clients for Purgatory brokers: Connection, Producer, Consumer, AdminClient.

Each is imported when first asked for: a broker needs only Connection, and the
consumer's modules bring Kafka's schemas (kio), which take a broker's start ~0.15 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from purgatory.clients.admin import AdminClient
    from purgatory.clients.connection import Connection
    from purgatory.clients.consumer import Consumer
    from purgatory.clients.producer import Producer

__all__ = ["AdminClient", "Connection", "Consumer", "Producer"]

_MODULES = {
    "AdminClient": "purgatory.clients.admin",
    "Connection": "purgatory.clients.connection",
    "Consumer": "purgatory.clients.consumer",
    "Producer": "purgatory.clients.producer",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'purgatory.clients' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
