"""The ``/v1/state`` document of a broker's admin API, typed: the broker builds it from
these structs, and `purgatory.testing.Cluster.state()` decodes it into them (unknown
fields refused, so the two cannot drift apart unnoticed)."""

from __future__ import annotations

from typing import Any

import msgspec


class ReplicaInfo(msgspec.Struct, forbid_unknown_fields=True):
    """One partition replica on this broker."""

    topic: str
    partition: int
    topic_id: str
    role: str  # "leader" or "follower"
    leader: int  # -1: none
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]  # in replica order
    log_start_offset: int
    local_log_start_offset: int
    high_watermark: int
    log_end_offset: int
    # The leader's view of every replica's log end offset (its own included), by broker
    # id as a string (JSON object keys); empty on a follower.
    replica_log_end_offsets: dict[str, int]
    size_bytes: int
    batches: int
    segments: int
    remote_segments: int
    remote_size_bytes: int
    remote_log_end_offset: int
    log_config: dict[str, Any]
    min_insync_replicas: int


class MemberInfo(msgspec.Struct, forbid_unknown_fields=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int


class GroupInfo(msgspec.Struct, forbid_unknown_fields=True):
    """A consumer group this broker coordinates."""

    group_id: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    generation_id: int
    protocol_type: str
    protocol: str
    leader: str  # the leader's member id, "" without one
    members: list[MemberInfo]
    offsets: int  # committed offsets held


class ClientSoftware(msgspec.Struct, forbid_unknown_fields=True):
    """Open Kafka-protocol connections of one client library version (KIP-511)."""

    client_software_name: str
    client_software_version: str
    connections: int


class BrokerState(msgspec.Struct, forbid_unknown_fields=True):
    broker_id: int
    controller_id: int
    is_controller: bool
    metadata_epoch: int
    members: dict[str, str]  # broker id -> host:port, the static membership
    live_brokers: list[int]
    groups: list[GroupInfo]
    partitions: list[ReplicaInfo]  # sorted by topic, partition
    connections: int
    clients: list[ClientSoftware]
    config_changes: list[dict[str, Any]]  # {name, old, new, at}, the latest 100
    faults: list[dict[str, Any]]  # each active fault's spec with applied and created_ms

    def replica(self, topic: str, partition: int = 0) -> ReplicaInfo | None:
        """This broker's replica of ``topic``-``partition``, if it has one."""
        for replica in self.partitions:
            if replica.topic == topic and replica.partition == partition:
                return replica
        return None


def decode_state(body: bytes) -> BrokerState:
    return msgspec.json.decode(body, type=BrokerState)
