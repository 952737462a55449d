"""Length-prefixed framing: a 4-byte big-endian unsigned length, then that many bytes."""

from __future__ import annotations

import struct

LENGTH_PREFIX = struct.Struct(">I")
LENGTH_PREFIX_SIZE = LENGTH_PREFIX.size
DEFAULT_MAX_FRAME_BYTES = 104_857_600  # Kafka's socket.request.max.bytes


class FrameError(Exception):
    """The byte stream cannot be split into frames; the connection must be closed."""


class FrameTooLarge(FrameError):
    """A length prefix announced more bytes than the receiver accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the limit of {limit} bytes "
            "(socket.request.max.bytes); is the peer speaking this protocol?"
        )
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Incremental frame decoder: feed bytes, get complete frame bodies, keep the rest.

    Invariants: ``_buffer[_start:]`` holds the bytes not yet returned; the size of a
    frame is checked against ``max_frame_bytes`` as soon as its 4-byte prefix is
    complete, before any of its body is buffered beyond what the peer already sent.
    After a ``FrameError`` the decoder is unusable (the stream has no frame boundary).
    """

    __slots__ = ("_buffer", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; return every frame body they complete, in order."""
        buf = self._buffer
        if self._start and self._start == len(buf):
            buf.clear()
            self._start = 0
        buf += data
        frames: list[bytes] = []
        start = self._start
        end = len(buf)
        limit = self.max_frame_bytes
        while end - start >= LENGTH_PREFIX_SIZE:
            (size,) = LENGTH_PREFIX.unpack_from(buf, start)
            if size > limit:
                raise FrameTooLarge(size, limit)
            body_start = start + LENGTH_PREFIX_SIZE
            if end - body_start < size:
                break
            frames.append(bytes(buf[body_start : body_start + size]))
            start = body_start + size
        if start == end:
            buf.clear()
            start = 0
        elif start > 65536 and start > (end >> 1):
            del buf[:start]
            start = 0
        self._start = start
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer) - self._start


def encode_frame(body: bytes) -> bytes:
    """Prefix one body with its length."""
    return LENGTH_PREFIX.pack(len(body)) + body
