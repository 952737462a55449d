"""DelayedOperation: an operation that completes when its condition holds or its time runs out."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from purgatory.broker.purgatory.timer import TimerTask

if TYPE_CHECKING:
    from purgatory.broker.purgatory.purgatory import DelayedOperationPurgatory


class DelayedOperation(TimerTask):
    """Completes exactly once, in one of two ways:

    A. ``try_complete`` finds its condition met and calls ``force_complete``;
    B. its delay passes first: ``force_complete`` runs, then ``on_expiration``.

    Either way ``on_complete`` runs once and the operation leaves the timer (and, with eager
    watcher removal, every watcher list) at once. ``force_complete`` is idempotent: an
    operation both satisfied and expired in the same loop iteration completes once.
    Subclasses implement ``try_complete``, ``on_complete`` and ``on_expiration``.
    """

    __slots__ = ("_purgatory", "_watch_keys", "completed")

    def __init__(self, delay_ms: int) -> None:
        # TimerTask's fields, set here rather than through super().__init__: one call less
        # per operation on the request path.
        self.delay_ms = delay_ms
        self.expiration_ms = 0
        self._bucket = None
        self.completed = False
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._watch_keys: Sequence[Hashable] = ()

    def try_complete(self) -> bool:
        """Check the condition; if met, call ``force_complete`` and return its result."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """The operation's result: runs once, whether satisfied or expired."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the operation timed out."""

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        bucket = self._bucket  # TimerTask.cancel, inlined (once per operation)
        if bucket is not None:
            bucket.remove(self)
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._completed(self)
        self.on_complete()
        return True

    def run(self) -> None:
        """Timer expiry."""
        if self.force_complete():
            purgatory = self._purgatory
            if purgatory is not None:
                purgatory.expirations += 1
            self.on_expiration()
