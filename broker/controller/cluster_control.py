"""ClusterControlManager and BrokerHeartbeatManager: the active controller's rules for
brokers (Kafka's names). A broker registers (each run with a new incarnation id; its
broker epoch is the offset of its registration record), starts fenced, is unfenced once a
heartbeat says it has applied the metadata up to its own registration, and is fenced
again when its heartbeats stop for ``broker.session.timeout.ms``. Like the replication
rules, these return records; the QuorumController writes them.

Sessions live in the active controller's memory only, never in the log (as in Kafka): a
new active controller gives every unfenced broker a full session from the moment it takes
over, except the broker of the controller it replaced, which it counts from when it last
heard from it (a frozen or killed combined controller is thus fenced one session after
it stopped, not a session after the election).
"""

from __future__ import annotations

from collections.abc import Iterable

from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    RegisterBrokerRecord,
)
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.errors import ErrorCode


class BrokerHeartbeatManager:
    """Invariant: ``last_contact`` holds a time for every broker the controller has heard
    from (or has assumed alive since it took over); a broker is expired when that time
    is ``session_ms`` or more in the past."""

    def __init__(self, session_ms: int) -> None:
        self.session_ms = session_ms
        self.last_contact: dict[int, int] = {}

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact[broker_id] = max(now_ms, self.last_contact.get(broker_id, now_ms))

    def expired(self, brokers: Iterable[int], now_ms: int) -> list[int]:
        return sorted(
            b for b in brokers if now_ms - self.last_contact.get(b, now_ms) >= self.session_ms
        )

    def next_expiry(self, brokers: Iterable[int]) -> int | None:
        times = [self.last_contact[b] + self.session_ms for b in brokers if b in self.last_contact]
        return min(times) if times else None


class ClusterControlManager:
    def __init__(self, cluster_id: str, members: Iterable[int]) -> None:
        self.cluster_id = cluster_id
        self.members = frozenset(members)

    def register(
        self, image: MetadataImage, request: ib.BrokerRegistrationRequest
    ) -> tuple[ErrorCode, str | None, RegisterBrokerRecord | None]:
        """Check a registration; the record of a new run (None when this run is
        registered already, or on an error)."""
        if request.cluster_id and request.cluster_id != self.cluster_id:
            return (
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"broker {request.broker_id} belongs to cluster {request.cluster_id!r}, not "
                f"{self.cluster_id!r}",
                None,
            )
        if self.members and request.broker_id not in self.members:
            return (
                ErrorCode.INVALID_REQUEST,
                f"broker {request.broker_id} is not in cluster.members",
                None,
            )
        current = image.brokers.get(request.broker_id)
        if current is not None and current.incarnation_id == request.incarnation_id:
            return ErrorCode.NONE, None, None
        record = RegisterBrokerRecord(
            request.broker_id,
            request.incarnation_id,
            -1,
            request.host,
            request.port,
            listeners=request.listeners,
        )
        return ErrorCode.NONE, None, record

    @staticmethod
    def heartbeat(
        image: MetadataImage, request: ib.BrokerHeartbeatRequest
    ) -> tuple[ib.BrokerHeartbeatResponse, list[MetadataRecord]]:
        """A heartbeat: STALE_BROKER_EPOCH for a run that is not the registered one (it
        registers again); an unfence once the broker has applied its own registration."""
        current = image.brokers.get(request.broker_id)
        if current is None or current.broker_epoch != request.broker_epoch:
            return ib.BrokerHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH), []
        caught_up = request.current_metadata_offset >= current.broker_epoch
        records: list[MetadataRecord] = []
        if current.fenced and caught_up and not current.in_controlled_shutdown:
            records.append(
                BrokerRegistrationChangeRecord(
                    current.broker_id, current.broker_epoch, fenced=False
                )
            )
        fenced = current.fenced and not records
        return ib.BrokerHeartbeatResponse(ErrorCode.NONE, caught_up, fenced), records

    @staticmethod
    def fence(image: MetadataImage, brokers: Iterable[int]) -> list[MetadataRecord]:
        return [
            BrokerRegistrationChangeRecord(b, image.brokers[b].broker_epoch, fenced=True)
            for b in brokers
            if b in image.brokers and not image.brokers[b].fenced
        ]

    @staticmethod
    def controlled_shutdown(
        image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[MetadataRecord]]:
        current = image.brokers.get(broker_id)
        if current is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, []
        if broker_epoch >= 0 and current.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        if current.in_controlled_shutdown:
            return ErrorCode.NONE, []
        return ErrorCode.NONE, [
            BrokerRegistrationChangeRecord(
                broker_id, current.broker_epoch, in_controlled_shutdown=True
            )
        ]
