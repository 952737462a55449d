"""ReplicationControlManager: the active controller's rules for topics, partitions, leaders
and ISRs, as records (Kafka's ReplicationControlManager). Each method reads an image and
returns the records that make the change and the answer for the requester; nothing here
writes or waits (the QuorumController does), so the rules read as pure functions of the
metadata.

Leader and ISR changes come from ``election`` (one rule for every event) and ``alter_isr``
(a leader's AlterPartition), CreateTopics and CreatePartitions from ``topics``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from purgatory.broker.config.broker_config import BrokerConfig, validate_topic_configs
from purgatory.broker.controller.election import (
    Election,
    ElectionResult,
    alter_isr,
    change_partition,
    elect_on_request,
    move_leadership,
)
from purgatory.broker.controller.partition_limits import ReplicaCounts, broker_partition_limit
from purgatory.broker.controller.topics import create_topics, grow_topics
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState

PartitionKey = tuple[str, int]


class PartitionElection(NamedTuple):
    """One partition's change and why (for the controller's log and metrics)."""

    topic: str
    before: PartitionState
    result: ElectionResult


def change_record(
    topic_id: str, after: PartitionState, replicas_changed: bool
) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        topic_id,
        after.partition_index,
        after.leader_id,
        after.leader_epoch,
        after.partition_epoch,
        list(after.isr),
        list(after.replicas) if replicas_changed else None,
    )


class ReplicationControlManager:
    def __init__(self, config: BrokerConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng

    # -- elections -----------------------------------------------------------------------------

    def elect(
        self,
        image: MetadataImage,
        lost_data: frozenset[int] = frozenset(),
        preferred: bool = False,
    ) -> list[PartitionElection]:
        """Run the election rules over every partition (``election.change_partition``):
        brokers that are unfenced and not shutting down may lead and stay in ISRs;
        ``lost_data`` restarted without their logs and leave every ISR."""
        eligible = image.eligible_brokers() - lost_data
        shutting_down = frozenset(b for b, r in image.brokers.items() if r.in_controlled_shutdown)
        default_unclean = self.config["unclean.leader.election.enable"]
        out: list[PartitionElection] = []
        for name, topic in image.topics.items():
            unclean = bool(
                validate_topic_configs(topic.configs).get(
                    "unclean.leader.election.enable", default_unclean
                )
            )
            for state in topic.partitions:
                change = change_partition(
                    state, eligible, lost_data, unclean, preferred, shutting_down
                )
                if change is not None:
                    out.append(PartitionElection(name, state, change))
        return out

    @staticmethod
    def election_records(
        image: MetadataImage, elections: Iterable[PartitionElection]
    ) -> Iterator[MetadataRecord]:
        for election in elections:
            topic_id = image.topics[election.topic].topic_id
            yield change_record(
                topic_id,
                election.result.state,
                election.result.state.replicas != election.before.replicas,
            )

    def elect_on_request(
        self,
        image: MetadataImage,
        election: Election,
        partitions: list[PartitionKey] | None,
    ) -> tuple[dict[PartitionKey, tuple[ErrorCode, str | None]], list[PartitionElection]]:
        """ElectLeaders: a preferred or unclean election for each partition asked for, as
        Kafka's ``electLeaders``. Every partition when None, and then, as Kafka, those
        that need no election are left out of the results."""
        every = partitions is None
        if partitions is None:
            partitions = [
                (n, p.partition_index) for n, t in image.topics.items() for p in t.partitions
            ]
        results: dict[PartitionKey, tuple[ErrorCode, str | None]] = {}
        changes: list[PartitionElection] = []
        eligible = image.eligible_brokers()
        for name, index in partitions:
            state = image.partition(name, index)
            if state is None:
                results[(name, index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such partition as {name}-{index}"
                    if name in image.topics
                    else f"No such topic as {name}",
                )
                continue
            outcome = elect_on_request(state, eligible, election)
            if isinstance(outcome, ElectionResult):
                changes.append(PartitionElection(name, state, outcome))
                results[(name, index)] = (ErrorCode.NONE, None)
            elif not (every and outcome[0] == ErrorCode.ELECTION_NOT_NEEDED):
                results[(name, index)] = outcome
        return results, changes

    def move_leaders(
        self, image: MetadataImage, partitions: list[PartitionKey] | None, broker: int
    ) -> tuple[dict[PartitionKey, tuple[ErrorCode, str | None]], list[PartitionElection]]:
        """Make ``broker`` the preferred replica and the leader of each partition
        (``election.move_leadership``)."""
        results: dict[PartitionKey, tuple[ErrorCode, str | None]] = {}
        changes: list[PartitionElection] = []
        eligible = image.eligible_brokers()
        for name, index in partitions or []:
            state = image.partition(name, index)
            if state is None:
                results[(name, index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"no partition {name}-{index}",
                )
                continue
            outcome = move_leadership(state, broker, eligible)
            if isinstance(outcome, ElectionResult):
                changes.append(PartitionElection(name, state, outcome))
                results[(name, index)] = (ErrorCode.NONE, None)
            else:
                results[(name, index)] = outcome
        return results, changes

    # -- ISR changes --------------------------------------------------------------------------

    def alter_partition(
        self, image: MetadataImage, request: ib.AlterPartitionRequest
    ) -> tuple[ib.AlterPartitionResponse, list[MetadataRecord]]:
        """A leader's ISR changes, each checked by ``election.alter_isr`` and, for the
        replicas it adds, against their current registration (KIP-903: the fetches that
        made a replica eligible must come from its current run, not from one that has
        restarted since with nothing in memory)."""
        sender = image.brokers.get(request.broker_id)
        if sender is None or (
            request.broker_epoch >= 0 and sender.broker_epoch != request.broker_epoch
        ):
            return ib.AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH, []), []
        eligible = image.eligible_brokers()
        topics: list[ib.AlterPartitionTopicResponse] = []
        records: list[MetadataRecord] = []
        for topic_change in request.topics:
            topic = image.topics.get(topic_change.name)
            results = []
            for change in topic_change.partitions:
                index = change.partition_index
                if topic is None or not 0 <= index < len(topic.partitions):
                    results.append(
                        ib.AlterPartitionPartitionResponse(
                            index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        )
                    )
                    continue
                epochs = dict(zip(change.new_isr, change.broker_epochs or [], strict=False))
                stale = [
                    r
                    for r, epoch in epochs.items()
                    if epoch >= 0
                    and (r not in image.brokers or image.brokers[r].broker_epoch != epoch)
                ]
                if stale:
                    results.append(
                        ib.AlterPartitionPartitionResponse(index, ErrorCode.INELIGIBLE_REPLICA)
                    )
                    continue
                before = topic.partitions[index]
                updated = alter_isr(
                    before,
                    request.broker_id,
                    change.leader_epoch,
                    change.partition_epoch,
                    change.new_isr,
                    eligible,
                )
                if isinstance(updated, ErrorCode):
                    results.append(ib.AlterPartitionPartitionResponse(index, updated))
                    continue
                records.append(change_record(topic.topic_id, updated, False))
                results.append(
                    ib.AlterPartitionPartitionResponse(
                        index,
                        ErrorCode.NONE,
                        updated.leader_id,
                        updated.leader_epoch,
                        updated.isr,
                        updated.partition_epoch,
                    )
                )
            topics.append(ib.AlterPartitionTopicResponse(topic_change.name, results))
        return ib.AlterPartitionResponse(ErrorCode.NONE, topics), records

    # -- topics ---------------------------------------------------------------------------------

    def placement_brokers(self, image: MetadataImage) -> list[int]:
        """Where new replicas may go: unfenced brokers not shutting down (Kafka's usable
        brokers)."""
        return sorted(image.eligible_brokers())

    def create_topics(
        self, image: MetadataImage, request: m.CreateTopicsRequest
    ) -> tuple[m.CreateTopicsResponse, list[MetadataRecord]]:
        brokers = self.placement_brokers(image)
        start = len(image.topics)  # each new topic starts one broker further
        replicas = ReplicaCounts(image.topics.values(), broker_partition_limit(self.config))
        results, created = create_topics(
            request, image.topics, self.config, brokers, start, self._topic_id, replicas
        )
        records: list[MetadataRecord] = []
        for topic in created.values():
            records.append(TopicRecord(topic.name, topic.topic_id))
            records.extend(
                ConfigRecord(TOPIC_RESOURCE, topic.name, k, v) for k, v in topic.configs.items()
            )
            records.extend(self._new_partitions(image, topic, 0))
        return m.CreateTopicsResponse(results), records

    def create_partitions(
        self, image: MetadataImage, request: m.CreatePartitionsRequest
    ) -> tuple[m.CreatePartitionsResponse, list[MetadataRecord]]:
        replicas = ReplicaCounts(image.topics.values(), broker_partition_limit(self.config))
        results, grown = grow_topics(request, image.topics, self.placement_brokers(image), replicas)
        records: list[MetadataRecord] = []
        for name, topic in grown.items():
            records.extend(self._new_partitions(image, topic, len(image.topics[name].partitions)))
        return m.CreatePartitionsResponse(results), records

    def _new_partitions(
        self, image: MetadataImage, topic: TopicState, first: int
    ) -> Iterator[PartitionRecord]:
        """Partitions ``first``.. of a new or grown topic: the ISR is its eligible
        replicas, the leader the first of them (Kafka's new partition)."""
        eligible = image.eligible_brokers()
        for state in topic.partitions[first:]:
            isr = [r for r in state.replicas if r in eligible]
            yield PartitionRecord(
                topic.topic_id,
                state.partition_index,
                list(state.replicas),
                isr,
                isr[0] if isr else -1,
            )

    def delete_topics(
        self, image: MetadataImage, request: m.DeleteTopicsRequest
    ) -> tuple[m.DeleteTopicsResponse, list[MetadataRecord]]:
        results: list[m.DeletableTopicResult] = []
        records: list[MetadataRecord] = []
        for name in request.topic_names:
            topic = image.topics.get(name)
            if topic is None or any(
                isinstance(r, RemoveTopicRecord) and r.topic_id == topic.topic_id for r in records
            ):
                results.append(
                    m.DeletableTopicResult(
                        name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                    )
                )
                continue
            records.append(RemoveTopicRecord(topic.topic_id))
            results.append(m.DeletableTopicResult(name, ErrorCode.NONE))
        return m.DeleteTopicsResponse(results), records

    def _topic_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"
