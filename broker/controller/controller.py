"""The controller: owns topics and partition assignments and pushes them to every broker.

The lowest id in the static membership list is the controller (Kafka's controller model
without ZooKeeper or KRaft). Brokers register (and re-register every
``broker.heartbeat.interval.ms``); the controller answers a registration only after the
broker has applied the controller's current full picture, and pushes every change to every
registered broker. CreateTopics returns once every registered broker applied the change, so
Metadata from any broker agrees as soon as the topic exists.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from purgatory.broker.config.broker_config import BrokerConfig, validate_topic_configs
from purgatory.broker.controller.controller_channel_manager import ControllerChannelManager
from purgatory.broker.controller.election import (
    Election,
    ElectionResult,
    alter_isr,
    change_partition,
    elect_on_request,
    move_leadership,
)
from purgatory.broker.controller.topics import create_topics, grow_topics
from purgatory.clients.connection import Connection
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.inter_broker_messages import (
    AlterPartitionPartition,
    AlterPartitionPartitionResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResponse,
    PartitionState,
    TopicState,
    UpdateMetadataRequest,
)
from purgatory.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)


class Controller:
    def __init__(
        self,
        config: BrokerConfig,
        members: dict[int, tuple[str, int]],
        apply_locally: Callable[[UpdateMetadataRequest], Awaitable[None]],
        connect: Callable[[int], Awaitable[Connection]],
        newest_snapshot: Callable[[], Awaitable[UpdateMetadataRequest | None]],
        broker_incarnation: str,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.members = members
        self.incarnation = uuid.uuid4().hex
        self.epoch = 0
        self.topics: dict[str, TopicState] = {}
        # Every broker's incarnation as last registered (this one's included).
        self.incarnations: dict[int, str] = {config.broker_id: broker_incarnation}
        self.elections = dict.fromkeys(Election, 0)  # leader elections, by kind
        self._apply_locally = apply_locally
        self._newest_snapshot = newest_snapshot
        self.log = structlog.get_logger("controller").bind(broker_id=self.broker_id)
        self.channels = ControllerChannelManager(
            config, self.picture, lambda: self.epoch, apply_locally, connect, self.log
        )
        self._last_seen: dict[int, float] = {}  # broker id -> loop time of its last registration
        self.live: frozenset[int] = frozenset({self.broker_id})
        # Brokers in controlled shutdown: live, but they may not lead nor join an ISR.
        self.shutting_down: set[int] = set()
        self._background: set[asyncio.Future[Any]] = set()
        self._next_start = 0

    def picture(self) -> UpdateMetadataRequest:
        return UpdateMetadataRequest(
            self.broker_id,
            self.incarnation,
            self.epoch,
            list(self.topics.values()),
            sorted(self.live),
            dict(self.incarnations),
        )

    async def start(self) -> None:
        await self._recover()
        self._elect()  # partitions whose leaders are not live (the old controller's, ...)
        await self._apply_locally(self.picture())
        if self.channels.registered:  # brokers live under the previous controller: tell them now
            self._publish_in_background()
        self._background.add(asyncio.ensure_future(self._watch_liveness()))
        self._background.add(asyncio.ensure_future(self._rebalance_leaders()))

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()

    async def _recover(self) -> None:
        """Adopt the newest picture any reachable member holds (FetchSnapshot), so a
        restarted controller carries on with the cluster's topics instead of erasing them.
        Metadata epochs keep growing across controllers, so pictures compare by epoch."""
        newest = await self._newest_snapshot()
        if newest is None:
            return
        self.topics = {t.name: t for t in newest.topics}
        self.epoch = newest.metadata_epoch + 1
        own = self.incarnations[self.broker_id]
        recorded = newest.broker_incarnations.get(self.broker_id)
        self.incarnations = {**newest.broker_incarnations, self.broker_id: own}
        self._next_start = len(self.topics)
        # Those live then stay live for one session: they re-register well within it.
        now = asyncio.get_running_loop().time()
        # (The controller that picture came from is not carried: it is gone or it is us.)
        carried = {
            b
            for b in newest.live_brokers
            if b in self.members and b not in (self.broker_id, newest.controller_id)
        }
        self._last_seen.update(dict.fromkeys(carried, now))
        self.live = frozenset(carried | {self.broker_id})
        # Push to them before they come looking (they accept the newer epoch and follow us);
        # their own registration then replaces the unknown incarnation.
        for broker_id in carried:
            self.channels.expect(broker_id, self.incarnations.get(broker_id, ""))
        if recorded is not None and recorded != own:
            self._restarted(self.broker_id)
        self.log.info(
            "controller_recovered", topics=len(self.topics), from_epoch=newest.metadata_epoch
        )

    # -- liveness -------------------------------------------------------------------------

    async def _watch_liveness(self) -> None:
        """A broker is live while it re-registers within ``broker.session.timeout.ms``."""
        session = self.config["broker.session.timeout.ms"] / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(session / 4)
            now = loop.time()
            live = frozenset(
                {self.broker_id}
                | {b for b, seen in self._last_seen.items() if now - seen <= session}
            )
            if live != self.live:
                self._set_live(live)

    def _set_live(self, live: frozenset[int]) -> None:
        gone, back = self.live - live, live - self.live
        if gone:
            self.log.warning("brokers_not_live", brokers=sorted(gone))
        if back:
            self.log.info("brokers_live", brokers=sorted(back))
        self.live = live
        self._elect()
        self.epoch += 1
        self._publish_in_background()

    def _publish_in_background(self) -> None:
        task = asyncio.ensure_future(self.channels.publish(self.config["metadata.push.timeout.ms"]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- registration ---------------------------------------------------------------------

    async def register(self, broker_id: int, incarnation: str) -> None:
        """Bring a registering broker up to date; raise KafkaError if it cannot be reached."""
        if broker_id not in self.members:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"broker {broker_id} is not in cluster.members"
            )
        self._last_seen[broker_id] = asyncio.get_running_loop().time()
        recorded = self.incarnations.get(broker_id)
        if recorded != incarnation:
            self.log.info("broker_registered", registered_broker=broker_id)
            self.shutting_down.discard(broker_id)  # a new run of a broker that shut down
            if recorded is not None:
                self._restarted(broker_id)
            self.incarnations[broker_id] = incarnation
            if broker_id in self.live:
                self.epoch += 1
                self._publish_in_background()
        if broker_id not in self.live:
            self._set_live(self.live | {broker_id})
        if self.channels.holds(broker_id, incarnation, self.epoch):
            return
        self.channels.expect(broker_id, incarnation)
        if not await self.channels.push(broker_id):
            raise KafkaError(
                ErrorCode.BROKER_NOT_AVAILABLE,
                f"controller could not push metadata to broker {broker_id}",
            )

    # -- elections ------------------------------------------------------------------------

    def _restarted(self, broker_id: int) -> None:
        """``broker_id`` came back as a new incarnation: its logs (in memory) are gone, so
        it leaves every ISR at once and leads nothing it lacks the data of."""
        self.log.warning("broker_restarted_without_its_log", restarted_broker=broker_id)
        self._elect(lost_data=frozenset({broker_id}))

    def _elect(self, lost_data: frozenset[int] = frozenset(), preferred: bool = False) -> bool:
        """Apply the election rules (``election.change_partition``) to every partition;
        True if any changed. Live brokers may lead and stay in ISRs."""
        eligible = self._eligible() - lost_data
        default_unclean = self.config["unclean.leader.election.enable"]
        changed = False
        for name, topic in list(self.topics.items()):
            # The topic's own setting (parsed as every topic config is), else the broker's.
            unclean = bool(
                validate_topic_configs(topic.configs).get(
                    "unclean.leader.election.enable", default_unclean
                )
            )
            partitions = list(topic.partitions)
            for index, state in enumerate(partitions):
                change = change_partition(
                    state, eligible, lost_data, unclean, preferred, frozenset(self.shutting_down)
                )
                if change is None:
                    continue
                partitions[index] = change.state
                self._log_change(name, state, change)
            if partitions != topic.partitions:
                # New objects, never mutation (the local metadata cache compares them).
                self.topics[name] = msgspec.structs.replace(topic, partitions=partitions)
                changed = True
        return changed

    def _eligible(self) -> frozenset[int]:
        """Brokers that may lead and be in-sync replicas now."""
        return self.live - self.shutting_down

    def _log_change(self, topic: str, before: PartitionState, change: ElectionResult) -> None:
        after = change.state
        fields = {
            "topic": topic,
            "partition": after.partition_index,
            "leader": after.leader_id,
            "leader_epoch": after.leader_epoch,
            "isr": after.isr,
        }
        if change.election is not None:
            self.elections[change.election] += 1
            self.log.warning(
                f"{change.election.value}_leader_election",
                previous_leader=before.leader_id,
                **fields,
            )
        elif change.offline:
            self.log.error(
                "partition_offline",
                previous_leader=before.leader_id,
                hint="no in-sync replica is live; it returns when one does, or set "
                "unclean.leader.election.enable=true to elect any live replica (and lose "
                "what only the lost in-sync replicas held)",
                **fields,
            )
        else:
            self.log.info("isr_changed", **fields)

    async def _rebalance_leaders(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds,
        move leadership back to preferred replicas that are live in-sync replicas."""
        while True:
            await asyncio.sleep(self.config["leader.imbalance.check.interval.seconds"])
            if self.config["auto.leader.rebalance.enable"]:
                self.reelect(preferred=True)

    def reelect(self, preferred: bool = False) -> None:
        """Run the election rules again now (a config they read changed, or a preferred
        leader election is due)."""
        if self._elect(preferred=preferred):
            self.epoch += 1
            self._publish_in_background()

    async def elect_leaders(
        self, election: Election, partitions: list[tuple[str, int]] | None, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: a preferred or unclean election for each partition asked for
        (every partition when None), answered once the brokers hold the result."""
        if partitions is None:
            partitions = [
                (n, p.partition_index) for n, t in self.topics.items() for p in t.partitions
            ]
        results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
        eligible = self._eligible()
        for name, index in partitions:
            state = self._partition_state(name, index)
            if state is None:
                results[(name, index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"no partition {name}-{index}",
                )
                continue
            outcome = elect_on_request(state, eligible, election)
            if isinstance(outcome, ElectionResult):
                self._replace_partition(name, outcome.state)
                self._log_change(name, state, outcome)
                results[(name, index)] = (ErrorCode.NONE, None)
            else:
                results[(name, index)] = outcome
        if any(code == ErrorCode.NONE for code, _ in results.values()):
            self.epoch += 1
            await self.channels.publish(timeout_ms)
        return results

    async def move_leader(
        self, topic: str, partition: int, broker: int, timeout_ms: int
    ) -> tuple[ErrorCode, str | None]:
        """Make ``broker`` lead ``topic``-``partition`` (and be its preferred replica), as
        a reorder-only reassignment and a preferred election would; answered once the
        brokers hold the result. The error Kafka would answer, with a message, if not."""
        state = self._partition_state(topic, partition)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}"
        outcome = move_leadership(state, broker, self._eligible())
        if not isinstance(outcome, ElectionResult):
            return outcome
        self._replace_partition(topic, outcome.state)
        self._log_change(topic, state, outcome)
        self.epoch += 1
        await self.channels.publish(timeout_ms)
        return ErrorCode.NONE, None

    def _partition_state(self, topic: str, partition: int) -> PartitionState | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    async def controlled_shutdown(self, broker_id: int, incarnation: str) -> list[tuple[str, int]]:
        """A broker is about to stop: move its leaderships to other live in-sync replicas
        and take it out of every ISR, push that, and answer once the brokers hold it.
        Returns the partitions no other in-sync replica could take (they are offline
        until it, or another in-sync replica, returns)."""
        if broker_id not in self.members:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"broker {broker_id} is not a member")
        if self.incarnations.get(broker_id) != incarnation:
            raise KafkaError(
                ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} registered as another run"
            )
        self.shutting_down.add(broker_id)
        self.log.info("controlled_shutdown", shutting_down_broker=broker_id)
        if self._elect():
            self.epoch += 1
            await self.channels.publish(self.config["metadata.push.timeout.ms"])
        return [
            (name, p.partition_index)
            for name, topic in self.topics.items()
            for p in topic.partitions
            if p.leader_id == broker_id or (p.leader_id < 0 and broker_id in p.isr)
        ]

    # -- topics ---------------------------------------------------------------------------

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        """Create topics (checked by ``topics.create_topics``) and push the change."""
        results, created = create_topics(
            request, self.topics, self.config, sorted(self.members), self._next_start
        )
        self._next_start += len(created)
        await self._add_topics(created, "topic_created", request.timeout_ms)
        return CreateTopicsResponse(results)

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """Add partitions to topics (checked by ``topics.grow_topics``) and push the change."""
        results, grown = grow_topics(request, self.topics, sorted(self.members))
        await self._add_topics(grown, "partitions_created", request.timeout_ms)
        return CreatePartitionsResponse(results)

    async def _add_topics(self, topics: dict[str, TopicState], event: str, timeout_ms: int) -> None:
        """Put new or grown topics in the picture and push it (nothing to do: no push)."""
        for name, topic in topics.items():
            self.topics[name] = topic
            rf = len(topic.partitions[0].replicas)
            self.log.info(
                event, topic=name, partitions=len(topic.partitions), replication_factor=rf
            )
        if topics:
            self.epoch += 1
            await self.channels.publish(timeout_ms)

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        """Remove topics from the picture and push it: every broker drops their partitions
        (and records, and committed offsets) when it applies the change."""
        results: list[DeletableTopicResult] = []
        deleted = False
        for name in request.topic_names:
            if self.topics.pop(name, None) is None:
                results.append(
                    DeletableTopicResult(
                        name,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {name!r} does not exist",
                    )
                )
                continue
            deleted = True
            results.append(DeletableTopicResult(name, ErrorCode.NONE))
            self.log.info("topic_deleted", topic=name)
        if deleted:
            self.epoch += 1
            await self.channels.publish(request.timeout_ms)
        return DeleteTopicsResponse(results)

    # -- ISR changes ------------------------------------------------------------------------

    def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Apply ISR changes a leader asks for, each checked by ``election.alter_isr``."""
        topics = []
        changed = False
        for topic in request.topics:
            results = []
            for change in topic.partitions:
                result = self._alter_one(request.broker_id, topic.name, change)
                changed |= result.error_code == ErrorCode.NONE
                results.append(result)
            topics.append(AlterPartitionTopicResponse(topic.name, results))
        if changed:
            self.epoch += 1
            self._publish_in_background()
        return AlterPartitionResponse(ErrorCode.NONE, topics)

    def _alter_one(
        self, broker_id: int, topic_name: str, change: AlterPartitionPartition
    ) -> AlterPartitionPartitionResponse:
        index = change.partition_index
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return AlterPartitionPartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        updated = alter_isr(
            topic.partitions[index],
            broker_id,
            change.leader_epoch,
            change.partition_epoch,
            change.new_isr,
            self._eligible(),
        )
        if isinstance(updated, ErrorCode):
            return AlterPartitionPartitionResponse(index, updated)
        # New objects, never mutation: the local broker's metadata cache holds the old ones
        # and finds changes by comparing.
        self._replace_partition(topic_name, updated)
        self.log.info(
            "isr_changed",
            topic=topic_name,
            partition=index,
            isr=updated.isr,
            partition_epoch=updated.partition_epoch,
        )
        return AlterPartitionPartitionResponse(
            index,
            ErrorCode.NONE,
            updated.leader_id,
            updated.leader_epoch,
            updated.isr,
            updated.partition_epoch,
        )

    def _replace_partition(self, topic_name: str, state: PartitionState) -> None:
        topic = self.topics[topic_name]
        partitions = list(topic.partitions)
        partitions[state.partition_index] = state
        self.topics[topic_name] = msgspec.structs.replace(topic, partitions=partitions)
