"""The latest log events of every broker in this process, kept in memory for
``GET /v1/logs`` (and so for a failing test's report): a structlog processor that files
each event under the ``broker_id`` bound to its logger."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from structlog.typing import EventDict, WrappedLogger

KEPT_EVENTS = 500  # per broker

_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """A JSON-safe copy of an event field (lists and dicts of plain values stay as they are)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(v, _PLAIN) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return str(value)


class RecentLogs:
    """Invariant: at most ``kept`` events per broker, oldest first. Brokers of one process
    may log from several threads (`purgatory.testing.Cluster`), hence the lock."""

    def __init__(self, kept: int = KEPT_EVENTS) -> None:
        self.kept = kept
        self._events: dict[int, deque[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def __call__(self, _: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
        broker = event_dict.get("broker_id")
        if isinstance(broker, int):
            event = {k: _plain(v) for k, v in event_dict.items() if k != "broker_id"}
            with self._lock:
                ring = self._events.get(broker)
                if ring is None:
                    ring = self._events[broker] = deque(maxlen=self.kept)
                ring.append(event)
        return event_dict

    def events(self, broker_id: int, limit: int = KEPT_EVENTS) -> list[dict[str, Any]]:
        """The broker's latest ``limit`` events, oldest first."""
        with self._lock:
            ring = list(self._events.get(broker_id, ()))
        return ring[-limit:] if limit > 0 else []


RECENT_LOGS = RecentLogs()
