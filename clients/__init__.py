"""Async clients for Purgatory brokers: Connection, Producer, Consumer, AdminClient."""

from clients.admin import AdminClient
from clients.connection import Connection
from clients.consumer import Consumer
from clients.producer import Producer

__all__ = ["AdminClient", "Connection", "Consumer", "Producer"]
