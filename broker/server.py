"""Broker: assembles one broker (network, KafkaApis, ReplicaManager, controller role, admin
HTTP) on the running event loop, and runs its registration with the controller."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import structlog

from broker.api.kafka_apis import KafkaApis
from broker.config.broker_config import BrokerConfig, check_consistency
from broker.config.definitions import BY_NAME, parse_host_port
from broker.controller.alter_partition_manager import AlterPartitionManager
from broker.controller.controller import Controller, topic_name_problem
from broker.controller.metadata_cache import MetadataCache
from broker.coordinator.group_coordinator import GroupCoordinator
from broker.network.leader_endpoint import RemoteLeaderEndPoint
from broker.network.msgpack_codec import MsgpackCodec
from broker.network.socket_server import SocketServer
from broker.ops.admin_http import AdminServer
from broker.ops.faults import FaultInjector
from broker.ops.metrics import BrokerMetrics, PartitionRow
from broker.ops.structured_logging import configure_logging
from broker.purgatory import LoopScheduler
from broker.replication.replica_manager import ReplicaManager
from clients.connection import Connection, ConnectionClosed
from protocol import messages as m
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError, is_retriable


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
        self.faults = FaultInjector(self.scheduler)
        self.metrics.faults = self.faults
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
        self.group_coordinator = GroupCoordinator(self.replica_manager.leader_partition)
        self.metrics.add_partition_source(self._partition_rows)
        self.apis = KafkaApis(self)
        self.socket_server = SocketServer(
            self.apis,
            MsgpackCodec(),
            self.metrics,
            max_request_bytes=config["socket.request.max.bytes"],
            max_queued_requests=config["queued.max.requests"],
            broker_id=self.broker_id,
            faults=self.faults,
        )
        self.admin = AdminServer(self)
        self.controller: Controller | None = None
        self.port = 0
        self.admin_port = 0
        self.has_metadata = asyncio.Event()
        self._serving = False
        self._connections: dict[int, Connection] = {}  # to other brokers, by id
        self._background: set[asyncio.Task[Any]] = set()
        self._auto_creating: set[str] = set()
        self._metadata_waiters: list[asyncio.Future[None]] = []
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
            self._spawn(self._controller_loop())
        self.replica_manager.start()
        admin_host, admin_port = self.config.admin_listener()
        self.admin_port = await self.admin.start(admin_host, admin_port)
        self._serving = True
        self.log.info(
            "broker_started",
            port=self.port,
            admin_port=self.admin_port,
            controller_id=self.controller_id,
            members=len(self.members),
        )

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

    def apply_metadata(self, update: m.UpdateMetadataRequest) -> bool:
        """Apply a controller's picture; False if it is older than the one held."""
        changes = self.metadata.apply(update)
        if changes is None:
            return False
        self.replica_manager.apply(changes)
        self.has_metadata.set()
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        return True

    async def _apply_local(self, update: m.UpdateMetadataRequest) -> None:
        self.apply_metadata(update)

    async def _become_controller(self) -> None:
        self.controller = Controller(
            self.config, self.members, self._apply_local, self._connection_to, self.newest_snapshot
        )
        await self.controller.start()
        self.log.info("became_controller", metadata_epoch=self.controller.epoch)

    async def _controller_loop(self) -> None:
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
        request = m.BrokerRegistrationRequest(self.broker_id, self.incarnation)
        while True:
            target = self._controller_target(unreachable_since, loop.time(), session)
            if target == self.broker_id:
                await self._become_controller()
                return
            delay = backoff
            try:
                conn = await self._connection_to(target)
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

    async def newest_snapshot(self) -> m.UpdateMetadataRequest | None:
        """The newest picture (highest metadata epoch) any other reachable member holds
        (FetchSnapshot); None when none has one or none answers within a second."""

        async def ask(broker_id: int) -> m.UpdateMetadataRequest | None:
            try:
                conn = await self._connection_to(broker_id, timeout_s=1.0)
                response: m.FetchSnapshotResponse = await conn.send(
                    ApiKey.FETCH_SNAPSHOT, m.FetchSnapshotRequest(self.broker_id), timeout_ms=1000
                )
                return response.snapshot
            except (ConnectionClosed, KafkaError):
                return None

        others = [b for b in self.members if b != self.broker_id]
        snapshots = [s for s in await asyncio.gather(*(ask(b) for b in others)) if s is not None]
        return max(snapshots, key=lambda s: s.metadata_epoch) if snapshots else None

    async def _connection_to(self, broker_id: int, timeout_s: float | None = None) -> Connection:
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
            self.members[broker_id],
            f"replica-fetcher-{self.broker_id}",
            self.config["metadata.push.timeout.ms"] / 1000,
            functools.partial(self.faults.delay_from_broker, broker_id),
        )

    async def _controller_connection(self) -> Connection:
        if self.controller_id == self.broker_id and self.controller is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller yet")
        return await self._connection_to(self.controller_id)

    async def _forward_to_controller(self, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        """Send a request to the controller; None when it cannot be reached."""
        try:
            conn = await self._controller_connection()
            return await conn.send(key, request, timeout_ms=timeout_ms + 1000)
        except (ConnectionClosed, KafkaError) as exc:
            self.log.info("controller_unavailable", api=key.api_name, error=str(exc))
            return None

    def _no_controller(self) -> str:
        return f"controller (broker {self.controller_id}) unavailable; retry"

    async def create_topics(self, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        """Create topics on the controller (here, or forwarded to it)."""
        if self.controller is not None:
            return await self.controller.create_topics(request)
        response: m.CreateTopicsResponse | None = await self._forward_to_controller(
            ApiKey.CREATE_TOPICS, request, request.timeout_ms
        )
        if response is None:
            return m.CreateTopicsResponse(
                [
                    m.CreatableTopicResult(t.name, ErrorCode.NOT_CONTROLLER, self._no_controller())
                    for t in request.topics
                ]
            )
        # The controller pushed the change before answering; wait for it to land here too.
        await self._wait_for_topics(
            lambda: all(
                r.name in self.metadata.topics for r in response.topics if r.error_code == 0
            ),
            request.timeout_ms,
        )
        return response

    async def delete_topics(self, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        """Delete topics on the controller (here, or forwarded to it)."""
        if self.controller is not None:
            return await self.controller.delete_topics(request)
        response: m.DeleteTopicsResponse | None = await self._forward_to_controller(
            ApiKey.DELETE_TOPICS, request, request.timeout_ms
        )
        if response is None:
            return m.DeleteTopicsResponse(
                [
                    m.DeletableTopicResult(name, ErrorCode.NOT_CONTROLLER, self._no_controller())
                    for name in request.topic_names
                ]
            )
        await self._wait_for_topics(
            lambda: (
                not any(
                    r.name in self.metadata.topics for r in response.responses if r.error_code == 0
                )
            ),
            request.timeout_ms,
        )
        return response

    async def _wait_for_topics(self, done: Callable[[], bool], timeout_ms: int) -> None:
        """Wait until this broker's metadata satisfies ``done`` (at most ``timeout_ms``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._metadata_waiters.append(waiter)
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(remaining):
                    await waiter

    def auto_create_in_background(self, topic: str) -> None:
        """A produce hit an unknown topic: create it (if allowed) so the client's retry works."""
        if (
            not self.config["auto.create.topics.enable"]
            or topic in self._auto_creating
            or topic in self.metadata.topics
            or topic_name_problem(topic)
        ):
            return
        self._auto_creating.add(topic)
        task = self._spawn(self.create_topics(m.CreateTopicsRequest([m.CreatableTopic(topic)])))
        task.add_done_callback(lambda _: self._auto_creating.discard(topic))

    def metadata_response(
        self, topics: list[str] | None, creating: Mapping[str, int] | None = None
    ) -> m.MetadataResponse:
        """The Metadata answer for ``topics`` (None: all). ``creating``: the outcome of
        auto-creating missing topics. As in Kafka, a topic whose creation is under way, or
        failed for now (a controller handover), answers LEADER_NOT_AVAILABLE so the client
        asks again; one that cannot be created answers that error; and
        UNKNOWN_TOPIC_OR_PARTITION means nobody is creating it."""
        creating = creating or {}
        brokers = [m.MetadataBroker(i, h, p) for i, (h, p) in sorted(self.members.items())]
        cache = self.metadata.topics
        names = sorted(cache) if topics is None else topics
        out = []
        for name in names:
            state = cache.get(name)
            if state is None:
                code: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if topic_name_problem(name):
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif name in creating:
                    code = creating[name]
                    if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS) or is_retriable(code):
                        code = ErrorCode.LEADER_NOT_AVAILABLE
                out.append(m.MetadataTopic(code, name, "", []))
                continue
            live = self.metadata.live_brokers
            out.append(
                m.MetadataTopic(
                    ErrorCode.NONE,
                    name,
                    state.topic_id,
                    [
                        # A leader that is not live (no failover yet): no leader until it returns.
                        m.MetadataPartition(
                            ErrorCode.NONE,
                            p.partition_index,
                            p.leader_id,
                            p.leader_epoch,
                            p.replicas,
                            p.isr,
                        )
                        if p.leader_id in live
                        else m.MetadataPartition(
                            ErrorCode.LEADER_NOT_AVAILABLE,
                            p.partition_index,
                            -1,
                            p.leader_epoch,
                            p.replicas,
                            p.isr,
                        )
                        for p in state.partitions
                    ],
                )
            )
        return m.MetadataResponse(self.config["cluster.id"], self.controller_id, brokers, out)

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
        self.log.info("config_changed", name=canonical, old=old, new=new)
        return old, new

    # -- observation -----------------------------------------------------------------------

    def _partition_rows(self) -> list[PartitionRow]:
        return [
            (
                p.topic,
                p.index,
                p.log.size_bytes,
                p.log.log_start_offset,
                p.log.log_end_offset,
                p.high_watermark,
                p.is_leader,
                p.under_replicated(),
                p.under_min_isr(),
            )
            for p in self.replica_manager.partitions.values()
        ]

    def state(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "controller_id": self.controller_id,
            "is_controller": self.controller is not None,
            "metadata_epoch": self.metadata.epoch,
            "members": {str(i): f"{h}:{p}" for i, (h, p) in sorted(self.members.items())},
            "live_brokers": sorted(self.metadata.live_brokers),
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.index,
                    "topic_id": p.topic_id,
                    "role": "leader" if p.is_leader else "follower",
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "log_start_offset": p.log.log_start_offset,
                    "local_log_start_offset": p.log.local_log_start_offset,
                    "high_watermark": p.high_watermark,
                    "log_end_offset": p.log.log_end_offset,
                    # The leader's view of every replica's log end offset (its own included).
                    "replica_log_end_offsets": (
                        {str(self.broker_id): p.log.log_end_offset}
                        | {str(r): f.log_end_offset for r, f in p.followers.items()}
                        if p.is_leader
                        else {}
                    ),
                    "size_bytes": p.log.size_bytes,
                    "batches": len(p.log),
                    "segments": len(p.log.segments),
                    "remote_segments": len(p.log.remote_segments),
                    "remote_size_bytes": p.log.remote_size_bytes,
                    "remote_log_end_offset": p.log.remote_log_end_offset,
                    "log_config": dataclasses.asdict(p.log.config),
                    "min_insync_replicas": p.min_insync_replicas,
                }
                for p in sorted(
                    self.replica_manager.partitions.values(), key=lambda p: (p.topic, p.index)
                )
            ],
            "connections": len(self.socket_server.connections),
            "config_changes": list(self.config.changes),
            "faults": self.faults.describe(),
        }


async def start_broker(config: BrokerConfig) -> Broker:
    broker = Broker(config)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()
        raise
    return broker
