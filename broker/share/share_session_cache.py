"""ShareSessionCache: the share sessions of this broker (KIP-932), Kafka's ShareSessionCache.

A share session belongs to one member of one share group, ``(group id, member id)``, and
holds the partitions that member fetches from this broker, so that its ShareFetch
requests after the first need name only what changes. Its epoch orders the requests:

- epoch 0 opens a session with the request's partitions (replacing one the member had);
- epoch -1 closes it (the member's acquired records are then released by the caller);
- any other epoch continues it and must be the session's next one: the request adds its
  partitions, removes its ``forgotten_topics_data``, and the epoch moves on by one
  (after 2147483647 comes 1).

A request naming a session that does not exist is SHARE_SESSION_NOT_FOUND, one with
another epoch INVALID_SHARE_SESSION_EPOCH; nothing changes then. At most ``max_entries``
sessions are held: a new one evicts the least recently used session if that one has been
idle for more than ``eviction_ms``, and is refused SHARE_SESSION_NOT_FOUND otherwise, as
Kafka's. Time is given to every call (``now_ms``); nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from purgatory.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from purgatory.broker.config.broker_config import BrokerConfig

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

# A partition as share requests name it: (topic id, as hex, partition index).
TopicIdPartition = tuple[str, int]


# Kafka's: a session unused this long may be evicted for a new one when the cache is full
# (MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS); the cache holds as many sessions as share
# groups may have members (group.share.max.groups, 10 in Kafka, times group.share.max.size).
SHARE_SESSION_EVICTION_MS = 120_000
_MAX_SHARE_GROUPS = 10


def max_share_sessions(config: BrokerConfig) -> int:
    return _MAX_SHARE_GROUPS * int(config["group.share.max.size"])


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ShareRequestMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


class ShareSessionKey(NamedTuple):
    group_id: str
    member_id: str


class ShareSession:
    """One member's session. ``epoch``: the epoch its next request must carry;
    ``partitions``: in the order they were added (a dict used as an ordered set)."""

    __slots__ = ("created_ms", "epoch", "key", "last_used_ms", "partitions")

    def __init__(self, key: ShareSessionKey, partitions: Iterable[TopicIdPartition], now_ms: int):
        self.key = key
        self.partitions: dict[TopicIdPartition, None] = dict.fromkeys(partitions)
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.created_ms = now_ms
        self.last_used_ms = now_ms

    def update(
        self, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]
    ) -> None:
        for tp in added:
            self.partitions.setdefault(tp, None)
        for tp in forgotten:
            self.partitions.pop(tp, None)

    def __repr__(self) -> str:
        return f"ShareSession({self.key}, epoch={self.epoch}, partitions={len(self.partitions)})"


class ShareSessionCache:
    """Invariant: ``sessions`` is in least-recently-used order (a session used moves to
    the end), so the first one is the eviction candidate."""

    def __init__(self, max_entries: int, eviction_ms: int) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[ShareSessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get(ShareSessionKey(group_id, member_id))

    @property
    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def open(
        self,
        group_id: str,
        member_id: str,
        partitions: Iterable[TopicIdPartition],
        now_ms: int,
    ) -> ShareSession | ErrorCode:
        """ShareFetch with epoch 0: a new session with ``partitions`` (the member's old
        one, if any, goes first), or SHARE_SESSION_NOT_FOUND when the cache is full of
        sessions used within ``eviction_ms``."""
        key = ShareSessionKey(group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_entries and not self._try_evict(now_ms):
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        session = ShareSession(key, partitions, now_ms)
        self.sessions[key] = session
        return session

    def continue_session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        now_ms: int,
    ) -> ShareSession | ErrorCode:
        """ShareFetch with an epoch above 0: the session with ``added`` added and
        ``forgotten`` removed, its epoch moved on; or why not."""
        session = self._expected(group_id, member_id, epoch)
        if isinstance(session, ErrorCode):
            return session
        session.update(added, forgotten)
        self._touch(session, now_ms)
        return session

    def acknowledge(
        self, group_id: str, member_id: str, epoch: int, now_ms: int
    ) -> ShareSession | ErrorCode:
        """ShareAcknowledge's use of the session (Kafka's acknowledgeSessionUpdate): epoch 0
        is INVALID_SHARE_SESSION_EPOCH (an acknowledgement cannot open a session); -1
        needs the session and leaves it as it is (the caller closes it); another epoch
        must be the next one, and moves it on."""
        if epoch == INITIAL_EPOCH:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        if epoch == FINAL_EPOCH:
            existing = self.get(group_id, member_id)
            return existing if existing is not None else ErrorCode.SHARE_SESSION_NOT_FOUND
        session = self._expected(group_id, member_id, epoch)
        if isinstance(session, ErrorCode):
            return session
        self._touch(session, now_ms)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        """Close a session (epoch -1); the removed session, or None if there was none."""
        return self.sessions.pop(ShareSessionKey(group_id, member_id), None)

    def _expected(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        session = self.get(group_id, member_id)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return session

    def _touch(self, session: ShareSession, now_ms: int) -> None:
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        del self.sessions[session.key]  # to the end: the most recently used
        self.sessions[session.key] = session

    def _try_evict(self, now_ms: int) -> bool:
        """Evict the least recently used session if it has been idle for longer than
        ``eviction_ms``."""
        for key, session in self.sessions.items():
            if now_ms - session.last_used_ms > self.eviction_ms:
                del self.sessions[key]
                return True
            return False
        return False
