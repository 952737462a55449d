"""InFlightRequests: the requests one connection has in flight, and the ordering rules both
ends of a connection keep. Sans-I/O: no socket, no event loop, no codec.

Kafka answers a connection's requests in the order they were sent, even when an earlier
one waits in a purgatory; a request that gets no answer (Produce with acks=0) takes no
place. So a client matches each response to its oldest request in flight (another
correlation id means the stream is broken), and a server writes an answer out only when
every answer before it is written.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_CORRELATION_ID = 2**31 - 1  # an INT32 on the wire; Kafka's clients wrap to 0 after it


class CorrelationMismatch(Exception):
    """A response whose correlation id is not that of the oldest request in flight."""


class InFlight(Generic[T]):
    """One request waiting for its answer: what its owner keeps about it (``context``) and,
    on a server, the encoded answer once it is known."""

    __slots__ = ("answer", "context", "correlation_id")

    def __init__(self, correlation_id: int, context: T) -> None:
        self.correlation_id = correlation_id
        self.context = context
        self.answer: bytearray | None = None


class InFlightRequests(deque[InFlight[T]]):
    """Oldest first. A client adds a request as it sends it and takes it back with
    ``complete``; a server adds one as it reads it and writes out what is ready with
    ``write_ready_answers``. A deque itself, so that asking whether anything is in flight
    (on every request a server answers) costs no Python call."""

    __slots__ = ("_last_id",)

    def __init__(self) -> None:
        super().__init__()
        self._last_id = 0

    def next_correlation_id(self) -> int:
        """A client's next id: 1, 2, ... wrapping to 0 after the largest INT32."""
        self._last_id = 0 if self._last_id == MAX_CORRELATION_ID else self._last_id + 1
        return self._last_id

    def add(self, correlation_id: int, context: T) -> InFlight[T]:
        entry = InFlight(correlation_id, context)
        self.append(entry)
        return entry

    def complete(self, correlation_id: int) -> T:
        """A client's response arrived: it answers the oldest request, which leaves."""
        if not self:
            raise CorrelationMismatch(
                f"response with correlation id {correlation_id}, but no request in flight"
            )
        if self[0].correlation_id != correlation_id:
            raise CorrelationMismatch(
                f"response with correlation id {correlation_id}, but the oldest request in "
                f"flight has {self[0].correlation_id}"
            )
        return self.popleft().context

    def write_ready_answers(self, out: bytearray) -> None:
        """A server's answers that may be written now, appended to ``out`` in request
        order: each leaves as it is written; the first unanswered request stops the rest."""
        while self:
            answer = self[0].answer
            if answer is None:
                return
            out += answer
            self.popleft()

    def abandon(self) -> list[T]:
        """The connection ended: every request still in flight, oldest first."""
        contexts = [entry.context for entry in self]
        self.clear()
        return contexts
