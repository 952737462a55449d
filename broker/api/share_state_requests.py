"""ReadShareGroupState (84) and WriteShareGroupState (85) on our protocol: a share-partition's
leader and its share coordinator (broker/coordinator/share/), served only to an
authenticated broker (INTER_BROKER_APIS). The conversions between the wire's plain
values and the coordinator's types live here, for the sender (the persister) too."""

from __future__ import annotations

from purgatory.broker.api.results import Deferred, Result
from purgatory.broker.coordinator.share.share_coordinator import ShareCoordinator
from purgatory.broker.coordinator.share.share_group_offset import (
    NO_START_OFFSET,
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
)
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode


def read_share_group_state(
    coordinator: ShareCoordinator, request: ib.ReadShareGroupStateRequest
) -> ib.ReadShareGroupStateResponse:
    key = SharePartitionKey(request.group_id, request.topic_id, request.partition)
    error, state = coordinator.read_state(key, request.leader_epoch)
    return read_response(error, state)


def write_share_group_state(
    coordinator: ShareCoordinator, request: ib.WriteShareGroupStateRequest
) -> Result:
    key = SharePartitionKey(request.group_id, request.topic_id, request.partition)
    future = coordinator.write_state(
        key,
        request.state_epoch,
        request.leader_epoch,
        request.start_offset,
        [PersisterStateBatch(*b) for b in request.state_batches],
    )
    return Deferred(future, ib.WriteShareGroupStateResponse)


def read_response(error: int, state: ShareGroupOffset | None) -> ib.ReadShareGroupStateResponse:
    """The wire's answer to a read: start offset -1 when nothing was ever written."""
    if error != ErrorCode.NONE or state is None:
        return ib.ReadShareGroupStateResponse(error)
    return ib.ReadShareGroupStateResponse(
        error,
        state.state_epoch,
        state.leader_epoch,
        state.start_offset,
        [tuple(b) for b in state.state_batches],  # type: ignore[misc]
    )


def state_of(response: ib.ReadShareGroupStateResponse) -> tuple[int, ShareGroupOffset | None]:
    """A read's answer as ``ShareCoordinator.read_state`` gives it (the sender's side)."""
    if response.error_code != ErrorCode.NONE or response.start_offset == NO_START_OFFSET:
        return response.error_code, None
    return response.error_code, ShareGroupOffset(
        response.state_epoch,
        response.leader_epoch,
        response.start_offset,
        [PersisterStateBatch(*b) for b in response.state_batches],
    )


def write_request(
    key: SharePartitionKey,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: list[PersisterStateBatch],
) -> ib.WriteShareGroupStateRequest:
    """A write as the wire carries it (the sender's side)."""
    return ib.WriteShareGroupStateRequest(
        key.group_id,
        key.topic_id,
        key.partition,
        state_epoch,
        leader_epoch,
        start_offset,
        [tuple(b) for b in batches],  # type: ignore[misc]
    )
