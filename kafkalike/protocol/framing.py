"""Splitting a byte stream into Kafka frames: a 4-byte big-endian size, then that many bytes.

Partial reads are fine: feed whatever arrived, take whole frames out. A negative size or one
above the limit (``socket.request.max.bytes``) raises FrameError before anything is allocated.

Memory follows the bytes that arrived, never the size a header announces: a connection with
nothing in flight holds an empty buffer, and a header announcing 100 MiB followed by 10 bytes
costs ``LARGE_START_BYTES``, not 100 MiB.

A large frame (``DIRECT_BYTES`` or more) that has not fully arrived gets a buffer of its own,
which doubles as its bytes arrive, up to the frame's size. ``receive_view()`` is the buffer's
unfilled part, where the next bytes should be received (with ``recv_into``, then
``received(n)``), so its bytes are never copied from buffer to buffer, and ``take_frame()``
hands that buffer over as it is: a produce request's records stay views of one buffer.
"""

from __future__ import annotations

from kafkalike.protocol.errors import FrameError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
DIRECT_BYTES = 64 * 1024
LARGE_START_BYTES = 64 * 1024  # a large frame's first buffer, when fewer of its bytes are here


class FrameSplitter:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed prefix, dropped lazily to avoid quadratic copying
        # A large frame being received into its own buffer: its size, and how much has arrived.
        # The buffer's length is its capacity; it reaches ``_big_size`` only when it is full.
        self._big: bytearray | None = None
        self._big_size = 0
        self._big_filled = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._big is not None and self._big_filled < self._big_size:
            n = min(len(data), self._big_size - self._big_filled)
            big = self._room_for(n)
            big[self._big_filled : self._big_filled + n] = memoryview(data)[:n]
            self._big_filled += n
            if n == len(data):
                return
            data = memoryview(data)[n:]
        self._buffer += data

    def buffered(self) -> int:
        pending = 4 + self._big_filled if self._big is not None else 0
        return pending + len(self._buffer) - self._start

    def allocated_bytes(self) -> int:
        """Memory this splitter holds for frames not yet taken, in bytes."""
        big = self._big.__alloc__() if self._big is not None else 0
        return big + self._buffer.__alloc__()

    def announced_bytes(self) -> int | None:
        """The size of the frame being received, once its size prefix is here; else None."""
        if self._big is not None:
            return self._big_size
        available = len(self._buffer) - self._start
        if available < 4:
            return None
        return int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)

    def receive_view(self) -> memoryview | None:
        """Where the next bytes of a large frame go: the unfilled part of its buffer, grown when
        full. None when no large frame is being received. Release the view (``with``) before
        calling the splitter again: a buffer with a view on it cannot grow."""
        if self._big is None or self._big_filled >= self._big_size:
            return None
        big = self._room_for(1)
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
            if self._big_filled < self._big_size:
                return None
            self._big = None
            self._big_size = self._big_filled = 0
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
        """Move the part of a large frame already here into a buffer of its own."""
        have = len(self._buffer) - begin
        big = bytearray(min(size, max(have, LARGE_START_BYTES)))
        with memoryview(self._buffer) as view:
            big[:have] = view[begin:]
        self._big, self._big_size, self._big_filled = big, size, have
        self._buffer.clear()
        self._start = 0

    def _room_for(self, n: int) -> bytearray:
        """The large frame's buffer, with room for ``n`` more bytes (at most the frame's rest):
        at least doubled when it grows, so a frame costs O(size) copying in all."""
        big = self._big
        assert big is not None
        needed = self._big_filled + n
        if needed > len(big):
            capacity = min(self._big_size, max(needed, 2 * len(big)))
            try:
                big.extend(bytes(capacity - len(big)))
            except BufferError:  # a view of it is still held: continue in a new buffer
                grown = bytearray(capacity)
                grown[: self._big_filled] = memoryview(big)[: self._big_filled]
                self._big = big = grown
        return big

    def wanted(self) -> int:
        """How many more bytes complete the frame being received (at least 1 when nothing is known)."""
        if self._big is not None:
            return max(1, self._big_size - self._big_filled)
        available = len(self._buffer) - self._start
        if available < 4:
            return 4 - available
        size = int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)
        return max(1, 4 + size - available)

    def _compact(self) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
