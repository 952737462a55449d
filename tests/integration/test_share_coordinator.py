"""The share coordinator over the wire between brokers (KIP-932's ReadShareGroupState and
WriteShareGroupState on our protocol): a state written through one broker's handler,
sent by another broker, reads back from the state partition's next leader after its
leadership moves; the old leader answers NOT_COORDINATOR, and the fence of the data
partition's leader epoch survives the move."""

from __future__ import annotations

from typing import Any

from purgatory.broker.api.share_state_requests import state_of, write_request
from purgatory.broker.controller.internal_topics import SHARE_GROUP_STATE_TOPIC
from purgatory.broker.coordinator.share.share_group_offset import (
    ACKNOWLEDGED,
    AVAILABLE,
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)
from purgatory.broker.server import Broker
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode as E
from tests.support import running_cluster, wait_until

KEY = SharePartitionKey("share-g", "00112233445566778899aabbccddeeff", 2)
BATCHES = [PersisterStateBatch(5, 9, ACKNOWLEDGED, 1), PersisterStateBatch(10, 10, AVAILABLE, 3)]
RETRIABLE = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)


def state_leader(brokers: list[Broker], index: int) -> int:
    return brokers[0].metadata.topics[SHARE_GROUP_STATE_TOPIC].partitions[index].leader_id


async def until_answered(sender: Broker, node: int, key: ApiKey, request: Any) -> Any:
    """Send until the coordinator answers other than 'not yet' (loading, or its
    leadership still landing on it)."""
    answers: list[Any] = []

    async def answered() -> bool:
        answers.append(await sender.marker_channels.send(node, key, request, 5000))
        return answers[-1].error_code not in RETRIABLE

    await wait_until(answered, message=f"{key.api_name} answered by broker {node}")
    return answers[-1]


async def test_a_state_written_over_the_wire_reads_back_after_the_state_leader_moves() -> None:
    async with running_cluster(3, **{"share.coordinator.state.topic.num.partitions": 3}) as brokers:
        coordinators = brokers[0].share_coordinator
        index = coordinators.partition_for(KEY)
        found: list[tuple[int, int]] = []

        def coordinator_known() -> bool:
            found.append(coordinators.find_coordinator(KEY))  # creates the topic
            return found[-1][0] == E.NONE

        await wait_until(coordinator_known, message="the state partition's leader")
        old_leader = found[-1][1]
        assert old_leader == state_leader(brokers, index)
        topic = brokers[0].metadata.topics[SHARE_GROUP_STATE_TOPIC]
        assert len(topic.partitions) == 3 and len(topic.partitions[index].replicas) == 3
        sender = next(b for b in brokers if b.broker_id != old_leader)

        written = await until_answered(
            sender,
            old_leader,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            write_request(KEY, 0, 4, 5, BATCHES),
        )
        assert written == ib.WriteShareGroupStateResponse(E.NONE)

        # The state partition's leadership moves to another in-sync replica.
        new_leader = next(b.broker_id for b in brokers if b.broker_id not in (old_leader,))
        await wait_until(
            lambda: (
                set(brokers[0].metadata.topics[SHARE_GROUP_STATE_TOPIC].partitions[index].isr)
                == {0, 1, 2}
            ),
            message="every replica in sync",
        )
        error, _ = await brokers[0].forwarding.move_leader(
            SHARE_GROUP_STATE_TOPIC, index, new_leader, 10_000
        )
        assert error == E.NONE
        await wait_until(lambda: all(state_leader([b], index) == new_leader for b in brokers))

        read = ib.ReadShareGroupStateRequest(KEY.group_id, KEY.topic_id, KEY.partition, 4)
        answer = await until_answered(sender, new_leader, ApiKey.READ_SHARE_GROUP_STATE, read)
        assert state_of(answer) == (E.NONE, ShareGroupOffset(0, 4, 5, BATCHES))
        stale = await sender.marker_channels.send(
            old_leader, ApiKey.READ_SHARE_GROUP_STATE, read, 5000
        )
        assert stale.error_code == E.NOT_COORDINATOR

        # The leader epoch written is the fence on the new coordinator too.
        older = write_request(KEY, 0, 3, 99, [])
        fenced = await sender.marker_channels.send(
            new_leader, ApiKey.WRITE_SHARE_GROUP_STATE, older, 5000
        )
        assert fenced.error_code == E.FENCED_LEADER_EPOCH
        again = await sender.marker_channels.send(
            new_leader, ApiKey.READ_SHARE_GROUP_STATE, read, 5000
        )
        assert state_of(again) == (E.NONE, ShareGroupOffset(0, 4, 5, BATCHES))
