"""ControllerChannelManager: the controller's side of the metadata its brokers hold (Kafka's
ControllerChannelManager): which registered broker has applied which epoch of the
picture, and pushing the picture (UpdateMetadata) to one broker or to all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import KafkaError
from purgatory.protocol.inter_broker_messages import UpdateMetadataRequest


class ControllerChannelManager:
    def __init__(
        self,
        config: BrokerConfig,
        picture: Callable[[], UpdateMetadataRequest],
        epoch: Callable[[], int],
        apply_locally: Callable[[UpdateMetadataRequest], Awaitable[None]],
        connect: Callable[[int], Awaitable[Connection]],
        log: Any,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._picture = picture  # builds every topic's state: only when one is sent
        self._epoch = epoch  # the epoch the next picture would carry
        self._apply_locally = apply_locally
        self._connect = connect  # the broker's connections to other members, by id
        self.log = log
        # broker id -> (its incarnation, the epoch it last applied; -1 until it has)
        self.registered: dict[int, tuple[str, int]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def expect(self, broker_id: int, incarnation: str) -> None:
        """Count ``broker_id`` (as ``incarnation``) among the brokers the picture goes to,
        holding none of it yet."""
        self.registered[broker_id] = (incarnation, -1)

    def holds(self, broker_id: int, incarnation: str, epoch: int) -> bool:
        """Whether ``broker_id``, as ``incarnation``, has applied the picture of ``epoch``."""
        return self.registered.get(broker_id) == (incarnation, epoch)

    async def push(self, broker_id: int) -> bool:
        """Send the current picture to one registered broker; False if it did not apply it
        (it is then forgotten until it registers again)."""
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            registration = self.registered.get(broker_id)
            if registration is None:
                return False
            if registration[1] == self._epoch():
                return True
            picture = self._picture()
            timeout_ms = self.config["metadata.push.timeout.ms"]
            conn: Connection | None = None
            try:
                conn = await self._connect(broker_id)
                response = await conn.send(ApiKey.UPDATE_METADATA, picture, timeout_ms=timeout_ms)
                if response.error_code:
                    raise KafkaError(response.error_code, "the broker holds a newer picture")
            except (ConnectionClosed, KafkaError) as exc:
                self.log.warning("metadata_push_failed", target_broker=broker_id, error=str(exc))
                self.registered.pop(broker_id, None)
                if conn is not None:
                    await conn.close()  # the next push opens a fresh one
                return False
            current = self.registered.get(broker_id)
            if current is not None:
                self.registered[broker_id] = (current[0], picture.metadata_epoch)
            return True

    async def publish(self, timeout_ms: int) -> None:
        """Apply the current picture here and push it to every registered broker, waiting
        at most ``timeout_ms`` for them (pushes still going on then carry on unwaited)."""
        await self._apply_locally(self._picture())
        others = [b for b in self.registered if b != self.broker_id]
        if others:
            pushes = [asyncio.ensure_future(self.push(b)) for b in others]
            _, pending = await asyncio.wait(pushes, timeout=max(timeout_ms, 1) / 1000)
            for task in pending:
                task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
