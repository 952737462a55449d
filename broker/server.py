"""Broker: assembles one broker (network, KafkaApis, ReplicaManager, controller role, admin
HTTP) on the running event loop, and runs its registration with the controller."""

from __future__ import annotations

import asyncio
import datetime
import functools
import socket
import uuid
from collections.abc import Awaitable, Coroutine
from typing import Any

import structlog

from purgatory.broker.api.kafka_apis import KafkaApis
from purgatory.broker.config.addresses import parse_host_port
from purgatory.broker.config.broker_config import BrokerConfig, check_consistency
from purgatory.broker.config.definitions import BY_NAME
from purgatory.broker.config.server_configs import parse_per_ip_overrides
from purgatory.broker.controller.alter_partition_manager import AlterPartitionManager
from purgatory.broker.controller.broker_lifecycle import BrokerLifecycleManager
from purgatory.broker.controller.controller import Controller
from purgatory.broker.controller.controller_metrics import controller_families
from purgatory.broker.controller.forwarding_manager import ForwardingManager
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.coordinator.group_coordinator import GroupCoordinator
from purgatory.broker.coordinator.producer_id_manager import ProducerIdManager
from purgatory.broker.network.leader_endpoint import RemoteLeaderEndPoint
from purgatory.broker.network.msgpack_codec import MsgpackCodec
from purgatory.broker.network.served_protocol import LazyProtocol, ServedProtocol
from purgatory.broker.network.socket_server import SocketServer
from purgatory.broker.ops.admin_http import AdminServer
from purgatory.broker.ops.faults import FaultInjector
from purgatory.broker.ops.metrics import BrokerMetrics, gc_pause_families
from purgatory.broker.ops.structured_logging import configure_logging
from purgatory.broker.purgatory import LoopScheduler
from purgatory.broker.replication.replica_fetcher import FetcherStats
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.common import gc_policy
from purgatory.common.broker_state import BrokerState
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

# What serving Kafka's protocol imports (kio's schemas among them), on a thread.
KAFKA_LISTENER_MODULES = (
    "purgatory.broker.api.kafka.apis",
    "purgatory.broker.network.kafka_codec",
    "purgatory.protocol.consumer_protocol",
)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.incarnation = uuid.uuid4().hex
        self.metrics = BrokerMetrics(self.broker_id)
        self.members = config.members()
        if self.members and self.broker_id not in self.members:
            raise ValueError(
                f"broker.id {self.broker_id} is not in cluster.members "
                f"({', '.join(map(str, sorted(self.members)))})"
            )
        check_consistency(config.values)
        # Until a controller says otherwise, the lowest id is taken to be the controller.
        self.metadata = MetadataCache(
            self.members, min(self.members) if self.members else self.broker_id
        )
        self.scheduler = LoopScheduler()
        self.controller: Controller | None = None
        self.port = 0
        self.admin_port = 0
        self.has_metadata = asyncio.Event()
        self._serving = False
        self._connections: dict[int, Connection] = {}  # to other brokers, by id
        self._background: set[asyncio.Task[Any]] = set()
        self.faults = FaultInjector(self.scheduler)
        self.metrics.register(self.faults.collect_metrics)
        self.metrics.register(gc_pause_families(gc_policy.pauses()))
        self.metrics.register(controller_families(lambda: self.controller))
        self.metrics.register(lambda: self.socket_server.collect_metrics())
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id,
            lambda: self.controller,
            self._controller_connection,
            lambda: self.config["metadata.push.timeout.ms"],
        )
        self.replica_manager = ReplicaManager(
            config,
            self.metadata,
            self.metrics,
            self.scheduler,
            self.alter_partition_manager.submit,
            self._leader_endpoint,
        )
        self.producer_ids = ProducerIdManager(self.broker_id)
        self.lifecycle = BrokerLifecycleManager(
            self.broker_id,
            self.incarnation,
            config,
            self.metadata,
            self.connection_to,
            self._become_controller,
            self.has_metadata,
        )
        self.forwarding = ForwardingManager(
            config, self.metadata, lambda: self.controller, self._controller_connection, self._spawn
        )
        self.group_coordinator = GroupCoordinator(
            config,
            self.replica_manager,
            self.metadata,
            self.scheduler,
            self.metrics,
            self.forwarding.create_offsets_topic,
        )
        self.apis = KafkaApis(self)
        # Kafka's protocol: its code loads when the first Kafka client connects.
        self.kafka = LazyProtocol(KAFKA_LISTENER_MODULES, self._kafka_protocol)
        self.socket_server = SocketServer(
            ServedProtocol(MsgpackCodec(), self.apis.handlers),
            self.kafka,
            self.metrics,
            max_request_bytes=config["socket.request.max.bytes"],
            max_queued_requests=config["queued.max.requests"],
            broker_id=self.broker_id,
            faults=self.faults,
            max_connections=config["max.connections"],
            max_connections_per_ip=config["max.connections.per.ip"],
            per_ip_overrides=parse_per_ip_overrides(config["max.connections.per.ip.overrides"]),
            brokers=self.members,
            max_idle_ms=config["connections.max.idle.ms"],
            listen_backlog=config["socket.listen.backlog.size"],
        )
        self.admin = AdminServer(self)
        self.log = structlog.get_logger("broker").bind(broker_id=self.broker_id)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        host, port = self.config.listener()
        if self.config.sources.get("listeners") is None and self.broker_id in self.members:
            host, port = self.members[self.broker_id]  # no listener given: the member address
        self.port = await self.socket_server.start(host, port)
        if not self.members:
            advertised = self.config["advertised.listeners"]
            if advertised:
                self.members = {self.broker_id: parse_host_port(advertised)}
            else:
                shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
                self.members = {self.broker_id: (shown, self.port)}
            self.metadata.members = self.members
        if len(self.members) == 1:
            await self._become_controller()
        else:
            self._spawn(self.lifecycle.run())
        self.replica_manager.start()
        self.group_coordinator.start()
        admin_host, admin_port = self.config.admin_listener()
        self.admin_port = await self.admin.start(admin_host, admin_port)
        self._serving = True
        self.log.info(
            "broker_started",
            port=self.port,
            protocols="purgatory and kafka on this port",
            admin_port=self.admin_port,
            controller_id=self.controller_id,
            members=len(self.members),
        )

    def _kafka_protocol(self) -> ServedProtocol:
        """Kafka's codec and API handlers (made once, when its modules are loaded)."""
        from purgatory.broker.api.kafka.apis import KafkaListenerApis
        from purgatory.broker.network.kafka_codec import KafkaCodec

        apis = KafkaListenerApis(self)
        return ServedProtocol(KafkaCodec(apis.error_response), apis.handlers)

    async def controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: ask the controller to move this broker's
        leaderships to other in-sync replicas (and take it out of every ISR) before it
        stops, so clients see NOT_LEADER_OR_FOLLOWER and a new leader at once instead of a
        dead one for a session timeout. Attempts that fail (controller unreachable or
        answering an error) are retried ``controlled.shutdown.max.retries`` times; then the
        broker stops anyway."""
        config = self.config
        if not config["controlled.shutdown.enable"] or len(self.members) == 1:
            return
        if not self.has_metadata.is_set():
            return  # it never joined: nothing to hand over
        attempts = config["controlled.shutdown.max.retries"] + 1
        for attempt in range(1, attempts + 1):
            try:
                remaining = await self._ask_controlled_shutdown()
            except (ConnectionClosed, KafkaError) as exc:
                self.log.warning("controlled_shutdown_failed", attempt=attempt, error=str(exc))
                if attempt < attempts:
                    await asyncio.sleep(config["controlled.shutdown.retry.backoff.ms"] / 1000)
                continue
            if remaining:
                self.log.warning(
                    "controlled_shutdown_partitions_offline",
                    partitions=[f"{t}-{p}" for t, p in remaining],
                    hint="no other in-sync replica was live to take them; they return with "
                    "this broker or another in-sync replica",
                )
            self.log.info("controlled_shutdown_done", offline=len(remaining))
            return
        self.log.warning(
            "controlled_shutdown_gave_up",
            hint="stopping anyway: the controller moves this broker's partitions after "
            "broker.session.timeout.ms",
        )

    async def _ask_controlled_shutdown(self) -> list[tuple[str, int]]:
        if self.controller is not None:
            return await self.controller.controlled_shutdown(self.broker_id, self.incarnation)
        conn = await self._controller_connection()
        response: ib.ControlledShutdownResponse = await conn.send(
            ApiKey.CONTROLLED_SHUTDOWN,
            ib.ControlledShutdownRequest(self.broker_id, self.incarnation),
            timeout_ms=self.config["metadata.push.timeout.ms"] * 2,
        )
        if response.error_code:
            raise KafkaError(response.error_code, "controlled shutdown refused")
        return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]

    async def stop(self) -> None:
        """Stop everything; each step is bounded, so stopping always finishes (a step that
        overruns is logged: it is a bug to look at, not a reason to hang)."""
        self._serving = False
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        if tasks:
            await self._bounded("background tasks", asyncio.gather(*tasks, return_exceptions=True))
        for conn in self._connections.values():
            await conn.close()
        if self.controller is not None:
            await self._bounded("controller", self.controller.close())
        await self._bounded("network", self.socket_server.stop())
        self.group_coordinator.shutdown()
        await self._bounded("replica manager", self.replica_manager.shutdown())
        await self._bounded("admin http", self.admin.stop())
        self.log.info("broker_stopped")

    async def _bounded(self, step: str, awaitable: Awaitable[Any], timeout_s: float = 5.0) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await awaitable
        except TimeoutError:
            self.log.warning("stop_step_overran", step=step, timeout_s=timeout_s)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def health_problem(self) -> str | None:
        if not self._serving:
            return "not serving yet"
        if not self.has_metadata.is_set():
            return f"waiting for metadata from the controller (broker {self.controller_id})"
        return None

    # -- metadata --------------------------------------------------------------------------

    @property
    def controller_id(self) -> int:
        """The controller as this broker knows it (from its latest picture)."""
        return self.metadata.controller_id

    def apply_metadata(self, update: ib.UpdateMetadataRequest) -> bool:
        """Apply a controller's picture; False if it is older than the one held."""
        changes = self.metadata.apply(update)
        if changes is None:
            return False
        self.replica_manager.apply(changes)
        self.has_metadata.set()
        self.forwarding.metadata_changed()
        return True

    async def _apply_local(self, update: ib.UpdateMetadataRequest) -> None:
        self.apply_metadata(update)

    async def _become_controller(self) -> None:
        self.controller = Controller(
            self.config,
            self.members,
            self._apply_local,
            self.connection_to,
            self.lifecycle.newest_snapshot,
            self.incarnation,
        )
        await self.controller.start()
        self.log.info("became_controller", metadata_epoch=self.controller.epoch)

    async def connection_to(self, broker_id: int, timeout_s: float | None = None) -> Connection:
        conn = self._connections.get(broker_id)
        if conn is None or conn.closed:
            host, port = self.members[broker_id]
            conn = await Connection.open(
                host,
                port,
                client_id=f"broker-{self.broker_id}",
                receive_delay=functools.partial(self.faults.delay_from_broker, broker_id),
                connect_timeout_s=timeout_s or self.config["metadata.push.timeout.ms"] / 1000,
            )
            self._connections[broker_id] = conn
        return conn

    def _leader_endpoint(self, broker_id: int) -> RemoteLeaderEndPoint:
        """How this broker's replica fetcher reaches leader ``broker_id``."""
        return RemoteLeaderEndPoint(
            self.broker_id,
            self.members[broker_id],
            f"replica-fetcher-{self.broker_id}",
            self.config["metadata.push.timeout.ms"] / 1000,
            functools.partial(self.faults.delay_from_broker, broker_id),
        )

    async def _controller_connection(self) -> Connection:
        if self.controller_id == self.broker_id and self.controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller yet")
        return await self.connection_to(self.controller_id)

    # -- dynamic configuration ----------------------------------------------------------

    def change_config(self, name: str, value: Any) -> tuple[Any, Any]:
        """Change a dynamic config now (admin HTTP); raises ConfigError/StaticConfigError."""
        at = datetime.datetime.now(datetime.UTC).isoformat()
        old, new = self.config.set_dynamic(name, value, at=at)
        canonical = BY_NAME[name].name
        if canonical == "log.level":
            configure_logging(self.config["log.format"], new)
        elif canonical == "replica.lag.time.max.ms":
            self.replica_manager.lag_time_changed()
        elif canonical == "log.memory.max.bytes":
            self.replica_manager.memory_budget.limit_changed()
        elif canonical == "unclean.leader.election.enable" and self.controller is not None:
            self.controller.reelect()
        self.log.info("config_changed", name=canonical, old=old, new=new)
        return old, new

    # -- observation -----------------------------------------------------------------------

    @property
    def fetcher_stats(self) -> dict[int, FetcherStats]:
        """A follower's fetching, by the leader broker fetched from."""
        return self.replica_manager.fetchers.stats

    def state(self) -> BrokerState:
        """The ``/v1/state`` document."""
        replicas = sorted(
            self.replica_manager.partitions.values(), key=lambda p: (p.topic, p.index)
        )
        return BrokerState(
            broker_id=self.broker_id,
            controller_id=self.controller_id,
            is_controller=self.controller is not None,
            metadata_epoch=self.metadata.epoch,
            members={str(i): f"{h}:{p}" for i, (h, p) in sorted(self.members.items())},
            live_brokers=sorted(self.metadata.live_brokers),
            groups=self.group_coordinator.describe(),
            partitions=[p.describe() for p in replicas],
            connections=len(self.socket_server.connections),
            clients=self.socket_server.describe_clients(),
            config_changes=list(self.config.changes),
            faults=self.faults.describe(),
        )


async def start_broker(config: BrokerConfig) -> Broker:
    broker = Broker(config)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()
        raise
    return broker
