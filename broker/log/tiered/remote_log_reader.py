"""The bounded pool that runs remote reads (Kafka's remote storage reader thread pool and
its RemoteLogReader tasks).

At most ``remote.log.reader.threads`` reads run at once and ``remote.log.reader.max.pending.tasks``
wait behind them; a read submitted to a full queue is refused at once (ReaderQueueFull),
so the fetch answers that partition with an error instead of waiting. Cancelling a read's
future drops it if it is still queued; a read already running goes on to the end and keeps
its slot (Kafka cancels with ``mayInterruptIfRunning=false``), only its result is dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from purgatory.broker.log.tiered.remote_storage import RemoteFetchInfo
from purgatory.common.histogram import Histogram

IDLE_WINDOW_S = 10.0  # the idle ratio is over windows of at least this long


class ReaderQueueFull(Exception):
    """The pool has every slot running and ``max_pending`` reads queued."""


class RemoteLogReaderPool:
    """Runs ``read`` for submitted RemoteFetchInfos, ``threads`` at a time.

    Invariants: ``running`` <= ``threads``; a queued entry's future is not done (cancelled
    ones leave the queue at once); ``_busy`` integrates running slots over ``clock`` time.
    """

    def __init__(
        self,
        threads: int,
        max_pending: int,
        read: Callable[[RemoteFetchInfo], Awaitable[bytes]],
        clock: Callable[[], float],
    ) -> None:
        self.threads = threads
        self.max_pending = max_pending
        self.read = read
        self.clock = clock
        self.running = 0
        self._queue: deque[tuple[RemoteFetchInfo, asyncio.Future[bytes]]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        # Statistics (RemoteLogReaderFetchRateAndTimeMs, RemoteFetchBytesPerSec, ...).
        self.read_time = Histogram()
        self.reads = 0
        self.bytes_read = 0
        self.errors = 0
        self.rejected = 0
        self.cancelled = 0
        now = clock()
        self._busy = 0.0  # slot-seconds spent running reads
        self._busy_since = now  # _busy is exact up to this time
        self._window = (now, 0.0)  # (start, _busy at start) of the current idle window
        self._idle_ratio = 1.0  # over the last finished window

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def submit(self, info: RemoteFetchInfo) -> asyncio.Future[bytes]:
        """Start or queue a read; its future gets the bytes or the read's exception.
        Raises ReaderQueueFull when every slot runs and the queue is full."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if self.running < self.threads:
            self._start(info, future)
        elif len(self._queue) >= self.max_pending:
            self.rejected += 1
            raise ReaderQueueFull(
                f"remote log reader queue is full ({self.max_pending} pending reads, "
                f"{self.threads} running; remote.log.reader.max.pending.tasks)"
            )
        else:
            self._queue.append((info, future))
            future.add_done_callback(self._dequeue_cancelled)
        return future

    def _dequeue_cancelled(self, future: asyncio.Future[bytes]) -> None:
        if future.cancelled():
            for entry in self._queue:
                if entry[1] is future:
                    self._queue.remove(entry)
                    self.cancelled += 1
                    break

    def _start(self, info: RemoteFetchInfo, future: asyncio.Future[bytes]) -> None:
        self._account()
        self.running += 1
        task = asyncio.ensure_future(self._run(info, future))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, info: RemoteFetchInfo, future: asyncio.Future[bytes]) -> None:
        started = self.clock()
        try:
            data = await self.read(info)
        except asyncio.CancelledError:
            if not future.done():
                future.cancel()
            raise
        except Exception as exc:  # a failed read is the fetch's answer for that partition
            self.errors += 1
            if not future.done():
                future.set_exception(exc)
        else:
            self.bytes_read += len(data)
            if not future.done():
                future.set_result(data)
        finally:
            self.reads += 1
            self.read_time.observe(self.clock() - started)
            self._account()
            self.running -= 1
            self._start_queued()

    def _start_queued(self) -> None:
        while self._queue and self.running < self.threads:
            info, future = self._queue.popleft()
            future.remove_done_callback(self._dequeue_cancelled)
            self._start(info, future)

    def _account(self) -> None:
        now = self.clock()
        self._busy += self.running * (now - self._busy_since)
        self._busy_since = now
        start, busy_at_start = self._window
        if now - start >= IDLE_WINDOW_S:
            self._idle_ratio = 1.0 - (self._busy - busy_at_start) / (self.threads * (now - start))
            self._window = (now, self._busy)

    def busy_seconds(self) -> float:
        """Slot-seconds spent on reads so far (``rate()`` of it / threads = busy ratio)."""
        self._account()
        return self._busy

    def avg_idle_ratio(self) -> float:
        """Fraction of the pool's slot time idle over the last window of at least
        IDLE_WINDOW_S (Kafka's RemoteLogReaderAvgIdlePercent, as a 0-1 ratio)."""
        self._account()
        return self._idle_ratio

    async def shutdown(self) -> None:
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
