"""Numbered lines of standard input for asyncio, from any kind of stdin.

asyncio's pipe transports work for pipes and terminals but not for regular files (uvloop
aborts the interpreter on ``purgatory produce < file``), and ``StreamReader.readline``
refuses lines over 64 KiB. So a daemon thread reads the file descriptor with ``os.read``
(no Python-level lock is held while it blocks, so interpreter exit never waits on it),
splits lines itself, and hands them to the loop in chunks through a bounded queue: a
reader ahead of the producer blocks instead of filling memory.

A line ends at ``\\n``; a ``\\r`` before it is data unless ``crlf`` is set. A line longer
than ``max_line_bytes`` is not kept: it is reported as ``(number, None, length)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import sys
import threading

Line = tuple[int, bytes | None, int]  # (1-based line number, bytes or None if too long, length)

READ_SIZE = 1 << 16
QUEUED_CHUNKS = 16


class StdinLines:
    """``async for chunk in StdinLines(...)`` yields lists of lines until end of input."""

    def __init__(self, *, max_line_bytes: int, crlf: bool = False, fd: int | None = None) -> None:
        self.max_line_bytes = max_line_bytes
        self.crlf = crlf
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[list[Line] | BaseException | None] = asyncio.Queue(QUEUED_CHUNKS)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stdin-lines", daemon=True)
        self._thread.start()

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> list[Line]:
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """Stop handing out lines (the thread ends at its next read or hand-over)."""
        self._stopped.set()

    def _read(self) -> bytes:
        while True:
            try:
                return os.read(self.fd, READ_SIZE)
            except BlockingIOError:  # a descriptor someone left non-blocking
                select.select([self.fd], [], [])
            except InterruptedError:
                continue

    def _hand_over(self, item: list[Line] | BaseException | None) -> bool:
        """Queue ``item`` for the loop, blocking while the queue is full; False once stopped
        or when the loop is gone."""
        while not self._stopped.is_set():
            put = self._queue.put(item)
            try:
                future = asyncio.run_coroutine_threadsafe(put, self._loop)
            except RuntimeError:  # the loop is closed
                put.close()
                return False
            with contextlib.suppress(TimeoutError):
                future.result(0.5)
                return True
            future.cancel()
        return False

    def _run(self) -> None:
        number = 0
        partial = bytearray()
        dropping = 0  # > 0 while skipping the rest of a line that is too long
        try:
            while not self._stopped.is_set():
                data = self._read()
                if not data:
                    break
                lines: list[Line] = []
                start = 0
                while True:
                    end = data.find(b"\n", start)
                    if end < 0:
                        rest = len(data) - start
                        if dropping:
                            dropping += rest
                        elif len(partial) + rest > self.max_line_bytes:
                            dropping = len(partial) + rest
                            partial.clear()
                        else:
                            partial += data[start:]
                        break
                    number += 1
                    if dropping:
                        lines.append((number, None, dropping + end - start))
                        dropping = 0
                    else:
                        partial += data[start:end]
                        lines.append(self._line(number, partial))
                        partial = bytearray()
                    start = end + 1
                if lines and not self._hand_over(lines):
                    return
            if partial or dropping:  # a last line without a newline
                number += 1
                last = (number, None, dropping) if dropping else self._line(number, partial)
                if not self._hand_over([last]):
                    return
            self._hand_over(None)
        except OSError as exc:
            self._hand_over(OSError(f"cannot read standard input: {exc}"))

    def _line(self, number: int, data: bytearray) -> Line:
        if self.crlf and data.endswith(b"\r"):
            del data[-1]
        if len(data) > self.max_line_bytes:
            return (number, None, len(data))
        return (number, bytes(data), len(data))
