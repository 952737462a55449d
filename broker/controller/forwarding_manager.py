"""ForwardingManager: topic changes and leader elections go to the active controller, here
or over the network.

CreateTopics, DeleteTopics, CreatePartitions (and topic auto-creation), ElectLeaders and
config changes (AlterConfigs, IncrementalAlterConfigs: the admin HTTP's too) and SCRAM
credential changes (AlterUserScramCredentials), ACL changes (CreateAcls, DeleteAcls) and
client quota changes (AlterClientQuotas)
are served by the active controller; a broker that is not it forwards them (in an Envelope, Kafka's way)
and answers only once its own metadata shows the change, so every broker answers the same
metadata afterwards (Kafka's ForwardingManager and AutoTopicCreationManager)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.controller_channel import ControllerChannel
from purgatory.broker.controller.internal_topics import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.controller.topics import every_topic_fails, topic_name_problem
from purgatory.protocol import acl_messages as am
from purgatory.protocol import messages as m
from purgatory.protocol import quota_messages as qm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError


class ForwardingManager:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        channel: ControllerChannel,
        spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.channel = channel
        self.spawn = spawn
        self._auto_creating: set[str] = set()
        self._metadata_waiters: list[asyncio.Future[None]] = []
        self.log = structlog.get_logger("forwarding").bind(broker_id=config.broker_id)

    def metadata_changed(self) -> None:
        """A new image landed here: wake the answers waiting to see their change."""
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _no_controller(self) -> str:
        return f"controller (broker {self.metadata.controller_id}) unavailable; retry"

    async def _on_controller(
        self,
        key: ApiKey,
        request: Any,
        timeout_ms: int,
        unreachable: Callable[[str], Any],
        landed: Callable[[Any], bool],
    ) -> Any:
        """Serve a topic change on the active controller (here, or forwarded to it) and
        answer once this broker's metadata shows the change (``landed``). Unreachable:
        the response ``unreachable(reason)`` (NOT_CONTROLLER throughout)."""
        try:
            response = await self.channel.forward(key, request, timeout_ms + 1000)
        except (ConnectionError, KafkaError) as exc:
            self.log.info("controller_unavailable", api=key.api_name, error=str(exc))
            return unreachable(self._no_controller())
        await self._wait_for_topics(lambda: landed(response), timeout_ms)
        return response

    async def create_topics(self, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        """Create topics on the controller (here, or forwarded to it)."""
        response: m.CreateTopicsResponse = await self._on_controller(
            ApiKey.CREATE_TOPICS,
            request,
            request.timeout_ms,
            lambda reason: every_topic_fails(request, ErrorCode.NOT_CONTROLLER, reason),
            lambda done: all(
                r.name in self.metadata.topics
                for r in done.topics
                if r.error_code == 0 and not request.validate_only
            ),
        )
        return response

    async def delete_topics(self, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        """Delete topics on the controller (here, or forwarded to it)."""
        response: m.DeleteTopicsResponse = await self._on_controller(
            ApiKey.DELETE_TOPICS,
            request,
            request.timeout_ms,
            lambda reason: every_topic_fails(request, ErrorCode.NOT_CONTROLLER, reason),
            lambda done: (
                not any(r.name in self.metadata.topics for r in done.responses if r.error_code == 0)
            ),
        )
        return response

    async def create_partitions(
        self, request: m.CreatePartitionsRequest
    ) -> m.CreatePartitionsResponse:
        """Add partitions on the controller (here, or forwarded to it)."""
        counts = {t.name: t.count for t in request.topics}

        def landed(done: m.CreatePartitionsResponse) -> bool:
            topics = self.metadata.topics
            return all(
                r.name in topics and len(topics[r.name].partitions) >= counts[r.name]
                for r in done.results
                if r.error_code == 0 and not request.validate_only
            )

        response: m.CreatePartitionsResponse = await self._on_controller(
            ApiKey.CREATE_PARTITIONS,
            request,
            request.timeout_ms,
            lambda reason: every_topic_fails(request, ErrorCode.NOT_CONTROLLER, reason),
            landed,
        )
        return response

    async def elect_leaders(self, request: m.ElectLeadersRequest) -> m.ElectLeadersResponse:
        """A leader election on the active controller (here, or forwarded to it); the
        controller answers once the brokers hold the result."""
        response: m.ElectLeadersResponse = await self._on_controller(
            ApiKey.ELECT_LEADERS,
            request,
            request.timeout_ms,
            lambda reason: m.ElectLeadersResponse(ErrorCode.NOT_CONTROLLER, []),
            lambda done: True,
        )
        return response

    async def alter_configs(
        self, request: m.IncrementalAlterConfigsRequest, incremental: bool
    ) -> m.IncrementalAlterConfigsResponse:
        """AlterConfigs (``incremental`` False) or IncrementalAlterConfigs on the active
        controller (here, or forwarded to it), which answers once the brokers applied it."""
        key = ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS
        response: m.IncrementalAlterConfigsResponse = await self._on_controller(
            key,
            request,
            self.config["controller.quorum.request.timeout.ms"],
            lambda reason: m.IncrementalAlterConfigsResponse(
                [
                    m.AlterConfigsResourceResponse(
                        ErrorCode.NOT_CONTROLLER, reason, r.resource_type, r.resource_name
                    )
                    for r in request.resources
                ]
            ),
            lambda done: True,
        )
        return response

    async def alter_user_scram_credentials(
        self, request: sm.AlterUserScramCredentialsRequest
    ) -> sm.AlterUserScramCredentialsResponse:
        """AlterUserScramCredentials on the active controller (here, or forwarded to it),
        which answers once the brokers applied it; NOT_CONTROLLER for every user when it
        cannot be reached, as Kafka answers."""
        users = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        response: sm.AlterUserScramCredentialsResponse = await self._on_controller(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            request,
            self.config["controller.quorum.request.timeout.ms"],
            lambda reason: sm.AlterUserScramCredentialsResponse(
                [
                    sm.AlterUserScramCredentialsResult(user, ErrorCode.NOT_CONTROLLER, reason)
                    for user in users
                ]
            ),
            lambda done: True,
        )
        return response

    async def create_acls(self, request: am.CreateAclsRequest) -> am.CreateAclsResponse:
        """CreateAcls on the active controller (here, or forwarded to it), answered once
        the brokers applied it; NOT_CONTROLLER for every ACL when it cannot be reached."""
        response: am.CreateAclsResponse = await self._on_controller(
            ApiKey.CREATE_ACLS,
            request,
            self.config["controller.quorum.request.timeout.ms"],
            lambda reason: am.CreateAclsResponse(
                [am.AclCreationResult(ErrorCode.NOT_CONTROLLER, reason) for _ in request.creations]
            ),
            lambda done: True,
        )
        return response

    async def delete_acls(self, request: am.DeleteAclsRequest) -> am.DeleteAclsResponse:
        """DeleteAcls on the active controller, as ``create_acls``."""
        response: am.DeleteAclsResponse = await self._on_controller(
            ApiKey.DELETE_ACLS,
            request,
            self.config["controller.quorum.request.timeout.ms"],
            lambda reason: am.DeleteAclsResponse(
                [
                    am.DeleteAclsFilterResult(ErrorCode.NOT_CONTROLLER, reason, [])
                    for _ in request.filters
                ]
            ),
            lambda done: True,
        )
        return response

    async def alter_client_quotas(
        self, request: qm.AlterClientQuotasRequest
    ) -> qm.AlterClientQuotasResponse:
        """AlterClientQuotas on the active controller, as ``create_acls``: NOT_CONTROLLER
        for every entity when it cannot be reached."""
        response: qm.AlterClientQuotasResponse = await self._on_controller(
            ApiKey.ALTER_CLIENT_QUOTAS,
            request,
            self.config["controller.quorum.request.timeout.ms"],
            lambda reason: qm.AlterClientQuotasResponse(
                [
                    qm.AlterEntryResult(ErrorCode.NOT_CONTROLLER, reason, e.entity)
                    for e in request.entries
                ]
            ),
            lambda done: True,
        )
        return response

    async def move_leader(
        self, topic: str, partition: int, broker: int, timeout_ms: int
    ) -> tuple[int, str | None]:
        """Make ``broker`` lead ``topic``-``partition`` and be its preferred replica (the
        admin API's leader move); the error Kafka would answer, with a message, if not."""
        request = m.ElectLeadersRequest(
            m.PREFERRED_ELECTION, [m.TopicPartitions(topic, [partition])], timeout_ms, broker
        )
        response = await self.elect_leaders(request)
        if response.error_code:
            return response.error_code, self._no_controller()
        [result] = [p for t in response.replica_election_results for p in t.partition_result]
        return result.error_code, result.error_message

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
        self._create_in_background(self.creatable(topic))

    def creatable(self, name: str) -> m.CreatableTopic:
        """How an auto-created topic is made: a coordinator's internal topic as its
        coordinator needs it, whoever asks first (Kafka's AutoTopicCreationManager: a
        Metadata request naming ``__consumer_offsets`` creates it with
        ``offsets.topic.num.partitions``, not ``num.partitions``, or its coordinators would
        look for partitions it does not have); any other with the broker's defaults."""
        if name == OFFSETS_TOPIC:
            return self._internal_topic(
                OFFSETS_TOPIC,
                self.config["offsets.topic.num.partitions"],
                self.config["offsets.topic.replication.factor"],
                {},
            )
        if name == TRANSACTION_STATE_TOPIC:
            factor = self._internal_replication_factor(
                self.config["transaction.state.log.replication.factor"]
            )
            return self._internal_topic(
                TRANSACTION_STATE_TOPIC,
                self.config["transaction.state.log.num.partitions"],
                factor,
                {
                    "min.insync.replicas": str(
                        min(self.config["transaction.state.log.min.isr"], factor)
                    ),
                    "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                },
            )
        if name == SHARE_GROUP_STATE_TOPIC:
            factor = self._internal_replication_factor(
                self.config["share.coordinator.state.topic.replication.factor"]
            )
            return self._internal_topic(
                SHARE_GROUP_STATE_TOPIC,
                self.config["share.coordinator.state.topic.num.partitions"],
                factor,
                {
                    "min.insync.replicas": str(
                        min(self.config["share.coordinator.state.topic.min.isr"], factor)
                    ),
                    "segment.bytes": str(
                        self.config["share.coordinator.state.topic.segment.bytes"]
                    ),
                },
            )
        return m.CreatableTopic(name)

    def create_offsets_topic(self) -> None:
        """A group needs its coordinator: create ``__consumer_offsets`` (Kafka's
        AutoTopicCreationManager does so for FindCoordinator, whatever
        ``auto.create.topics.enable`` says)."""
        self._create_internal_topic(OFFSETS_TOPIC)

    def create_transaction_state_topic(self) -> None:
        """A transactional id needs its coordinator: create ``__transaction_state``."""
        self._create_internal_topic(TRANSACTION_STATE_TOPIC)

    def create_share_state_topic(self) -> None:
        """A share-partition's leader needs its state's coordinator: create
        ``__share_group_state`` (Kafka's share coordinator creates it on first use too)."""
        self._create_internal_topic(SHARE_GROUP_STATE_TOPIC)

    def _internal_replication_factor(self, configured: int) -> int:
        """``configured``, capped at the cluster's size (the brokers registered or in the
        quorum, not those live now: a coordinator found while a broker starts or is
        fenced must not get fewer replicas for ever; the controller refuses until enough
        are live, and FindCoordinator answers COORDINATOR_NOT_AVAILABLE meanwhile, as
        Kafka's does)."""
        return max(min(configured, len(self.metadata.known_brokers) or 1), 1)

    def _internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> m.CreatableTopic:
        """A coordinator's topic: its records never expire by time or size."""
        return m.CreatableTopic(
            name,
            partitions,
            self._internal_replication_factor(replication_factor),
            {"retention.ms": "-1", "retention.bytes": "-1", **configs},
        )

    def _create_internal_topic(self, name: str) -> None:
        """Create a coordinator's topic (once)."""
        if name in self._auto_creating or name in self.metadata.topics:
            return
        self._create_in_background(self.creatable(name))

    def _create_in_background(self, topic: m.CreatableTopic) -> None:
        name = topic.name
        self._auto_creating.add(name)
        task = self.spawn(self.create_topics(m.CreateTopicsRequest([topic])))
        task.add_done_callback(lambda _: self._auto_creating.discard(name))
