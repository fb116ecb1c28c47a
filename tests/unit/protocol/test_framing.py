"""FrameSplitter: size-prefixed frames out of a byte stream that arrives in arbitrary pieces."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kafkalike.protocol.errors import FrameError, ProtocolError
from kafkalike.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameSplitter

PAYLOADS = [b"first frame", b"", b"\x00" * 300, bytes(range(256)), b"last"]


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def drain(splitter: FrameSplitter) -> list[bytes]:
    frames = []
    while (frame := splitter.next_frame()) is not None:
        frames.append(frame)
    return frames


def test_empty_splitter() -> None:
    splitter = FrameSplitter()
    assert splitter.next_frame() is None
    assert splitter.buffered() == 0
    assert splitter.wanted() == 4


def test_byte_by_byte() -> None:
    stream = b"".join(framed(p) for p in PAYLOADS)
    splitter = FrameSplitter()
    frames: list[bytes] = []
    # Where each frame ends in the stream, to check wanted() at every step.
    ends, pos = [], 0
    for p in PAYLOADS:
        pos += 4 + len(p)
        ends.append((pos - len(p) - 4, pos))
    for i, byte in enumerate(stream):
        splitter.feed(bytes([byte]))
        frames.extend(drain(splitter))
        received = i + 1
        start, end = next(((s, e) for s, e in ends if s <= received < e), (received, received))
        if start < received < end:  # in the middle of a frame
            want = 4 - (received - start) if received - start < 4 else end - received
            assert splitter.wanted() == want, received
            assert splitter.buffered() == received - start
    assert frames == PAYLOADS
    assert splitter.buffered() == 0
    assert splitter.wanted() == 4


def test_several_frames_in_one_feed() -> None:
    splitter = FrameSplitter()
    splitter.feed(b"".join(framed(p) for p in PAYLOADS) + framed(b"partial")[:6])
    assert drain(splitter) == PAYLOADS
    assert splitter.buffered() == 6
    assert splitter.wanted() == 4 + len(b"partial") - 6
    splitter.feed(framed(b"partial")[6:])
    assert splitter.next_frame() == b"partial"
    assert splitter.next_frame() is None
    assert splitter.buffered() == 0


def test_many_small_frames_leave_nothing_behind() -> None:
    splitter = FrameSplitter()
    payloads = [str(i).encode() for i in range(5000)]
    stream = b"".join(framed(p) for p in payloads)
    # Uneven pieces that cut size prefixes and payloads alike.
    out: list[bytes] = []
    for start in range(0, len(stream), 7):
        splitter.feed(memoryview(stream)[start : start + 7])
        out.extend(drain(splitter))
    assert out == payloads
    assert splitter.buffered() == 0


def test_frames_are_independent_bytes() -> None:
    splitter = FrameSplitter()
    data = bytearray(framed(b"abc") + framed(b"def"))
    splitter.feed(data)
    data[4:7] = b"xyz"  # the caller reusing its receive buffer must not change what was fed
    first = splitter.next_frame()
    assert first == b"abc"
    assert isinstance(first, bytes)
    assert splitter.next_frame() == b"def"


def test_zero_length_frame() -> None:
    splitter = FrameSplitter()
    splitter.feed(b"\x00\x00\x00\x00")
    assert splitter.next_frame() == b""
    assert splitter.next_frame() is None


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_size(size: int) -> None:
    splitter = FrameSplitter()
    splitter.feed(struct.pack(">i", size) + b"abcd")
    with pytest.raises(FrameError) as excinfo:
        splitter.next_frame()
    assert str(size) in str(excinfo.value)
    assert isinstance(excinfo.value, ProtocolError)


@pytest.mark.parametrize(
    ("limit", "size"),
    [
        (1024, 1025),
        (0, 1),
        (DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_FRAME_BYTES + 1),
        (DEFAULT_MAX_FRAME_BYTES, 2**31 - 1),
    ],
)
def test_size_above_the_limit(limit: int, size: int) -> None:
    splitter = FrameSplitter(max_frame_bytes=limit)
    # Only the prefix has arrived: rejected at once, not after waiting for (or buffering) the body.
    splitter.feed(struct.pack(">i", size))
    with pytest.raises(FrameError):
        splitter.next_frame()


def test_size_at_the_limit_is_accepted() -> None:
    splitter = FrameSplitter(max_frame_bytes=8)
    splitter.feed(framed(b"12345678"))
    assert splitter.next_frame() == b"12345678"


def test_good_frames_before_a_bad_size_are_delivered() -> None:
    splitter = FrameSplitter(max_frame_bytes=100)
    splitter.feed(framed(b"ok") + struct.pack(">i", 101))
    assert splitter.next_frame() == b"ok"
    with pytest.raises(FrameError):
        splitter.next_frame()


def test_wanted_counts_down_to_the_end_of_the_frame() -> None:
    splitter = FrameSplitter()
    assert splitter.wanted() == 4
    splitter.feed(b"\x00\x00")
    assert splitter.wanted() == 2
    splitter.feed(b"\x00\x0a")
    assert splitter.wanted() == 10
    splitter.feed(b"0123")
    assert splitter.wanted() == 6
    assert splitter.next_frame() is None
    splitter.feed(b"456789")
    assert splitter.next_frame() == b"0123456789"
    assert splitter.wanted() == 4


def test_a_header_announcing_100_mib_allocates_only_what_arrived() -> None:
    splitter = FrameSplitter()
    tracemalloc.start()
    try:
        splitter.feed(struct.pack(">i", 100 * 1024 * 1024) + b"0123456789")
        assert splitter.take_frame() is None
        splitter.feed(b"more bytes")
        assert splitter.take_frame() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    assert splitter.buffered() == 4 + 20


def test_an_emptied_splitter_holds_no_buffer() -> None:
    splitter = FrameSplitter()
    splitter.feed(framed(b"x" * 50_000) + framed(b"y" * 200_000))
    assert splitter.next_frame() == b"x" * 50_000
    assert splitter.next_frame() == b"y" * 200_000
    assert splitter.allocated_bytes() <= 1
