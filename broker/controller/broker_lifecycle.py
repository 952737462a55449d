"""BrokerLifecycleManager: this run of the broker's registration with the active controller
and its heartbeats (Kafka's BrokerLifecycleManager).

A broker registers once per run (a new ``incarnation_id`` each start: what it held in
memory is gone) and learns its broker epoch; then it heartbeats every
``broker.heartbeat.interval.ms`` with the metadata offset it has applied. The controller
unfences it once that reaches its registration, and fences it when the heartbeats stop
for ``broker.session.timeout.ms``. A heartbeat answered STALE_BROKER_EPOCH (the
controller lost its registration, or another run registered) registers again. While
fenced it heartbeats every ``broker.registration.backoff.ms``, so it is unfenced soon
after it catches up. A new quorum leader wakes it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import NamedTuple

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.controller_channel import ControllerChannel
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError, error_name


class Advertised(NamedTuple):
    """What a broker registers: its inter-broker address, and every listener's."""

    host: str
    port: int
    listeners: tuple[tuple[str, str, int], ...]


class BrokerLifecycleManager:
    def __init__(
        self,
        broker_id: int,
        incarnation_id: str,
        address: Callable[[], Advertised],
        config: BrokerConfig,
        channel: ControllerChannel,
        metadata_offset: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.incarnation_id = incarnation_id
        self.address = address
        self.config = config
        self.channel = channel
        self.metadata_offset = metadata_offset
        self.broker_epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()  # the controller has unfenced this run
        self._wake = asyncio.Event()
        self.log = structlog.get_logger("broker_lifecycle").bind(broker_id=broker_id)

    def controller_changed(self) -> None:
        """A new quorum leader: talk to it now rather than at the next heartbeat."""
        self._wake.set()

    async def run(self) -> None:
        backoff = self.config["broker.registration.backoff.ms"]
        interval = self.config["broker.heartbeat.interval.ms"]
        warned = False
        while True:
            delay = backoff
            try:
                if self.broker_epoch < 0:
                    await self._register()
                if self.broker_epoch >= 0 and await self._heartbeat():
                    delay = backoff if self.fenced else interval
                warned = False
            except (ConnectionError, KafkaError) as exc:
                if not warned and self.unfenced.is_set():
                    self.log.warning(
                        "controller_unreachable",
                        controller=self.channel.controller_id(),
                        error=str(exc),
                    )
                    warned = True
            await self._sleep(delay)

    async def _sleep(self, delay_ms: int) -> None:
        """``delay_ms``, cut short by a wake-up (one that came meanwhile counts)."""
        if not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_ms / 1000):
                    await self._wake.wait()
        self._wake.clear()

    async def _register(self) -> None:
        advertised = self.address()
        response: ib.BrokerRegistrationResponse = await self.channel.call(
            ApiKey.BROKER_REGISTRATION,
            ib.BrokerRegistrationRequest(
                self.broker_id,
                self.incarnation_id,
                advertised.host,
                advertised.port,
                self.config["cluster.id"],
                advertised.listeners,
            ),
        )
        if response.error_code:
            if response.error_code != ErrorCode.NOT_CONTROLLER:
                self.log.warning(
                    "registration_refused",
                    error=error_name(response.error_code),
                    message=response.error_message,
                )
            return
        self.broker_epoch = response.broker_epoch
        self.log.info("broker_registered", broker_epoch=self.broker_epoch)

    async def _heartbeat(self) -> bool:
        """One heartbeat; True when it was answered."""
        response: ib.BrokerHeartbeatResponse = await self.channel.call(
            ApiKey.BROKER_HEARTBEAT,
            ib.BrokerHeartbeatRequest(self.broker_id, self.broker_epoch, self.metadata_offset()),
        )
        if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
            self.log.warning("broker_registration_lost", broker_epoch=self.broker_epoch)
            self.broker_epoch = -1
            self._wake.set()
            return False
        if response.error_code:
            return False
        if response.is_fenced != self.fenced:
            self.log.info("broker_fenced" if response.is_fenced else "broker_unfenced")
        self.fenced = response.is_fenced
        if self.fenced:
            self.unfenced.clear()
        else:
            self.unfenced.set()
        return True
