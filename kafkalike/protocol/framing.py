"""Splitting a byte stream into Kafka frames: a 4-byte big-endian size, then that many bytes.

Partial reads are fine: feed whatever arrived, take whole frames out. A negative size or one
above the limit (``socket.request.max.bytes``) raises FrameError before anything is allocated.
"""

from __future__ import annotations

from kafkalike.protocol.errors import FrameError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default


class FrameSplitter:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed prefix, dropped lazily to avoid quadratic copying

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def next_frame(self) -> bytes | None:
        """The next whole frame without its size prefix, or None until more bytes arrive."""
        available = len(self._buffer) - self._start
        if available < 4:
            self._compact()
            return None
        size = int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameError(f"frame size {size} outside 0..{self.max_frame_bytes}")
        if available < 4 + size:
            self._compact()
            return None
        begin = self._start + 4
        frame = bytes(self._buffer[begin : begin + size])
        self._start = begin + size
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        return frame

    def wanted(self) -> int:
        """How many more bytes complete the frame being received (at least 1 when nothing is known)."""
        available = len(self._buffer) - self._start
        if available < 4:
            return 4 - available
        size = int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)
        return max(1, 4 + size - available)

    def _compact(self) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
