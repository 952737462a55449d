"""Request and response bodies of the metadata quorum's APIs (Kafka's KRaft, KIP-595):
Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum and FetchSnapshot. The metadata
log itself is replicated by Fetch (``protocol.messages``), as in Kafka: a fetch of the
topic ``__cluster_metadata`` whose records are quorum entries (``encode_entries``).
"""

from __future__ import annotations

import msgspec

from purgatory.protocol.messages import Message

METADATA_TOPIC = "__cluster_metadata"  # the quorum's log, as a topic name (Kafka's)


class RaftEntry(Message):
    """One entry of the metadata log: its offset, the epoch of the leader that appended
    it, and the record (encoded by the metadata layer: the quorum never looks inside)."""

    offset: int
    epoch: int
    data: bytes


_entries_decoder = msgspec.msgpack.Decoder(list[RaftEntry])
_encoder = msgspec.msgpack.Encoder()


def encode_entries(encoded: list[bytes]) -> bytes:
    """Entries already encoded one by one (as the log keeps them) joined into the bytes of
    one MessagePack array, without encoding any of them again."""
    n = len(encoded)
    if n < 16:
        header = bytes((0x90 | n,))
    elif n < 1 << 16:
        header = b"\xdc" + n.to_bytes(2, "big")
    else:
        header = b"\xdd" + n.to_bytes(4, "big")
    return header + b"".join(encoded)


def encode_entry(entry: RaftEntry) -> bytes:
    return _encoder.encode(entry)


def decode_entries(records: bytes) -> list[RaftEntry]:
    """Raise msgspec.DecodeError (or ValidationError) for bytes that are not entries."""
    if not records:
        return []
    return _entries_decoder.decode(records)


# -- Vote (52) ------------------------------------------------------------------------------


class VoteRequest(Message):
    """A candidate asks a voter for its vote in ``candidate_epoch`` (or, with ``pre_vote``,
    whether it would get it, KIP-996, which changes nothing on the voter)."""

    cluster_id: str
    candidate_id: int
    candidate_epoch: int
    last_offset_epoch: int  # the epoch of the candidate's last entry
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


class VoteResponse(Message):
    error_code: int
    leader_id: int  # the leader the voter knows in its epoch, -1 if none
    leader_epoch: int  # the voter's epoch
    vote_granted: bool


# -- BeginQuorumEpoch (53) / EndQuorumEpoch (54) ---------------------------------------------


class BeginQuorumEpochRequest(Message):
    """A new leader tells a voter it won ``leader_epoch``."""

    cluster_id: str
    leader_id: int
    leader_epoch: int


class BeginQuorumEpochResponse(Message):
    error_code: int
    leader_id: int
    leader_epoch: int


class EndQuorumEpochRequest(Message):
    """A leader that stops (a controlled shutdown) tells the voters, so the next election
    starts at once; ``preferred_successors`` are the voters most caught up first."""

    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: list[int]


class EndQuorumEpochResponse(Message):
    error_code: int
    leader_id: int
    leader_epoch: int


# -- DescribeQuorum (55) ---------------------------------------------------------------------


class DescribeQuorumRequest(Message):
    pass


class QuorumReplicaState(Message):
    replica_id: int
    log_end_offset: int  # -1: not known to the leader yet
    last_fetch_timestamp: int  # wall-clock ms, -1 if never
    last_caught_up_timestamp: int  # wall-clock ms, -1 if never


class DescribeQuorumResponse(Message):
    error_code: int
    error_message: str | None
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: list[QuorumReplicaState]
    observers: list[QuorumReplicaState]


# -- FetchSnapshot (59) ----------------------------------------------------------------------


class FetchSnapshotRequest(Message):
    """A replica whose fetch offset is below the leader's log start asks for the snapshot
    the leader named (its end offset and epoch)."""

    cluster_id: str
    replica_id: int
    leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int


class FetchSnapshotResponse(Message):
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    records: list[bytes]  # the metadata records that rebuild the state at the end offset
