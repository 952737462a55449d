"""QuorumController: the active controller, which is the metadata quorum's leader (Kafka's
QuorumController).

Records are the only way metadata changes. A request is checked against the controller's
image by a control manager (``ClusterControlManager`` for brokers,
``ReplicationControlManager`` for topics, partitions and ISRs,
``ConfigurationControlManager`` for topic and dynamic broker configs,
``ScramControlManager`` for SCRAM users' credentials, ``AclControlManager`` for ACLs,
``ClientQuotaControlManager`` for client quotas),
which returns records;
the controller appends them to the quorum, replays them into its image at once (so the
next request sees them), and answers only once the quorum has committed them. Nothing it
decides takes effect anywhere before that: a controller cut off from the majority can
append, but never commit, and loses its leadership by check-quorum.

It becomes active when the quorum makes its member leader and everything before its epoch
is committed (``activate``, with the committed image), and stops at once when the member
leads no more (``deactivate``): whatever still waits for a commit is answered
NOT_CONTROLLER (its outcome is unknown), what is committed and only waited for the
brokers to apply it is answered as done, and the image is dropped (a later activation
starts again from the committed one).

The first controller to become active on an empty metadata log writes its bootstrap
records first: the SCRAM users of ``bootstrap.scram.credentials`` (Kafka's bootstrap
metadata, which ``kafka-storage format --add-scram`` seeds).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import structlog

from purgatory.broker.config.broker_config import BrokerConfig
from purgatory.broker.controller.acl_control import AclControlManager
from purgatory.broker.controller.client_quota_control import ClientQuotaControlManager
from purgatory.broker.controller.cluster_control import (
    BrokerHeartbeatManager,
    ClusterControlManager,
)
from purgatory.broker.controller.configuration_control import ConfigurationControlManager
from purgatory.broker.controller.election import Election
from purgatory.broker.controller.replication_control import (
    PartitionElection,
    ReplicationControlManager,
)
from purgatory.broker.controller.scram_control import ScramControlManager
from purgatory.broker.controller.topics import TopicsRequest, every_topic_fails
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import (
    MetadataRecord,
    RegisterBrokerRecord,
    UserScramCredentialRecord,
    encode_record,
)
from purgatory.broker.metadata.scram_parser import parse_scram_arguments
from purgatory.broker.purgatory import Periodic, Scheduler
from purgatory.broker.purgatory.clock import Cancellable
from purgatory.broker.raft.kafka_raft_client import KafkaRaftClient
from purgatory.protocol import acl_messages as am
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol import quota_messages as qm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.scram import MECHANISMS_BY_TYPE

R = TypeVar("R")

# The most records one user request may make (Kafka's QuorumController bound).
MAX_RECORDS_PER_USER_OP = 10000


class NotController(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)


class ElectionTimedOut(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class QuorumController:
    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        raft: KafkaRaftClient,
        scheduler: Scheduler,
        members: Iterable[int],
        rng: random.Random | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.raft = raft
        self.scheduler = scheduler
        self.rng = rng or random.Random()
        self.cluster = ClusterControlManager(config["cluster.id"], members)
        self.replication = ReplicationControlManager(config, self.rng)
        self.configuration = ConfigurationControlManager(config)
        self.scram = ScramControlManager()
        self.acls = AclControlManager(self.rng)
        self.client_quotas = ClientQuotaControlManager()
        self.epoch: int | None = None  # the quorum epoch it is active in; None: standby
        self.image = MetadataImage()  # committed records and its own writes since
        self.heartbeats = BrokerHeartbeatManager(config["broker.session.timeout.ms"])
        self.elections = dict.fromkeys(Election, 0)  # leader elections, by kind
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._applied_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._session_check: Cancellable | None = None
        self._rebalance = Periodic(
            scheduler,
            lambda: config["leader.imbalance.check.interval.seconds"] * 1000,
            self._rebalance_leaders,
        )
        self.log = structlog.get_logger("controller").bind(broker_id=node_id)

    @property
    def active(self) -> bool:
        return self.epoch is not None

    # -- activation -------------------------------------------------------------------------

    def activate(
        self, epoch: int, committed: MetadataImage, former_leader: tuple[int, int] | None
    ) -> None:
        """The quorum made this member leader of ``epoch`` and ``committed`` holds every
        record before it: take over. Every broker gets a full session from now, except the
        former leader's own broker, counted from when this member last heard from it."""
        self.epoch = epoch
        self.image = committed
        now = self.scheduler.now_ms()
        self.heartbeats = BrokerHeartbeatManager(self.config["broker.session.timeout.ms"])
        for broker in committed.brokers:
            self.heartbeats.touch(broker, now)
        if former_leader is not None and former_leader[0] in committed.brokers:
            self.heartbeats.last_contact[former_leader[0]] = former_leader[1]
        self.raft.on_fetch = self._check_applied
        self._rebalance.start()
        self.log.info("controller_activated", epoch=epoch, metadata_offset=committed.offset)
        if committed.empty:
            self._bootstrap()
        self._check_sessions()

    def _bootstrap(self) -> None:
        """Write the bootstrap records into the new metadata log (committed in the
        background, before any broker's registration)."""
        records: list[MetadataRecord] = []
        for argument in parse_scram_arguments(self.config["bootstrap.scram.credentials"]):
            credential = argument.credential()
            records.append(
                UserScramCredentialRecord(
                    argument.name,
                    argument.mechanism.type,
                    credential.salt,
                    credential.stored_key,
                    credential.server_key,
                    credential.iterations,
                )
            )
            self.log.info(
                "scram_credential_bootstrapped",
                user=argument.name,
                mechanism=argument.mechanism.name,
            )
        self._write(records)

    def deactivate(self) -> None:
        if self.epoch is None:
            return
        self.log.info("controller_deactivated", epoch=self.epoch)
        self.epoch = None
        self.image = MetadataImage()
        self.raft.on_fetch = None
        self._rebalance.cancel()
        if self._session_check is not None:
            self._session_check.cancel()
            self._session_check = None
        uncommitted, applying = self._commit_waiters, self._applied_waiters
        self._commit_waiters, self._applied_waiters = [], []
        for _, future in uncommitted:
            if not future.done():
                future.set_exception(
                    NotController(f"node {self.node_id} is no longer the controller")
                )
        for _, future in applying:
            if not future.done():
                future.set_result(None)  # committed: the brokers apply it without us

    def committed(self, offset: int) -> None:
        """The quorum committed everything up to ``offset``: answer what waited for it."""
        waiting = self._commit_waiters
        while waiting and waiting[0][0] <= offset:
            _, future = waiting.pop(0)
            if not future.done():
                future.set_result(None)

    # -- writing ------------------------------------------------------------------------------

    def _require_active(self) -> int:
        if self.epoch is None:
            raise NotController(f"node {self.node_id} is not the active controller")
        return self.epoch

    def _write(self, records: list[MetadataRecord]) -> int:
        """Append ``records`` and replay them into the image; the offset of the last one,
        or of the image when there are none."""
        epoch = self._require_active()
        if not records:
            return self.image.offset
        first = self.raft.log.end_offset
        for i, record in enumerate(records):
            if isinstance(record, RegisterBrokerRecord):
                record.broker_epoch = first + i
        last = self.raft.append(epoch, [encode_record(r) for r in records])
        delta = MetadataDelta(self.image)
        for i, record in enumerate(records):
            delta.replay(record, first + i)
        self.image = delta.apply()
        return last

    async def _commit(self, offset: int) -> None:
        """Wait until the quorum commits ``offset`` (NotController if leadership is lost)."""
        if offset <= self.raft.high_watermark - 1:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((offset, future))
        self._commit_waiters.sort(key=lambda w: w[0])
        await future

    async def _write_and_commit(self, records: list[MetadataRecord]) -> int:
        offset = self._write(records)
        await self._commit(offset)
        return offset

    async def _applied_everywhere(self, offset: int, timeout_ms: int) -> None:
        """Wait (at most ``timeout_ms``) until every unfenced broker has applied
        ``offset``, so that Metadata from any of them shows the change."""
        if self._all_applied(offset):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._applied_waiters.append((offset, future))
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000):
                await future
        except TimeoutError:
            pass
        finally:
            self._applied_waiters = [w for w in self._applied_waiters if w[1] is not future]

    def _all_applied(self, offset: int) -> bool:
        applied = self.raft.replica_applied_offsets()
        return all(applied.get(b, -1) > offset for b in self.image.unfenced_brokers())

    def _check_applied(self) -> None:
        for offset, future in list(self._applied_waiters):
            if not future.done() and self._all_applied(offset):
                future.set_result(None)

    def _with_elections(
        self,
        records: list[MetadataRecord],
        lost_data: frozenset[int] = frozenset(),
        preferred: bool = False,
    ) -> list[MetadataRecord]:
        """``records`` followed by what the election rules change once they apply."""
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record, self.image.offset)
        after = delta.apply()
        elections = self.replication.elect(after, lost_data, preferred)
        self._count(elections)
        return [*records, *self.replication.election_records(after, elections)]

    def _count(self, elections: Iterable[PartitionElection]) -> None:
        for election in elections:
            result, before = election.result, election.before
            after = result.state
            fields = {
                "topic": election.topic,
                "partition": after.partition_index,
                "leader": after.leader_id,
                "leader_epoch": after.leader_epoch,
                "isr": after.isr,
            }
            if result.election is not None:
                self.elections[result.election] += 1
                self.log.warning(
                    f"{result.election.value}_leader_election",
                    previous_leader=before.leader_id,
                    **fields,
                )
            elif result.offline:
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

    # -- brokers -------------------------------------------------------------------------------

    async def register_broker(
        self, request: ib.BrokerRegistrationRequest
    ) -> ib.BrokerRegistrationResponse:
        self._require_active()
        code, message, record = self.cluster.register(self.image, request)
        if code:
            return ib.BrokerRegistrationResponse(code, message)
        self.heartbeats.touch(request.broker_id, self.scheduler.now_ms())
        if record is None:  # this run is registered already
            current = self.image.brokers[request.broker_id]
            return ib.BrokerRegistrationResponse(ErrorCode.NONE, None, current.broker_epoch)
        records: list[MetadataRecord] = []
        if request.broker_id in self.image.brokers:
            # A new run of a registered broker: its logs (in memory) are gone, so it leaves
            # every ISR and leadership. These records come before its registration, so a
            # broker that sees itself registered sees them too.
            self.log.warning("broker_restarted_without_its_log", restarted_broker=request.broker_id)
            records = self._with_elections([], lost_data=frozenset({request.broker_id}))
        else:
            self.log.info("broker_registered", registered_broker=request.broker_id)
        offset = await self._write_and_commit([*records, record])
        return ib.BrokerRegistrationResponse(ErrorCode.NONE, None, offset)

    async def heartbeat(self, request: ib.BrokerHeartbeatRequest) -> ib.BrokerHeartbeatResponse:
        self._require_active()
        response, records = self.cluster.heartbeat(self.image, request)
        if response.error_code:
            return response
        self.heartbeats.touch(request.broker_id, self.scheduler.now_ms())
        if records:
            self.log.info("broker_unfenced", unfenced_broker=request.broker_id)
            await self._write_and_commit(self._with_elections(records))
        return response

    def _check_sessions(self) -> None:
        """Fence every unfenced broker whose session expired, then wait for the next."""
        self._session_check = None
        if self.epoch is None:
            return
        now = self.scheduler.now_ms()
        unfenced = self.image.unfenced_brokers()
        expired = self.heartbeats.expired(unfenced, now)
        if expired:
            self.log.warning("brokers_fenced", brokers=expired, reason="session expired")
            try:
                self._write(self._with_elections(self.cluster.fence(self.image, expired)))
            except KafkaError:
                return  # leadership lost meanwhile
            unfenced = self.image.unfenced_brokers()
        due = self.heartbeats.next_expiry(unfenced)
        if due is not None:
            self._session_check = self.scheduler.call_at(max(due, now + 1), self._check_sessions)
        elif self.epoch is not None:
            self._session_check = self.scheduler.call_at(
                now + self.heartbeats.session_ms, self._check_sessions
            )

    async def controlled_shutdown(
        self, request: ib.ControlledShutdownRequest
    ) -> ib.ControlledShutdownResponse:
        """A broker about to stop: it may lead nor join an ISR any more, so its leaderships
        move to other in-sync replicas; answered once the brokers hold that, with the
        partitions no other in-sync replica could take."""
        self._require_active()
        code, records = self.cluster.controlled_shutdown(
            self.image, request.broker_id, request.broker_epoch
        )
        if code:
            return ib.ControlledShutdownResponse(code, [])
        self.log.info("controlled_shutdown", shutting_down_broker=request.broker_id)
        offset = await self._write_and_commit(self._with_elections(records))
        image = self.image  # as committed (a deactivation while waiting below drops it)
        await self._applied_everywhere(offset, self.config["controller.quorum.request.timeout.ms"])
        broker = request.broker_id
        remaining = [
            ib.RemainingPartition(name, p.partition_index)
            for name, topic in image.topics.items()
            for p in topic.partitions
            if p.leader_id == broker or (p.leader_id < 0 and broker in p.isr)
        ]
        return ib.ControlledShutdownResponse(ErrorCode.NONE, remaining)

    # -- partitions ------------------------------------------------------------------------------

    async def alter_partition(self, request: ib.AlterPartitionRequest) -> ib.AlterPartitionResponse:
        self._require_active()
        response, records = self.replication.alter_partition(self.image, request)
        if records:
            for topic in response.topics:
                for p in topic.partitions:
                    if p.error_code == ErrorCode.NONE:
                        self.log.info(
                            "isr_changed",
                            topic=topic.name,
                            partition=p.partition_index,
                            isr=p.isr,
                            partition_epoch=p.partition_epoch,
                        )
            await self._write_and_commit(records)
        return response

    async def elect_leaders(
        self,
        election: Election,
        partitions: list[tuple[str, int]] | None,
        timeout_ms: int,
        leader_id: int = -1,
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders: answered once the brokers hold the result, or ``timeout_ms`` after
        the request came. ``leader_id``: move the leadership there (``move_leader``) instead
        of to the preferred replica. Not committed by then: ElectionTimedOut (as Kafka's
        controller answers REQUEST_TIMED_OUT at its deadline; the records may still
        commit)."""
        self._require_active()
        deadline = self.scheduler.now_ms() + max(timeout_ms, 1)
        if leader_id >= 0:
            results, changes = self.replication.move_leaders(self.image, partitions, leader_id)
        else:
            results, changes = self.replication.elect_on_request(self.image, election, partitions)
        if changes:
            self._count(changes)
            offset = self._write(list(self.replication.election_records(self.image, changes)))
            if not await self._commit_by(offset, deadline):
                raise ElectionTimedOut(
                    f"the quorum did not commit the election within timeout_ms={timeout_ms}"
                )
            await self._applied_everywhere(offset, deadline - self.scheduler.now_ms())
        return results

    async def _commit_by(self, offset: int, deadline_ms: int) -> bool:
        """Wait until the quorum commits ``offset`` or the clock reaches ``deadline_ms``;
        whether it committed (NotController if the leadership is lost meanwhile)."""
        if offset <= self.raft.high_watermark - 1:
            return True
        loop = asyncio.get_running_loop()
        commit: asyncio.Future[None] = loop.create_future()
        self._commit_waiters.append((offset, commit))
        self._commit_waiters.sort(key=lambda w: w[0])
        expired: asyncio.Future[None] = loop.create_future()

        def expire() -> None:
            if not expired.done():
                expired.set_result(None)

        timer = self.scheduler.call_at(deadline_ms, expire)
        try:
            await asyncio.wait({commit, expired}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not commit.done():
                self._commit_waiters = [w for w in self._commit_waiters if w[1] is not commit]
        if not commit.done():
            return False
        commit.result()  # NotController, if the leadership was lost
        return True

    def reelect(self, preferred: bool = False) -> None:
        """Run the election rules again now (a config they read changed, or a preferred
        leader election is due); committed in the background."""
        if self.epoch is None:
            return
        records = self._with_elections([], preferred=preferred)
        if records:
            self._write(records)

    def _rebalance_leaders(self) -> None:
        if self.config["auto.leader.rebalance.enable"]:
            self.reelect(preferred=True)

    # -- topics -----------------------------------------------------------------------------------

    async def _topic_change(
        self,
        make: Callable[[MetadataImage, Any], tuple[Any, list[MetadataRecord]]],
        request: TopicsRequest,
        timeout_ms: int,
    ) -> Any:
        """A user's topics request: its records committed, then the brokers given a
        moment to apply them. Like Kafka's controller, it refuses one operation of more
        than MAX_RECORDS_PER_USER_OP records whole (POLICY_VIOLATION): one request, a
        Metadata's auto-creation included, cannot flood the metadata log."""
        self._require_active()
        response, records = make(self.image, request)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return every_topic_fails(
                request,
                ErrorCode.POLICY_VIOLATION,
                f"Unable to perform excessively large batch operation: {len(records)} "
                f"metadata records, at most {MAX_RECORDS_PER_USER_OP} per request",
            )
        if records:
            offset = await self._write_and_commit(records)
            await self._applied_everywhere(offset, timeout_ms)
        return response

    async def create_topics(self, request: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
        response: m.CreateTopicsResponse = await self._topic_change(
            self._create_topics, request, request.timeout_ms
        )
        return response

    def _create_topics(
        self, image: MetadataImage, request: m.CreateTopicsRequest
    ) -> tuple[m.CreateTopicsResponse, list[MetadataRecord]]:
        response, records = self.replication.create_topics(image, request)
        for result in response.topics:
            if result.error_code == ErrorCode.NONE and not request.validate_only:
                self.log.info(
                    "topic_created",
                    topic=result.name,
                    partitions=result.num_partitions,
                    replication_factor=result.replication_factor,
                )
        return response, records

    async def create_partitions(
        self, request: m.CreatePartitionsRequest
    ) -> m.CreatePartitionsResponse:
        response: m.CreatePartitionsResponse = await self._topic_change(
            self.replication.create_partitions, request, request.timeout_ms
        )
        return response

    async def delete_topics(self, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
        response: m.DeleteTopicsResponse = await self._topic_change(
            self.replication.delete_topics, request, request.timeout_ms
        )
        for result in response.responses:
            if result.error_code == ErrorCode.NONE:
                self.log.info("topic_deleted", topic=result.name)
        return response

    # -- configs ----------------------------------------------------------------------------------

    async def alter_configs(
        self, request: m.IncrementalAlterConfigsRequest, incremental: bool, timeout_ms: int
    ) -> m.IncrementalAlterConfigsResponse:
        """AlterConfigs (``incremental`` False) or IncrementalAlterConfigs: answered once
        its records are committed and the brokers had ``timeout_ms`` to apply them. A
        change of ``unclean.leader.election.enable`` runs the election rules again."""
        self._require_active()
        response, records = self.configuration.alter(self.image, request, incremental)
        if records:
            for record in records:
                self.log.info(
                    "config_changed",
                    resource_type=record.resource_type,
                    resource=record.resource_name,
                    name=record.name,
                    value=record.value,
                )
            offset = await self._write_and_commit(list(records))
            await self._applied_everywhere(offset, timeout_ms)
            # After the brokers (this node's among them) hold the value the rules read.
            if any(r.name == "unclean.leader.election.enable" for r in records):
                self.reelect()
        return response

    # -- SCRAM credentials ------------------------------------------------------------------------

    async def alter_user_scram_credentials(
        self, request: sm.AlterUserScramCredentialsRequest, timeout_ms: int
    ) -> sm.AlterUserScramCredentialsResponse:
        """AlterUserScramCredentials: answered once its records are committed and the
        brokers had ``timeout_ms`` to apply them."""
        self._require_active()
        response, records = self.scram.alter_credentials(self.image, request)
        if records:
            for record in records:
                self.log.info(
                    "scram_credential_changed",
                    user=record.name,
                    mechanism=MECHANISMS_BY_TYPE[record.mechanism].name,
                    removed=not isinstance(record, UserScramCredentialRecord),
                )
            offset = await self._write_and_commit(list(records))
            await self._applied_everywhere(offset, timeout_ms)
        return response

    # -- ACLs ---------------------------------------------------------------------------------

    async def create_acls(
        self, request: am.CreateAclsRequest, timeout_ms: int
    ) -> am.CreateAclsResponse:
        """CreateAcls: answered once its records are committed and the brokers had
        ``timeout_ms`` to apply them."""
        self._require_active()
        response, records = self.acls.create_acls(self.image, request)
        return await self._acl_change(response, records, timeout_ms)

    async def delete_acls(
        self, request: am.DeleteAclsRequest, timeout_ms: int
    ) -> am.DeleteAclsResponse:
        self._require_active()
        response, records = self.acls.delete_acls(self.image, request)
        return await self._acl_change(response, records, timeout_ms)

    async def _acl_change(self, response: R, records: list[Any], timeout_ms: int) -> R:
        for record in records:
            self.log.info("acl_changed", record=str(record))
        if records:
            offset = await self._write_and_commit(list(records))
            await self._applied_everywhere(offset, timeout_ms)
        return response

    # -- client quotas ------------------------------------------------------------------------

    async def alter_client_quotas(
        self, request: qm.AlterClientQuotasRequest, timeout_ms: int
    ) -> qm.AlterClientQuotasResponse:
        """AlterClientQuotas: answered once its records are committed and the brokers had
        ``timeout_ms`` to apply them."""
        self._require_active()
        response, records = self.client_quotas.alter_client_quotas(self.image, request)
        for record in records:
            self.log.info(
                "client_quota_changed",
                entity=record.entity,
                key=record.key,
                value=None if record.remove else record.value,
            )
        if records:
            offset = await self._write_and_commit(list(records))
            await self._applied_everywhere(offset, timeout_ms)
        return response
