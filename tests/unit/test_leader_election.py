"""The controller's answer to ElectLeaders (Kafka's ReplicationControlManager.electLeaders)
on metadata images: which partitions get a new leader, the PartitionChangeRecords written,
the results and messages Kafka answers, REQUEST_TIMED_OUT when the quorum does not commit
by the request's timeout (on a manual clock), and no decision from a controller that does
not lead the quorum."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.controller.controller_apis import elect_leaders
from purgatory.broker.controller.election import Election
from purgatory.broker.controller.quorum_controller import NotController, QuorumController
from purgatory.broker.controller.replication_control import ReplicationControlManager
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from purgatory.broker.purgatory.clock import ManualScheduler
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode


def replay(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.offset + 1):
        delta.replay(record, offset)
    return delta.apply()


def cluster() -> MetadataImage:
    """Brokers 0 and 1 live, 2 fenced. ``moved``: led by 1, its preferred replica 0 in
    sync; ``home``: led by its preferred replica; ``offline``: no leader, its ISR (2)
    fenced, 1 a live replica out of sync; ``away``: led by 1, its preferred replica 2
    fenced."""
    records: list[MetadataRecord] = []
    for broker in range(3):
        records.append(RegisterBrokerRecord(broker, f"run-{broker}", broker, "h", 9092 + broker))
        records.append(BrokerRegistrationChangeRecord(broker, broker, fenced=broker == 2))
    for i, (name, replicas, isr, leader) in enumerate(
        [
            ("moved", [0, 1, 2], [0, 1], 1),
            ("home", [0, 1], [0, 1], 0),
            ("offline", [2, 1], [2], -1),
            ("away", [2, 1], [1], 1),
        ]
    ):
        records.append(TopicRecord(name, f"id-{i}"))
        records.append(PartitionRecord(f"id-{i}", 0, replicas, isr, leader, leader_epoch=3))
    return replay(MetadataImage(), records)


def control() -> ReplicationControlManager:
    return ReplicationControlManager(load_config(environ={}), random.Random(0))


def test_a_preferred_election_of_every_partition_moves_those_it_can_and_writes_it() -> None:
    image = cluster()
    results, changes = control().elect_on_request(image, Election.PREFERRED, None)
    # As Kafka: partitions needing no election are left out of an all-partitions answer.
    assert results == {
        ("moved", 0): (ErrorCode.NONE, None),
        ("offline", 0): (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "The preferred leader was not available.",
        ),
        ("away", 0): (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "The preferred leader was not available.",
        ),
    }
    [record] = control().election_records(image, changes)
    assert isinstance(record, PartitionChangeRecord)
    assert (record.topic_id, record.leader, record.leader_epoch, record.isr) == (
        "id-0",
        0,
        4,
        [0, 1],
    )
    after = replay(image, [record])
    moved = after.partition("moved", 0)
    assert moved is not None and (moved.leader_id, moved.leader_epoch) == (0, 4)


def test_a_named_partition_whose_preferred_replica_leads_needs_no_election() -> None:
    results, changes = control().elect_on_request(cluster(), Election.PREFERRED, [("home", 0)])
    assert results == {
        ("home", 0): (
            ErrorCode.ELECTION_NOT_NEEDED,
            "Leader election not needed for topic partition.",
        )
    }
    assert changes == []


def test_an_unclean_election_leads_an_offline_partition_with_a_live_out_of_sync_one() -> None:
    image = cluster()
    asked = [("offline", 0), ("moved", 0)]
    results, changes = control().elect_on_request(image, Election.UNCLEAN, asked)
    assert results == {
        ("offline", 0): (ErrorCode.NONE, None),
        ("moved", 0): (
            ErrorCode.ELECTION_NOT_NEEDED,
            "Leader election not needed for topic partition.",
        ),
    }
    after = replay(image, list(control().election_records(image, changes)))
    offline = after.partition("offline", 0)
    # The ISR becomes the new leader alone: what only broker 2 held is lost.
    assert offline is not None and (offline.leader_id, offline.isr) == (1, [1])
    assert offline.leader_epoch == 4


def test_an_unclean_election_with_no_live_replica_is_eligible_leaders_not_available() -> None:
    image = replay(cluster(), [BrokerRegistrationChangeRecord(1, 1, fenced=True)])
    results, changes = control().elect_on_request(image, Election.UNCLEAN, [("offline", 0)])
    assert results == {
        ("offline", 0): (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            "Eligible topic partition leaders are not available.",
        )
    }
    assert changes == []


def test_unknown_topics_and_partitions_are_answered_in_kafka_s_words() -> None:
    results, _ = control().elect_on_request(
        cluster(), Election.PREFERRED, [("nope", 0), ("moved", 9)]
    )
    assert results == {
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
        ("moved", 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as moved-9"),
    }


async def test_a_controller_that_does_not_lead_the_quorum_decides_nothing() -> None:
    """Standby (or deposed): ElectLeaders is NOT_CONTROLLER, and nothing is written."""
    controller = QuorumController(
        0, load_config(environ={}), raft=None, scheduler=ManualScheduler(), members=[0]
    )  # type: ignore[arg-type]
    controller.image = cluster()
    request = m.ElectLeadersRequest(m.PREFERRED_ELECTION, [m.TopicPartitions("moved", [0])], 1000)
    with pytest.raises(NotController):
        await elect_leaders(controller, request)


class FakeLog:
    end_offset = 0


class FakeRaft:
    """A quorum that commits only when the test says so; every broker applies at once."""

    def __init__(self) -> None:
        self.log = FakeLog()
        self.high_watermark = 0
        self.on_fetch: Any = None
        self.appended: list[bytes] = []

    def append(self, epoch: int, records: list[bytes]) -> int:
        self.appended.extend(records)
        self.log.end_offset += len(records)
        return self.log.end_offset - 1

    def replica_applied_offsets(self) -> dict[int, int]:
        return dict.fromkeys(range(3), self.log.end_offset + 1)


def active_controller() -> tuple[QuorumController, FakeRaft, ManualScheduler]:
    raft, scheduler = FakeRaft(), ManualScheduler()
    controller = QuorumController(0, load_config(environ={}), raft, scheduler, members=[0, 1, 2])  # type: ignore[arg-type]
    controller.activate(1, cluster(), None)
    return controller, raft, scheduler


def moved_back(timeout_ms: int) -> m.ElectLeadersRequest:
    return m.ElectLeadersRequest(
        m.PREFERRED_ELECTION, [m.TopicPartitions("moved", [0])], timeout_ms
    )


async def written(raft: FakeRaft) -> None:
    """Let the request run until it has appended its record (no clock moves)."""
    while not raft.appended:
        await asyncio.sleep(0)


async def test_an_election_the_quorum_commits_in_time_is_answered_with_its_results() -> None:
    controller, raft, scheduler = active_controller()
    answer = asyncio.ensure_future(elect_leaders(controller, moved_back(500)))
    await written(raft)
    scheduler.advance(499)
    raft.high_watermark = raft.log.end_offset  # the quorum commits what was appended
    controller.committed(raft.log.end_offset - 1)
    response = await answer
    assert response.error_code == ErrorCode.NONE
    assert response.replica_election_results == [
        m.ReplicaElectionResult("moved", [m.PartitionResult(0, ErrorCode.NONE, None)])
    ]


async def test_an_election_not_committed_by_its_timeout_is_request_timed_out() -> None:
    """As Kafka's controller at its deadline: the error at the top and in every partition
    named. The record stays written (the quorum may still commit it)."""
    controller, raft, scheduler = active_controller()
    answer = asyncio.ensure_future(elect_leaders(controller, moved_back(500)))
    await written(raft)
    scheduler.advance(499)
    await asyncio.sleep(0)
    assert not answer.done()
    scheduler.advance(1)
    response = await answer
    assert response.error_code == ErrorCode.REQUEST_TIMED_OUT
    [[partition]] = [r.partition_result for r in response.replica_election_results]
    assert (partition.partition_id, partition.error_code) == (0, ErrorCode.REQUEST_TIMED_OUT)
    assert len(raft.appended) == 1


async def test_an_election_whose_controller_loses_the_quorum_before_the_commit_fails() -> None:
    controller, raft, _ = active_controller()
    answer = asyncio.ensure_future(elect_leaders(controller, moved_back(500)))
    await written(raft)
    controller.deactivate()
    with pytest.raises(NotController):
        await answer
