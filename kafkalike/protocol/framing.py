"""Splitting a byte stream into Kafka frames: a 4-byte big-endian size, then that many bytes.

Partial reads are fine: feed whatever arrived, take whole frames out. A negative size or one
above the limit (``socket.request.max.bytes``) raises FrameError before anything is allocated.

Memory follows the bytes that arrived, never the size a header announces: a connection with
nothing in flight holds an empty buffer, and a header announcing 100 MiB followed by 10 bytes
costs one ``CHUNK_BYTES`` chunk, not 100 MiB.

A large frame (``DIRECT_BYTES`` or more) that has not fully arrived is received into a buffer of
its own: first into chunks of ``CHUNK_BYTES``, and once a ``1/FULL_AT`` share of it is here, into
one buffer of its full size, where the chunks are copied and the rest arrives. So memory stays
within ``FULL_AT`` times what arrived, at most that share is copied twice, and a frame's buffer
is allocated once at its final size: a buffer that grew step by step would land, with every
step, on memory the allocator has just returned to the system, whose pages cost a fault each
(more than the copying they replace). ``receive_view()`` is where the next bytes should be
received (with ``recv_into``, then ``received(n)``), so they are not copied from buffer to
buffer, and ``take_frame()`` hands the full buffer over as it is: a produce request's records
stay views of one buffer.
"""

from __future__ import annotations

from kafkalike.protocol.errors import FrameError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
DIRECT_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024  # below the allocator's mmap threshold, so chunks are reused warm
FULL_AT = 4  # a large frame gets its full-size buffer once 1/FULL_AT of it has arrived


class FrameSplitter:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # consumed prefix, dropped lazily to avoid quadratic copying
        # A large frame being received: its size (0: none), how much of it has arrived, and
        # where: in ``_chunks`` (each CHUNK_BYTES, the last one partly filled) until ``_big``,
        # the buffer of its full size, exists.
        self._big_size = 0
        self._big_filled = 0
        self._big: bytearray | None = None
        self._chunks: list[bytearray] = []

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._big_filled < self._big_size:
            n = min(len(data), self._big_size - self._big_filled)
            view = memoryview(data)
            self._append_big(view[:n])
            if n == len(data):
                return
            data = view[n:]
        self._buffer += data

    def buffered(self) -> int:
        pending = 4 + self._big_filled if self._big_size else 0
        return pending + len(self._buffer) - self._start

    def allocated_bytes(self) -> int:
        """Memory this splitter holds for frames not yet taken, in bytes."""
        big = self._big.__alloc__() if self._big is not None else 0
        return big + sum(c.__alloc__() for c in self._chunks) + self._buffer.__alloc__()

    def announced_bytes(self) -> int | None:
        """The size of the frame being received, once its size prefix is here; else None."""
        if self._big_size:
            return self._big_size
        available = len(self._buffer) - self._start
        if available < 4:
            return None
        return int.from_bytes(self._buffer[self._start : self._start + 4], "big", signed=True)

    def receive_view(self) -> memoryview | None:
        """Where the next bytes of a large frame go (never past its end); None when no large
        frame is being received. Release the view (``with``) once received into."""
        if self._big_filled >= self._big_size:
            return None
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        chunk, offset = self._chunk_for_next_byte()
        room = min(CHUNK_BYTES - offset, self._big_size - self._big_filled)
        return memoryview(chunk)[offset : offset + room]

    def received(self, n: int) -> None:
        """``n`` bytes were written into the start of ``receive_view()``."""
        self._big_filled += n
        if self._big is None and self._big_filled * FULL_AT >= self._big_size:
            self._to_full_buffer()

    def next_frame(self) -> bytes | None:
        """The next whole frame without its size prefix, or None until more bytes arrive."""
        frame = self.take_frame()
        return None if frame is None else bytes(frame)

    def take_frame(self) -> bytearray | None:
        """As ``next_frame``, as a writable buffer the caller now owns."""
        if self._big_size:
            if self._big_filled < self._big_size:
                return None
            big = self._big
            assert big is not None  # a frame gets its full buffer before its last byte
            self._big, self._big_size, self._big_filled = None, 0, 0
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
        """Move the part of a large frame already here out of the small-frame buffer."""
        self._big_size, self._big_filled = size, 0
        with memoryview(self._buffer) as view:
            self._append_big(view[begin:])
        self._buffer.clear()
        self._start = 0

    def _append_big(self, data: memoryview) -> None:
        """Bytes of the large frame (no more than its rest), into its chunks or full buffer."""
        if self._big is None and (self._big_filled + len(data)) * FULL_AT >= self._big_size:
            self._to_full_buffer()
        if self._big is not None:
            self._big[self._big_filled : self._big_filled + len(data)] = data
            self._big_filled += len(data)
            return
        pos = 0
        while pos < len(data):
            chunk, offset = self._chunk_for_next_byte()
            n = min(CHUNK_BYTES - offset, len(data) - pos)
            chunk[offset : offset + n] = data[pos : pos + n]
            self._big_filled += n
            pos += n

    def _chunk_for_next_byte(self) -> tuple[bytearray, int]:
        """The chunk where the frame's next byte goes (a new one when all are full), and where in it."""
        index, offset = divmod(self._big_filled, CHUNK_BYTES)
        if index == len(self._chunks):
            self._chunks.append(bytearray(CHUNK_BYTES))
        return self._chunks[index], offset

    def _to_full_buffer(self) -> None:
        big = bytearray(self._big_size)
        pos = 0
        for chunk in self._chunks:
            n = min(CHUNK_BYTES, self._big_filled - pos)
            big[pos : pos + n] = memoryview(chunk)[:n]
            pos += n
        self._big, self._chunks = big, []

    def wanted(self) -> int:
        """How many more bytes complete the frame being received (at least 1 when nothing is known)."""
        if self._big_size:
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
