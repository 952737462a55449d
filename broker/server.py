"""Broker: assembles one node (network, KafkaApis, ReplicaManager, its member of the
metadata quorum and its controller, admin HTTP) on the running event loop, and runs its
registration with the active controller."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

from purgatory.broker.api.kafka_apis import KafkaApis
from purgatory.broker.config.broker_config import BrokerConfig, check_consistency
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.server_configs import parse_per_ip_overrides
from purgatory.broker.config.topic_configs import kafka_value
from purgatory.broker.controller.alter_partition_manager import AlterPartitionManager
from purgatory.broker.controller.broker_lifecycle import Advertised, BrokerLifecycleManager
from purgatory.broker.controller.controller_apis import ControllerApis
from purgatory.broker.controller.controller_channel import ControllerChannel
from purgatory.broker.controller.controller_metrics import controller_families
from purgatory.broker.controller.forwarding_manager import ForwardingManager
from purgatory.broker.controller.metadata_cache import (
    MetadataCache,
    deleted_topics,
    partition_changes,
)
from purgatory.broker.controller.quorum_controller import QuorumController
from purgatory.broker.coordinator.group_coordinator import GroupCoordinator
from purgatory.broker.coordinator.producer_id_manager import ProducerIdManager
from purgatory.broker.coordinator.share.share_coordinator import ShareCoordinator
from purgatory.broker.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
)
from purgatory.broker.coordinator.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from purgatory.broker.coordinator.transaction.transaction_metrics import transaction_families
from purgatory.broker.coordinator.transaction.txn_marker_writer import TxnMarkerWriter
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.metadata_loader import MetadataLoader
from purgatory.broker.network.acceptor import ListenError
from purgatory.broker.network.leader_endpoint import (
    LeaderConnection,
    LeaderTransport,
    RemoteLeaderEndPoint,
)
from purgatory.broker.network.msgpack_codec import MsgpackCodec
from purgatory.broker.network.node_channels import NodeChannels
from purgatory.broker.network.served_protocol import LazyProtocol, ServedProtocol
from purgatory.broker.network.socket_server import SocketServer
from purgatory.broker.ops.admin_http import AdminServer
from purgatory.broker.ops.faults import FaultInjector
from purgatory.broker.ops.metrics import BrokerMetrics, gc_pause_families
from purgatory.broker.ops.structured_logging import configure_logging
from purgatory.broker.purgatory import LoopScheduler, Scheduler
from purgatory.broker.quota.quota_managers import QuotaManagers
from purgatory.broker.raft.kafka_raft_client import KafkaRaftClient
from purgatory.broker.raft.log_store import LogStore
from purgatory.broker.raft.raft_client import LeaderAndEpoch, RaftChannel
from purgatory.broker.raft.raft_config import open_store, quorum_config
from purgatory.broker.raft.raft_metrics import raft_families
from purgatory.broker.replication.partition import Partition
from purgatory.broker.replication.replica_fetcher import FetcherStats
from purgatory.broker.replication.replica_manager import ReplicaManager
from purgatory.broker.security import ssl_factory
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.broker.security.authorizer.standard_authorizer import (
    StandardAuthorizer,
    parse_super_users,
)
from purgatory.broker.security.listener_security import (
    listener_security,
    unknown_listener_overrides,
)
from purgatory.broker.share.persister import DefaultStatePersister
from purgatory.broker.share.share_metrics import share_partition_families
from purgatory.broker.share.share_partition import SharePartition
from purgatory.broker.share.share_partition_manager import SharePartitionManager
from purgatory.broker.share.share_session_cache import (
    SHARE_SESSION_EVICTION_MS,
    ShareSessionCache,
    max_share_sessions,
)
from purgatory.clients.security import ClientSecurity
from purgatory.common import gc_policy
from purgatory.common.broker_state import BrokerState, ReplicaInfo
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError

# What serving Kafka's protocol imports (kio's schemas among them), on a thread.
KAFKA_LISTENER_MODULES = (
    "purgatory.broker.api.kafka.apis",
    "purgatory.broker.network.kafka_codec",
    "purgatory.protocol.consumer_protocol",
)


# /v1/state describes this many partitions between two turns of the event loop.
STATE_SLICE = 1000


class Broker:
    """One node. What it reaches the world through can be given instead of made: its
    clock (``scheduler``), its randomness (``rng``: elections, incarnation and topic ids),
    its requests to other nodes (``channels``) and to partition leaders
    (``leader_transport``), and its metadata log (``store``): the deterministic simulation
    gives its own, and runs the same broker."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        scheduler: Scheduler | None = None,
        rng: random.Random | None = None,
        channels: RaftChannel | None = None,
        leader_transport: Callable[[int], LeaderTransport] | None = None,
        store: LogStore | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.rng = rng or random.Random()
        self.incarnation = f"{self.rng.getrandbits(128):032x}"
        self.metrics = BrokerMetrics(self.broker_id)
        self.members = config.members()
        if self.members and self.broker_id not in self.members:
            raise ValueError(
                f"broker.id {self.broker_id} is not in cluster.members "
                f"({', '.join(map(str, sorted(self.members)))})"
            )
        check_consistency(config.values)
        problem = config.member_address_problem()
        if problem:
            raise ValueError(problem)  # before binding anything
        self.voters = config.voters()
        self.roles = config.process_roles()
        self.listeners = config.listener_config()
        by_name = {listener.name: listener for listener in self.listeners.listeners}
        problem = unknown_listener_overrides(config.listener_overrides, by_name)
        if problem:
            raise ValueError(problem)
        # Each listener's TLS and SASL (broker/security/), built before anything binds.
        self.security = {
            listener.name: listener_security(
                listener,
                config.listener_values(listener.name),
                lambda mechanism, name: self.metadata.scram_credential(mechanism, name),
            )
            for listener in self.listeners.listeners
            if listener.security_protocol != "PLAINTEXT"
        }
        # The authorizer (authorizer.class.name) over the metadata log's ACLs, and the
        # checks handlers make with it for the request being handled (its connection's
        # principal, as the socket server holds it).
        self.authorizer = (
            StandardAuthorizer(
                parse_super_users(config["super.users"]),
                config["allow.everyone.if.no.acl.found"],
            )
            if config["authorizer.class.name"]
            else None
        )
        self.auth = AuthHelper(lambda: self.socket_server, lambda: self.authorizer)
        # How this broker reaches the others' broker-facing and inter-broker listeners:
        # TLS on SSL ones, and a SASL login where brokers log in (else cluster.secret).
        self.broker_tls = {
            name: self._client_tls(name)
            for name in {self.listeners.broker_facing.name, self.listeners.inter_broker}
        }
        self.broker_sasl = {name: self._broker_sasl(name) for name in self.broker_tls}
        logs_in = all(login is not None for login in self.broker_sasl.values())
        proven = bool(config["cluster.secret"]) or logs_in or channels is not None
        if len(self.members) > 1 and not proven:
            raise ValueError(
                f"cluster.secret is required in a cluster of {len(self.members)} "
                "members: brokers prove it to each other before inter-broker APIs are "
                "served (set the same value on every member, e.g. "
                "PURGATORY_CLUSTER_SECRET=$(openssl rand -hex 16)), unless they log in "
                "with SASL on their listeners (sasl.mechanism.inter.broker.protocol)"
            )
        self.ports: dict[str, int] = {}  # each listener's bound port, by name
        self.metadata = MetadataCache(
            self.members, self.listeners.broker_facing.name, self.config.values
        )
        self.scheduler = scheduler or LoopScheduler()
        self._leader_transport = leader_transport or self._leader_connection
        self.port = 0
        self.admin_port = 0
        self.has_metadata = asyncio.Event()  # registered, unfenced, and its metadata applied
        self._serving = False
        self._background: set[asyncio.Task[Any]] = set()
        self.faults = FaultInjector(self.scheduler)
        self.metrics.register(self.faults.collect_metrics)
        self.metrics.register(gc_pause_families(gc_policy.pauses()))
        self.metrics.register(controller_families(lambda: self.controller))
        self.metrics.register(raft_families(lambda: self.raft))
        self.metrics.register(lambda: self.socket_server.collect_metrics())
        self.node_channels = NodeChannels(
            self.broker_id,
            lambda: self.members,
            self.faults.delay_from_broker,
            self.faults.cuts_off,
            config["cluster.secret"],
            self.broker_tls[self.listeners.broker_facing.name],
            self.broker_sasl[self.listeners.broker_facing.name],
        )
        channel: RaftChannel = channels or self.node_channels
        self.replica_manager = ReplicaManager(
            config,
            self.metadata,
            self.metrics,
            self.scheduler,
            lambda topic, index, proposed: self.alter_partition_manager.submit(
                topic, index, proposed
            ),
            self._leader_endpoint,
            lambda: self.lifecycle.broker_epoch,
        )
        self.loader = MetadataLoader(
            self.broker_id,
            None,
            lambda: self.raft.former_leader,
            self._publish,
            self._leader_changed,
        )
        self.raft = KafkaRaftClient(
            self.broker_id,
            self.voters,
            config["cluster.id"],
            store or open_store(config, self.voters),
            self.scheduler,
            channel,
            self.replica_manager.fetch_purgatory,
            quorum_config(config),
            self.loader,
            self.rng,
        )
        self.quorum_controller = (
            QuorumController(
                self.broker_id, config, self.raft, self.scheduler, self.members, self.rng
            )
            if "controller" in self.roles
            else None
        )
        self.loader.controller = self.quorum_controller
        self.controller_apis = ControllerApis(self.raft, self.quorum_controller)
        self.controller_channel = ControllerChannel(
            self.broker_id,
            self.controller_apis,
            lambda: self.metadata.controller_id,
            channel.send,
            lambda: self.config["controller.quorum.request.timeout.ms"],
        )
        self.lifecycle = BrokerLifecycleManager(
            self.broker_id,
            self.incarnation,
            self._advertised,
            config,
            self.controller_channel,
            lambda: self.metadata.epoch,
        )
        self.alter_partition_manager = AlterPartitionManager(
            self.broker_id, self.controller_channel, lambda: self.lifecycle.broker_epoch
        )
        self._applied = MetadataImage()  # the image this broker's replicas follow
        self._applied_registered = False
        self.producer_ids = ProducerIdManager(self.broker_id)
        self.forwarding = ForwardingManager(
            config, self.metadata, self.controller_channel, self._spawn
        )
        self.group_coordinator = GroupCoordinator(
            config,
            self.replica_manager,
            self.metadata,
            self.scheduler,
            self.metrics,
            self.forwarding.create_offsets_topic,
        )
        # KIP-932's share coordinator: share groups' partition state in __share_group_state.
        self.share_coordinator = ShareCoordinator(
            config,
            self.replica_manager,
            self.metadata,
            self.scheduler,
            self.forwarding.create_share_state_topic,
        )
        # KIP-932's share groups on the partition leaders: the SharePartitions this broker
        # leads, their state kept by the share coordinators (the persister), and its share
        # consumers' sessions (ShareFetch, ShareAcknowledge).
        self.share_partitions = SharePartitionManager(
            config,
            self.replica_manager,
            self.scheduler,
            self.metadata.group_config,
            DefaultStatePersister(
                self.broker_id,
                self.share_coordinator,
                lambda node, key, request, timeout_ms: self.marker_channels.send(
                    node, key, request, timeout_ms
                ),
                self.scheduler,
            ),
        )
        self.share_partitions.on_acquirable = self._share_records_available
        self.metrics.register(share_partition_families(self.share_partitions))
        self.share_sessions = ShareSessionCache(
            max_share_sessions(config), SHARE_SESSION_EVICTION_MS
        )
        # Transaction markers go to partition leaders over the inter-broker listener.
        self.marker_channels = NodeChannels(
            self.broker_id,
            lambda: {**self.members, **self.metadata.endpoints(self.listeners.inter_broker)},
            self.faults.delay_from_broker,
            self.faults.cuts_off,
            config["cluster.secret"],
            self.broker_tls[self.listeners.inter_broker],
            self.broker_sasl[self.listeners.inter_broker],
        )
        self.txn_marker_writer = TxnMarkerWriter(
            self.replica_manager, self.group_coordinator.complete_txn_offsets
        )
        self.transaction_coordinator = TransactionCoordinator(
            config,
            self.replica_manager,
            self.metadata,
            self.scheduler,
            self.producer_ids,
            TransactionMarkerChannelManager(
                self.broker_id,
                self.metadata,
                lambda node, request, timeout_ms: self.marker_channels.send(
                    node, ApiKey.WRITE_TXN_MARKERS, request, timeout_ms
                ),
                self.txn_marker_writer.write,
            ),
            self.forwarding.create_transaction_state_topic,
            self._spawn,
        )
        self.metrics.register(transaction_families(self.transaction_coordinator))
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
            cluster_secret=config["cluster.secret"],
            abandon=self.replica_manager.abandon,
            security=self.security,
        )
        # Client quotas (broker/quota), from the metadata image's.
        self.quotas = QuotaManagers(
            config["quota.window.num"], config["quota.window.size.seconds"], _monotonic_ms
        )
        self.quotas.server = self.socket_server
        self.metrics.register(self.quotas.collect_metrics)

        self.admin = AdminServer(self)
        self.log = structlog.get_logger("broker").bind(broker_id=self.broker_id)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        listeners = list(self.listeners.listeners)
        if self.config.sources.get("listeners") is None and self.broker_id in self.members:
            # No listener given: the one of the default, at the member address.
            host, port = self.members[self.broker_id]
            listeners = [dataclasses.replace(listeners[0], host=host, port=port)]
        self.ports = await self.socket_server.start(listeners)
        self.port = self.ports[self.listeners.inter_broker]
        facing = self.listeners.broker_facing.name
        if self.broker_id in self.members:
            member_port = self.members[self.broker_id][1]
            if member_port != self.ports[facing]:
                await self.socket_server.stop()
                raise ValueError(
                    f"cluster.members gives node {self.broker_id} port {member_port}, but the "
                    f"other nodes reach it on its {facing} listener, on port "
                    f"{self.ports[facing]}: a member's address is its controller listener's "
                    "(controller.listener.names), else its inter-broker listener's"
                )
        else:  # a cluster of one: its own address is where it listens for brokers
            advertised = {n: (h, p) for n, h, p in self._advertised().listeners}
            bound = self.listeners.broker_facing.host, self.ports[facing]
            self.members = {self.broker_id: advertised.get(facing, bound)}
            self.metadata.members = self.members
        self.start_node()
        admin_host, admin_port = self.config.admin_listener()
        try:
            self.admin_port = await self.admin.start(admin_host, admin_port)
        except OSError as exc:
            raise ListenError("admin listener", admin_host, admin_port, exc) from exc
        self._serving = True
        self.log.info(
            "broker_started",
            port=self.port,
            listeners={
                listener.name: f"{listener.role.value} {listener.security_protocol} "
                f":{self.ports[listener.name]}"
                for listener in self.listeners.listeners
            },
            protocols="purgatory and kafka on each listener",
            admin_port=self.admin_port,
            roles=",".join(self.roles),
            voters=sorted(self.voters),
            members=len(self.members),
            metadata_log_dir=self.config["metadata.log.dir"] or None,
        )

    def start_node(self) -> None:
        """Everything but the listeners: the quorum, registration, replication, groups."""
        self.faults.listeners.append(self._faults_changed)
        self.raft.start()
        if "broker" in self.roles:
            self._spawn(self.lifecycle.run())
        self.replica_manager.start()
        self.group_coordinator.start()
        self.transaction_coordinator.start()

    def _advertised(self) -> Advertised:
        """What this broker registers: each listener's advertised address (the member
        address for the listener members' addresses are of, unless advertised.listeners
        names it), and the inter-broker listener's as its own."""
        listeners = self.listeners
        facing = listeners.broker_facing.name
        endpoints = tuple(
            (name, *self.members[self.broker_id])
            if name == facing
            and name not in listeners.advertised
            and self.broker_id in self.members
            else (name, host, port)
            for name, host, port in listeners.advertised_endpoints(self.ports)
        )
        host, port = next((h, p) for n, h, p in endpoints if n == listeners.inter_broker)
        return Advertised(host, port, endpoints)

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """Each broker's address on the listener of the request being handled (clients
        are sent back through the listener they came in on)."""
        listener = self.socket_server.current_listener or self.listeners.inter_broker
        return self.metadata.endpoints(listener)

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
        dead one for a session timeout; a quorum leader then hands its leadership over
        (EndQuorumEpoch). Attempts that fail (controller unreachable or answering an
        error) are retried ``controlled.shutdown.max.retries`` times; then the broker stops
        anyway. With no other broker able to lead there is nobody to hand over to: the last
        brokers of a cluster that stops together stop at once (the quorum, its other
        voters gone, could not even commit the request)."""
        config = self.config
        if (
            config["controlled.shutdown.enable"]
            and self.has_metadata.is_set()
            and self._another_may_lead()
        ):
            await self._hand_leaderships_over()
        await self.raft.resign()

    def _another_may_lead(self) -> bool:
        """Whether another broker is registered, unfenced and not shutting down, as this
        broker's latest metadata says."""
        return any(b != self.broker_id for b in self.metadata.image.eligible_brokers())

    async def _hand_leaderships_over(self) -> None:
        config = self.config
        attempts = config["controlled.shutdown.max.retries"] + 1
        for attempt in range(1, attempts + 1):
            try:
                response: ib.ControlledShutdownResponse = await self.controller_channel.call(
                    ApiKey.CONTROLLED_SHUTDOWN,
                    ib.ControlledShutdownRequest(self.broker_id, self.lifecycle.broker_epoch),
                    timeout_ms=config["controller.quorum.request.timeout.ms"] * 2,
                )
                if response.error_code:
                    raise KafkaError(response.error_code, "controlled shutdown refused")
            except (ConnectionError, KafkaError) as exc:
                self.log.warning("controlled_shutdown_failed", attempt=attempt, error=str(exc))
                if attempt < attempts:
                    await asyncio.sleep(config["controlled.shutdown.retry.backoff.ms"] / 1000)
                if not self._another_may_lead():
                    break  # the others are stopping too (the metadata came meanwhile)
                continue
            remaining = [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
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

    async def stop(self) -> None:
        """Stop everything; each step is bounded, so stopping always finishes (a step that
        overruns is logged: it is a bug to look at, not a reason to hang)."""
        self._serving = False
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        if tasks:
            await self._bounded("background tasks", asyncio.gather(*tasks, return_exceptions=True))
        if self.quorum_controller is not None:
            self.quorum_controller.deactivate()
        await self._bounded("quorum", self.raft.close())
        await self._bounded("node channels", self.node_channels.close())
        await self._bounded("network", self.socket_server.stop())
        self.group_coordinator.shutdown()
        self.share_partitions.shutdown()
        self.share_coordinator.shutdown()
        self.transaction_coordinator.shutdown()
        await self._bounded("marker channels", self.marker_channels.close())
        await self._bounded("replica manager", self.replica_manager.shutdown())
        await self._bounded("admin http", self.admin.stop())
        self.log.info("broker_stopped")

    async def _bounded(self, step: str, awaitable: Awaitable[Any], timeout_s: float = 5.0) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await awaitable
        except TimeoutError:
            self.log.warning("stop_step_overran", step=step, timeout_s=timeout_s)

    def _share_records_available(self, share_partition: SharePartition) -> None:
        """A share group's records became available again (released, a lock expired):
        its ShareFetches waiting on that partition try again."""
        key = (share_partition.group_id, share_partition.topic, share_partition.partition)
        self.replica_manager.share_fetch_purgatory.check_and_complete(key)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def health_problem(self) -> str | None:
        if not self._serving:
            return "not serving yet"
        if self.controller_id < 0:
            voters = ", ".join(map(str, sorted(self.voters)))
            return (
                f"no active controller: the metadata quorum (voters {voters}) has no leader "
                "yet (a majority of voters must be up)"
            )
        if "broker" in self.roles and not self.has_metadata.is_set():
            if self.lifecycle.broker_epoch < 0:
                return f"registering with the active controller (broker {self.controller_id})"
            return (
                f"fenced until it catches up with the metadata (active controller: broker "
                f"{self.controller_id})"
            )
        return None

    # -- metadata --------------------------------------------------------------------------

    @property
    def controller_id(self) -> int:
        """The active controller (the quorum leader) as this broker knows it; -1: none."""
        return self.metadata.controller_id

    @property
    def controller(self) -> QuorumController | None:
        """This broker's controller when it is the active one."""
        controller = self.quorum_controller
        return controller if controller is not None and controller.active else None

    async def describe_quorum(self) -> rm.DescribeQuorumResponse:
        """DescribeQuorum as the quorum's leader answers it: here, or asked of the leader
        (Kafka forwards it to the active controller too)."""
        leader = self.metadata.controller_id
        if leader == self.broker_id or leader < 0:
            return self.raft.handle_describe_quorum()
        try:
            answer: rm.DescribeQuorumResponse = await self.node_channels.send(
                leader,
                ApiKey.DESCRIBE_QUORUM,
                rm.DescribeQuorumRequest(),
                self.config["controller.quorum.request.timeout.ms"],
            )
        except (ConnectionError, KafkaError) as exc:
            return rm.DescribeQuorumResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"the quorum's leader: {exc}",
                leader,
                -1,
                -1,
                [],
                [],
            )
        return answer

    def _leader_changed(self, leader: LeaderAndEpoch) -> None:
        self.metadata.controller_id = leader.leader_id
        self.lifecycle.controller_changed()

    def _publish(self, image: MetadataImage, changed_topics: set[str] | None) -> None:
        """A new committed image: the cache answers from it, and this broker's replicas
        take their roles from it, but only once it holds this run's registration. Until
        then the metadata may still give this broker roles an earlier run had, with data
        this run does not have; the records that take them away come before the
        registration, so a broker that sees itself registered sees them too."""
        deleted = deleted_topics(self.metadata.image, image, changed_topics)
        if self.authorizer is not None and image.acls is not self.metadata.image.acls:
            self.authorizer.load(image.acls.acls.values())
        if image.client_quotas is not self.metadata.image.client_quotas:
            self.quotas.update(image.client_quotas)
        self.metadata.image = image
        own = image.brokers.get(self.broker_id)
        registered = own is not None and own.incarnation_id == self.incarnation
        if registered:
            changes = partition_changes(
                self._applied, image, changed_topics if self._applied_registered else None
            )
            before = self._applied
            self._applied, self._applied_registered = image, True
            self.replica_manager.apply(changes)
            self._apply_configs(before, image, changed_topics)
        elif self._applied_registered:
            self.log.error(
                "broker_registered_elsewhere",
                hint="another run of this broker id registered; this one lets go of its partitions",
            )
            changes = partition_changes(self._applied, MetadataImage())
            self._applied, self._applied_registered = MetadataImage(), False
            self.replica_manager.apply(changes)
        if deleted:
            self.group_coordinator.on_topics_deleted(deleted)
            self.share_partitions.on_topics_deleted(deleted)
        if registered and own is not None and not own.fenced:
            self.has_metadata.set()
        self.forwarding.metadata_changed()

    def _apply_configs(
        self, before: MetadataImage, after: MetadataImage, changed_topics: set[str] | None
    ) -> None:
        """Config changes the metadata log brought: a topic's own configs, or the dynamic
        broker configs (this broker's and the cluster-wide default), which may move the
        defaults of every topic (Kafka's DynamicConfigPublisher)."""
        if before.broker_configs != after.broker_configs or changed_topics is None:
            self._apply_broker_configs(after)
            self.replica_manager.reconfigure()
            return
        changed = {
            name: topic.configs
            for name in changed_topics
            if (topic := after.topics.get(name)) is not None
            and (old := before.topics.get(name)) is not None
            and old.topic_id == topic.topic_id
            and old.configs != topic.configs
        }
        if changed:
            self.replica_manager.reconfigure(changed)

    def _apply_broker_configs(self, image: MetadataImage) -> None:
        """Take this broker's dynamic configs from ``image``: its own over the cluster's
        default over its static configs."""
        at = datetime.datetime.now(datetime.UTC).isoformat()
        refused: list[tuple[str, str]] = []
        changed = self.config.apply_dynamic(
            image.broker_configs.get("", {}),
            image.broker_configs.get(str(self.broker_id), {}),
            at=at,
            refused=refused,
        )
        for name, old, new in changed:
            self._config_changed(name, old, new)
        for name, why in refused:
            self.log.warning(
                "dynamic_config_not_applied",
                name=name,
                reason=why,
                hint="the metadata log holds a value this broker's static configs refuse; "
                "change or delete it (purgatory configs --alter --entity-type brokers)",
            )

    def _faults_changed(self) -> None:
        """A partition fault began: drop the connections it cuts."""
        for node in self.members:
            if node != self.broker_id and self.faults.cuts_off(node):
                self.node_channels.drop(node)

    def _broker_sasl(self, listener: str) -> ClientSecurity | None:
        security = self.security.get(listener)
        login = None if security is None else security.broker_login
        if security is None or login is None:
            return None
        return ClientSecurity(
            security.protocol,
            self.broker_tls[listener],
            login.mechanism,
            login.username,
            login.password,
        )

    def _client_tls(self, listener: str) -> ssl.SSLContext | None:
        """The TLS context this broker connects to the others' ``listener`` with, when it
        is SSL or SASL_SSL: its truststore checks their certificates, its keystore is
        its own when they ask for one (ssl.client.auth)."""
        if self.listeners.get(listener).security_protocol not in ("SSL", "SASL_SSL"):
            return None
        try:
            return ssl_factory.client_context(self.config.listener_values(listener))
        except ValueError as exc:
            raise ValueError(f"listener {listener} (brokers connect to it): {exc}") from None

    def _leader_endpoint(self, broker_id: int) -> RemoteLeaderEndPoint:
        """How this broker's replica fetcher reaches leader ``broker_id``."""
        return RemoteLeaderEndPoint(
            self.broker_id,
            self._leader_transport(broker_id),
            self.config["replica.socket.timeout.ms"],
        )

    def _leader_connection(self, broker_id: int) -> LeaderConnection:
        address = self.metadata.endpoints(self.listeners.inter_broker).get(broker_id)
        return LeaderConnection(
            address or self.members[broker_id],
            f"replica-fetcher-{self.broker_id}",
            self.config["controller.quorum.request.timeout.ms"] / 1000,
            functools.partial(self.faults.delay_from_broker, broker_id),
            functools.partial(self.faults.cuts_off, broker_id),
            self.config["cluster.secret"],
            self.broker_id,
            self.broker_tls[self.listeners.inter_broker],
            self.broker_sasl[self.listeners.inter_broker],
        )

    # -- dynamic configuration ----------------------------------------------------------

    async def change_config(self, name: str, value: Any) -> tuple[Any, Any]:
        """Change a dynamic config of this broker (admin HTTP) the one way configs change:
        an IncrementalAlterConfigs of this broker's resource through the controller, applied
        when the metadata log brings it back. Returns (old, new); raises ConfigError
        (StaticConfigError for a config read at start only)."""
        canonical, parsed = self.config.check_dynamic(name, value)
        old = self.config.values[canonical]
        raw = kafka_value(parsed)
        request = m.IncrementalAlterConfigsRequest(
            [
                m.AlterConfigsResource(
                    m.BROKER_RESOURCE,
                    str(self.broker_id),
                    [m.AlterableConfig(canonical, m.CONFIG_SET, raw)],
                )
            ]
        )
        [result] = (await self.forwarding.alter_configs(request, incremental=True)).responses
        if result.error_code:
            raise ConfigError(result.error_message or f"error {result.error_code}")
        return old, self.config.values[canonical]

    def _config_changed(self, name: str, old: Any, new: Any) -> None:
        """What a dynamic config's new value changes beyond itself (the controller runs
        the election rules again itself when unclean.leader.election.enable changes)."""
        if name == "log.level":
            configure_logging(self.config["log.format"], new)
        elif name == "replica.lag.time.max.ms":
            self.replica_manager.lag_time_changed()
        elif name == "log.memory.max.bytes":
            self.replica_manager.memory_budget.limit_changed()
        self.log.info("config_changed", name=name, old=old, new=new)

    # -- observation -----------------------------------------------------------------------

    @property
    def fetcher_stats(self) -> dict[int, FetcherStats]:
        """A follower's fetching, by the leader broker fetched from."""
        return self.replica_manager.fetchers.stats

    def replica_batches(self, topic: str, index: int, from_offset: int) -> dict[str, Any] | None:
        """This broker's replica of a partition, batch by batch from ``from_offset``: its
        offsets and checksums (``GET /v1/partitions/<topic>/<partition>/batches``), or None
        if it holds none."""
        partition = self.replica_manager.partitions.get((topic, index))
        if partition is None:
            return None
        return {
            "broker_id": self.broker_id,
            "topic": topic,
            "partition": index,
            "leader_epoch": partition.leader_epoch,
            "high_watermark": partition.high_watermark,
            "log_end_offset": partition.log.log_end_offset,
            "batches": partition.log.batch_checksums(from_offset),
        }

    def state(self, partitions: list[ReplicaInfo] | None = None) -> BrokerState:
        """The ``/v1/state`` document (with ``partitions`` described already, if given)."""
        if partitions is None:
            partitions = [p.describe() for p in self._replicas()]
        return BrokerState(
            broker_id=self.broker_id,
            controller_id=self.controller_id,
            is_controller=self.controller is not None,
            metadata_epoch=self.metadata.epoch,
            members={str(i): f"{h}:{p}" for i, (h, p) in sorted(self.members.items())},
            live_brokers=sorted(self.metadata.live_brokers),
            groups=self.group_coordinator.describe(),
            partitions=partitions,
            connections=len(self.socket_server.connections),
            clients=self.socket_server.describe_clients(),
            config_changes=list(self.config.changes),
            faults=self.faults.describe(),
        )

    def _replicas(self) -> list[Partition]:
        return sorted(self.replica_manager.partitions.values(), key=lambda p: (p.topic, p.index))

    async def state_in_slices(self) -> BrokerState:
        """``state()`` for the admin API: the partitions are described
        ``STATE_SLICE`` at a time, the event loop serving requests in between, so that
        100,000 partitions never stop the broker for the whole document (each is as it
        was when its slice was described)."""
        replicas = self._replicas()
        described: list[ReplicaInfo] = []
        for start in range(0, len(replicas), STATE_SLICE):
            described += [p.describe() for p in replicas[start : start + STATE_SLICE]]
            if start + STATE_SLICE < len(replicas):
                await asyncio.sleep(0)
        return self.state(described)


async def start_broker(config: BrokerConfig) -> Broker:
    broker = Broker(config)
    try:
        await broker.start()
    except BaseException:
        await broker.stop()
        raise
    return broker


def _monotonic_ms() -> int:
    """The quotas' clock (their windows are measured in monotonic milliseconds)."""
    return int(time.monotonic() * 1000)
