"""BrokerLifecycleManager: finding the controller, registering and heartbeating with it,
and taking over when it is gone (Kafka's BrokerLifecycleManager, with our handover)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        incarnation: str,
        config: BrokerConfig,
        metadata: MetadataCache,
        connection_to: Callable[..., Awaitable[Connection]],
        become_controller: Callable[[], Awaitable[None]],
        has_metadata: asyncio.Event,
    ) -> None:
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.config = config
        self.metadata = metadata
        self.connection_to = connection_to
        self.become_controller = become_controller
        self.has_metadata = has_metadata
        self.log = structlog.get_logger("broker_lifecycle").bind(broker_id=broker_id)

    @property
    def members(self) -> dict[int, tuple[str, int]]:
        return self.metadata.members

    async def run(self) -> None:
        """Find the controller and keep registering with it (a heartbeat); the controller
        answers after this broker holds its current picture.

        The controller is the one the latest picture names. When it has been unreachable for
        ``broker.session.timeout.ms`` this broker turns to the lowest member it does not
        consider dead, and becomes the controller itself if that is its own id. A broker
        that starts first asks the others which controller they follow, so one returning
        after a handover joins the acting controller instead of taking over.
        """
        loop = asyncio.get_running_loop()
        backoff = self.config["broker.registration.backoff.ms"] / 1000
        interval = self.config["broker.heartbeat.interval.ms"] / 1000
        session = self.config["broker.session.timeout.ms"] / 1000
        await self._discover_controller()
        unreachable_since: dict[int, float] = {}
        request = ib.BrokerRegistrationRequest(self.broker_id, self.incarnation)
        while True:
            target = self._controller_target(unreachable_since, loop.time(), session)
            if target == self.broker_id:
                await self.become_controller()
                return
            delay = backoff
            try:
                conn = await self.connection_to(target)
                response = await conn.send(
                    ApiKey.BROKER_REGISTRATION,
                    request,
                    timeout_ms=self.config["metadata.push.timeout.ms"] * 2,
                )
                unreachable_since.pop(target, None)
                if response.error_code == ErrorCode.NONE:
                    delay = interval
                elif response.error_code != ErrorCode.NOT_CONTROLLER:  # not yet: try again
                    self.log.warning("registration_refused", error=response.error_message)
            except (ConnectionClosed, KafkaError) as exc:
                unreachable_since.setdefault(target, loop.time())
                if self.has_metadata.is_set():
                    self.log.warning("controller_unreachable", controller=target, error=str(exc))
            await asyncio.sleep(delay)

    def _controller_target(
        self, unreachable_since: dict[int, float], now: float, session: float
    ) -> int:
        def dead(broker_id: int) -> bool:
            since = unreachable_since.get(broker_id)
            return since is not None and now - since >= session

        known = self.metadata.controller_id
        if known != self.broker_id and known in self.members and not dead(known):
            return known
        return next(b for b in sorted(self.members) if b == self.broker_id or not dead(b))

    async def _discover_controller(self) -> None:
        """Learn which controller the other members follow, if any do."""
        newest = await self.newest_snapshot()
        if newest is not None and newest.controller_id in self.members:
            self.metadata.controller_id = newest.controller_id

    async def newest_snapshot(self) -> ib.UpdateMetadataRequest | None:
        """The newest picture (highest metadata epoch) any other reachable member holds
        (FetchSnapshot); None when none has one or none answers within a second."""

        async def ask(broker_id: int) -> ib.UpdateMetadataRequest | None:
            try:
                conn = await self.connection_to(broker_id, timeout_s=1.0)
                response: ib.FetchSnapshotResponse = await conn.send(
                    ApiKey.FETCH_SNAPSHOT, ib.FetchSnapshotRequest(self.broker_id), timeout_ms=1000
                )
                return response.snapshot
            except (ConnectionClosed, KafkaError):
                return None

        others = [b for b in self.members if b != self.broker_id]
        snapshots = [s for s in await asyncio.gather(*(ask(b) for b in others)) if s is not None]
        return max(snapshots, key=lambda s: s.metadata_epoch) if snapshots else None
