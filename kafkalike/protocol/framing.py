"""Splitting a byte stream into Kafka frames: a 4-byte big-endian size, then that many bytes.

Partial reads are fine: feed whatever arrived, take whole frames out. A negative size or one
above the limit (``socket.request.max.bytes``) raises FrameError before anything is allocated.

A large frame (``DIRECT_BYTES`` or more) that has not fully arrived gets its own buffer as soon
as its size is known: ``receive_view()`` is where the rest of it should be received (with
``recv_into``, then ``received(n)``), so its bytes are never copied from buffer to buffer, and
``take_frame()`` hands that buffer over as it is.
"""

from __future__ import annotations

from kafkalike.protocol.errors import FrameError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
DIRECT_BYTES = 64 * 1024


class FrameSplitter:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed prefix, dropped lazily to avoid quadratic copying
        self._big: bytearray | None = None  # a large frame being received into its own buffer
        self._big_filled = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        big = self._big
        if big is not None and self._big_filled < len(big):
            n = min(len(data), len(big) - self._big_filled)
            big[self._big_filled : self._big_filled + n] = memoryview(data)[:n]
            self._big_filled += n
            if n == len(data):
                return
            data = memoryview(data)[n:]
        self._buffer += data

    def buffered(self) -> int:
        pending = 4 + self._big_filled if self._big is not None else 0
        return pending + len(self._buffer) - self._start

    def receive_view(self) -> memoryview | None:
        """The unfilled rest of a large frame, to receive into directly; None when there is none."""
        big = self._big
        if big is None or self._big_filled >= len(big):
            return None
        return memoryview(big)[self._big_filled :]

    def received(self, n: int) -> None:
        """``n`` bytes were written into the start of ``receive_view()``."""
        self._big_filled += n

    def next_frame(self) -> bytes | None:
        """The next whole frame without its size prefix, or None until more bytes arrive."""
        frame = self.take_frame()
        return None if frame is None else bytes(frame)

    def take_frame(self) -> bytearray | None:
        """As ``next_frame``, as a writable buffer the caller now owns."""
        big = self._big
        if big is not None:
            if self._big_filled < len(big):
                return None
            self._big = None
            self._big_filled = 0
            return big
        available = len(self._buffer) - self._start
        if available < 4:
            self._compact()
            return None
        size = int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameError(f"frame size {size} outside 0..{self.max_frame_bytes}")
        begin = self._start + 4
        if available < 4 + size:
            if size >= DIRECT_BYTES:
                self._start_big(begin, size)
            else:
                self._compact()
            return None
        with memoryview(self._buffer) as view:
            frame = bytearray(view[begin : begin + size])
        self._start = begin + size
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        return frame

    def _start_big(self, begin: int, size: int) -> None:
        """Move the part of a large frame already here into its own buffer, sized for all of it."""
        big = bytearray(size)
        have = len(self._buffer) - begin
        with memoryview(self._buffer) as view:
            big[:have] = view[begin:]
        self._big, self._big_filled = big, have
        self._buffer.clear()
        self._start = 0

    def wanted(self) -> int:
        """How many more bytes complete the frame being received (at least 1 when nothing is known)."""
        if self._big is not None:
            return max(1, len(self._big) - self._big_filled)
        available = len(self._buffer) - self._start
        if available < 4:
            return 4 - available
        size = int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)
        return max(1, 4 + size - available)

    def _compact(self) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
