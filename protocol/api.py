"""API keys (Kafka's numbers), their versions, and the request/response frame envelopes.

A request frame body is ``[api_key, api_version, correlation_id, client_id, body]``; a
response frame body is ``[correlation_id, error_code, error_message, body]`` where a
non-zero ``error_code`` is a request-level error (unsupported version, undecodable body)
and ``body`` is then nil. Per-partition errors live inside the bodies.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import Raw, Struct

from purgatory.protocol import acl_messages as am
from purgatory.protocol import group_messages as g
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol import messages as m
from purgatory.protocol import quota_messages as qm
from purgatory.protocol import raft_messages as rm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import DECODE_ERRORS, ErrorCode
from purgatory.protocol.framing import LENGTH_PREFIX as _LENGTH


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85

    @property
    def api_name(self) -> str:
        """Kafka's CamelCase name (Produce, Fetch, ...), used in metrics and docs."""
        return _NAMES[self]


_NAMES = {
    ApiKey.PRODUCE: "Produce",
    ApiKey.FETCH: "Fetch",
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.METADATA: "Metadata",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.DELETE_RECORDS: "DeleteRecords",
    ApiKey.ALTER_PARTITION: "AlterPartition",
    ApiKey.ENVELOPE: "Envelope",
    ApiKey.FETCH_SNAPSHOT: "FetchSnapshot",
    ApiKey.BROKER_REGISTRATION: "BrokerRegistration",
    ApiKey.BROKER_HEARTBEAT: "BrokerHeartbeat",
    ApiKey.VOTE: "Vote",
    ApiKey.BEGIN_QUORUM_EPOCH: "BeginQuorumEpoch",
    ApiKey.END_QUORUM_EPOCH: "EndQuorumEpoch",
    ApiKey.DESCRIBE_QUORUM: "DescribeQuorum",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    ApiKey.CONTROLLED_SHUTDOWN: "ControlledShutdown",
    ApiKey.ELECT_LEADERS: "ElectLeaders",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.INIT_PRODUCER_ID: "InitProducerId",
    ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    ApiKey.LIST_TRANSACTIONS: "ListTransactions",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs",
    ApiKey.ALTER_CONFIGS: "AlterConfigs",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.CREATE_PARTITIONS: "CreatePartitions",
    ApiKey.SASL_HANDSHAKE: "SaslHandshake",
    ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
    ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: "DescribeTopicPartitions",
    ApiKey.SHARE_FETCH: "ShareFetch",
    ApiKey.SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    ApiKey.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    ApiKey.READ_SHARE_GROUP_STATE: "ReadShareGroupState",
    ApiKey.WRITE_SHARE_GROUP_STATE: "WriteShareGroupState",
    ApiKey.DESCRIBE_ACLS: "DescribeAcls",
    ApiKey.CREATE_ACLS: "CreateAcls",
    ApiKey.DELETE_ACLS: "DeleteAcls",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas",
    ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
}

# Kafka's inter-broker and controller APIs: served (as Fetch from a follower, replica id
# >= 0) only on connections that proved they are a broker of this cluster
# (clients/cluster_auth.py); anyone else gets CLUSTER_AUTHORIZATION_FAILED.
INTER_BROKER_APIS = frozenset(
    {
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.ALTER_PARTITION,
        ApiKey.ENVELOPE,
        ApiKey.FETCH_SNAPSHOT,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE,
    }
)

# (api_key, version) -> (request type, response type)
SCHEMAS: dict[tuple[ApiKey, int], tuple[type[Struct], type[Struct]]] = {
    (ApiKey.PRODUCE, 0): (m.ProduceRequest, m.ProduceResponse),
    (ApiKey.FETCH, 0): (m.FetchRequest, m.FetchResponseV0),
    (ApiKey.FETCH, 1): (m.FetchRequest, m.FetchResponseV1),
    (ApiKey.FETCH, 2): (m.FetchRequestV2, m.FetchResponseV2),
    (ApiKey.LIST_OFFSETS, 0): (m.ListOffsetsRequest, m.ListOffsetsResponse),
    (ApiKey.METADATA, 0): (m.MetadataRequest, m.MetadataResponse),
    (ApiKey.OFFSET_COMMIT, 0): (m.OffsetCommitRequest, m.OffsetCommitResponse),
    (ApiKey.OFFSET_COMMIT, 1): (g.OffsetCommitRequestV1, m.OffsetCommitResponse),
    (ApiKey.OFFSET_FETCH, 0): (m.OffsetFetchRequest, m.OffsetFetchResponse),
    (ApiKey.OFFSET_FETCH, 1): (g.OffsetFetchRequestV1, g.OffsetFetchResponseV1),
    (ApiKey.FIND_COORDINATOR, 0): (g.FindCoordinatorRequest, g.FindCoordinatorResponse),
    (ApiKey.JOIN_GROUP, 0): (g.JoinGroupRequest, g.JoinGroupResponse),
    (ApiKey.SYNC_GROUP, 0): (g.SyncGroupRequest, g.SyncGroupResponse),
    (ApiKey.HEARTBEAT, 0): (g.HeartbeatRequest, g.HeartbeatResponse),
    (ApiKey.LEAVE_GROUP, 0): (g.LeaveGroupRequest, g.LeaveGroupResponse),
    (ApiKey.DESCRIBE_GROUPS, 0): (g.DescribeGroupsRequest, g.DescribeGroupsResponse),
    (ApiKey.LIST_GROUPS, 0): (g.ListGroupsRequest, g.ListGroupsResponse),
    (ApiKey.DELETE_GROUPS, 0): (g.DeleteGroupsRequest, g.DeleteGroupsResponse),
    (ApiKey.OFFSET_DELETE, 0): (g.OffsetDeleteRequest, g.OffsetDeleteResponse),
    (ApiKey.API_VERSIONS, 0): (m.ApiVersionsRequest, m.ApiVersionsResponse),
    (ApiKey.CREATE_TOPICS, 0): (m.CreateTopicsRequest, m.CreateTopicsResponse),
    (ApiKey.DELETE_TOPICS, 0): (m.DeleteTopicsRequest, m.DeleteTopicsResponse),
    (ApiKey.DELETE_RECORDS, 0): (m.DeleteRecordsRequest, m.DeleteRecordsResponse),
    (ApiKey.CREATE_PARTITIONS, 0): (m.CreatePartitionsRequest, m.CreatePartitionsResponse),
    (ApiKey.INIT_PRODUCER_ID, 0): (m.InitProducerIdRequest, m.InitProducerIdResponse),
    (ApiKey.BROKER_REGISTRATION, 0): (ib.BrokerRegistrationRequest, ib.BrokerRegistrationResponse),
    (ApiKey.BROKER_HEARTBEAT, 0): (ib.BrokerHeartbeatRequest, ib.BrokerHeartbeatResponse),
    (ApiKey.ENVELOPE, 0): (ib.EnvelopeRequest, ib.EnvelopeResponse),
    (ApiKey.WRITE_TXN_MARKERS, 0): (ib.WriteTxnMarkersRequest, ib.WriteTxnMarkersResponse),
    (ApiKey.READ_SHARE_GROUP_STATE, 0): (
        ib.ReadShareGroupStateRequest,
        ib.ReadShareGroupStateResponse,
    ),
    (ApiKey.WRITE_SHARE_GROUP_STATE, 0): (
        ib.WriteShareGroupStateRequest,
        ib.WriteShareGroupStateResponse,
    ),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0): (
        m.OffsetForLeaderEpochRequest,
        m.OffsetForLeaderEpochResponse,
    ),
    (ApiKey.ALTER_PARTITION, 0): (ib.AlterPartitionRequest, ib.AlterPartitionResponse),
    (ApiKey.FETCH_SNAPSHOT, 0): (rm.FetchSnapshotRequest, rm.FetchSnapshotResponse),
    (ApiKey.VOTE, 0): (rm.VoteRequest, rm.VoteResponse),
    (ApiKey.BEGIN_QUORUM_EPOCH, 0): (rm.BeginQuorumEpochRequest, rm.BeginQuorumEpochResponse),
    (ApiKey.END_QUORUM_EPOCH, 0): (rm.EndQuorumEpochRequest, rm.EndQuorumEpochResponse),
    (ApiKey.DESCRIBE_QUORUM, 0): (rm.DescribeQuorumRequest, rm.DescribeQuorumResponse),
    (ApiKey.CONTROLLED_SHUTDOWN, 0): (ib.ControlledShutdownRequest, ib.ControlledShutdownResponse),
    (ApiKey.ELECT_LEADERS, 0): (m.ElectLeadersRequest, m.ElectLeadersResponse),
    (ApiKey.ALTER_CONFIGS, 0): (
        m.IncrementalAlterConfigsRequest,
        m.IncrementalAlterConfigsResponse,
    ),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0): (
        m.IncrementalAlterConfigsRequest,
        m.IncrementalAlterConfigsResponse,
    ),
    (ApiKey.SASL_AUTHENTICATE, 0): (ib.SaslAuthenticateRequest, ib.SaslAuthenticateResponse),
    (ApiKey.DESCRIBE_ACLS, 0): (am.DescribeAclsRequest, am.DescribeAclsResponse),
    (ApiKey.CREATE_ACLS, 0): (am.CreateAclsRequest, am.CreateAclsResponse),
    (ApiKey.DELETE_ACLS, 0): (am.DeleteAclsRequest, am.DeleteAclsResponse),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0): (
        qm.DescribeClientQuotasRequest,
        qm.DescribeClientQuotasResponse,
    ),
    (ApiKey.ALTER_CLIENT_QUOTAS, 0): (qm.AlterClientQuotasRequest, qm.AlterClientQuotasResponse),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0): (
        sm.DescribeUserScramCredentialsRequest,
        sm.DescribeUserScramCredentialsResponse,
    ),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0): (
        sm.AlterUserScramCredentialsRequest,
        sm.AlterUserScramCredentialsResponse,
    ),
}


def supported_versions() -> list[m.ApiVersionRange]:
    ranges: dict[ApiKey, list[int]] = {}
    for key, version in SCHEMAS:
        ranges.setdefault(key, []).append(version)
    return [m.ApiVersionRange(int(k), min(v), max(v)) for k, v in sorted(ranges.items())]


def latest_version(key: ApiKey) -> int:
    return max(v for k, v in SCHEMAS if k == key)


class RequestHeader(m.Message):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Raw


class ResponseHeader(m.Message):
    correlation_id: int
    error_code: int
    error_message: str | None
    body: Raw


class RequestError(Exception):
    """A request whose header was read but which cannot be served as sent.

    ``RequestDecoder`` fills in the header fields it read; handlers leave them unset."""

    def __init__(self, code: ErrorCode, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.header = header


_header_decoder = msgspec.msgpack.Decoder(RequestHeader)
_response_header_decoder = msgspec.msgpack.Decoder(ResponseHeader)
_body_decoders: dict[tuple[int, int], msgspec.msgpack.Decoder[Any]] = {
    (int(k), v): msgspec.msgpack.Decoder(req) for (k, v), (req, _) in SCHEMAS.items()
}
_response_decoders: dict[tuple[int, int], msgspec.msgpack.Decoder[Any]] = {
    (int(k), v): msgspec.msgpack.Decoder(resp) for (k, v), (_, resp) in SCHEMAS.items()
}
_encoder = msgspec.msgpack.Encoder()


class RequestFrame(Struct, array_like=True, gc=False):
    """A whole request frame body, header and body. A listener subclasses it to keep what
    it needs per request beside them (fields with defaults, after these five)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


R = TypeVar("R", bound=RequestFrame)


class RequestDecoder(Generic[R]):
    """Decodes request frames into ``request_type``, a RequestFrame subclass: one msgspec
    decode of the whole frame (into a subclass whose ``body`` is the API version's
    schema), chosen by peeking at the API key and version, instead of a header and then
    a body; the two steps run only for frames of another shape or that do not decode, to
    say precisely what is wrong."""

    def __init__(self, request_type: type[R]) -> None:
        self.request_type = request_type
        # Keyed by a frame's first three bytes in the usual shape: a 5-element array
        # (0x95) whose API key and version are positive fixints. (Only five elements: the
        # subclass's own fields are never a client's to set.)
        self._decoders: dict[bytes, msgspec.msgpack.Decoder[R]] = {
            bytes((0x95, k, v)): msgspec.msgpack.Decoder(
                msgspec.defstruct(f"{req.__name__}Frame", [("body", req)], bases=(request_type,))
            )
            for (k, v), (req, _) in SCHEMAS.items()
            if k < 0x80 and v < 0x80
        }

    def decode(self, frame: bytes) -> R:
        """Raise msgspec.DecodeError when not even the header can be read (the connection
        must be closed), RequestError (with ``header`` set) when the header was read but
        the request cannot be served as sent."""
        decoder = self._decoders.get(frame[:3])
        if decoder is not None:
            try:
                return decoder.decode(frame)
            except DECODE_ERRORS:
                pass  # the two steps below say precisely what is wrong
        header = decode_request_header(frame)
        try:
            body = decode_request_body(header)
        except RequestError as exc:
            exc.header = header
            raise
        return self.request_type(
            header.api_key, header.api_version, header.correlation_id, header.client_id, body
        )


def decode_request_header(frame: bytes) -> RequestHeader:
    """Raise msgspec.DecodeError when not even the header can be read."""
    try:
        return _header_decoder.decode(frame)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"request header has a string that is not UTF-8: {exc}") from None
    except RecursionError:
        raise msgspec.DecodeError("request nested deeper than a request can be") from None


def decode_request_body(header: RequestHeader) -> Any:
    """Decode the body for the header's API and version, or raise RequestError."""
    decoder = _body_decoders.get((header.api_key, header.api_version))
    if decoder is None:
        versions = sorted(v for k, v in SCHEMAS if k == header.api_key)
        if not versions:
            raise RequestError(ErrorCode.INVALID_REQUEST, f"unknown api_key {header.api_key}")
        key = ApiKey(header.api_key)
        raise RequestError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"{key.api_name} version {header.api_version} is not supported "
            f"(supported: {versions[0]}..{versions[-1]})",
        )
    try:
        return decoder.decode(header.body)
    except DECODE_ERRORS as exc:
        raise RequestError(ErrorCode.INVALID_REQUEST, f"malformed request body: {exc}") from None


def encode_request(
    key: ApiKey, version: int, correlation_id: int, client_id: str | None, body: Struct
) -> bytes:
    return _encoder.encode((int(key), version, correlation_id, client_id, body))


def encode_response_into(
    buffer: bytearray,
    correlation_id: int,
    body: Struct | None,
    error_code: int = 0,
    error_message: str | None = None,
) -> None:
    """Append one complete response frame (length prefix included) to ``buffer``."""
    start = len(buffer)
    _encoder.encode_into((correlation_id, error_code, error_message, body), buffer, start + 4)
    _LENGTH.pack_into(buffer, start, len(buffer) - start - 4)


def encode_request_into(
    buffer: bytearray,
    key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    body: Struct | Raw,
) -> None:
    """Append one complete request frame (length prefix included) to ``buffer``."""
    start = len(buffer)
    _encoder.encode_into((key, version, correlation_id, client_id, body), buffer, start + 4)
    _LENGTH.pack_into(buffer, start, len(buffer) - start - 4)


def decode_response_header(frame: bytes) -> ResponseHeader:
    """Raise msgspec.DecodeError for a frame that is not a response header."""
    try:
        return _response_header_decoder.decode(frame)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(
            f"response header has a string that is not UTF-8: {exc}"
        ) from None


def decode_response_body(key: int, version: int, body: Raw) -> Any:
    """Raise msgspec.DecodeError for a body that does not match the API version's schema."""
    try:
        return _response_decoders[(key, version)].decode(body)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"response body has a string that is not UTF-8: {exc}") from None
