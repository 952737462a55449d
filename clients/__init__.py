"""Async clients for Purgatory brokers: Connection, Producer, Consumer, AdminClient."""

from purgatory.clients.admin import AdminClient
from purgatory.clients.connection import Connection
from purgatory.clients.consumer import Consumer
from purgatory.clients.producer import Producer

__all__ = ["AdminClient", "Connection", "Consumer", "Producer"]
