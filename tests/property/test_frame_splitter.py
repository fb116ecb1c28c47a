"""FrameSplitter against a model: whatever the frame sizes, however the stream is cut and
whichever way each piece is received (fed, or written into ``receive_view()``), the frames come
out whole and in order, and the memory held follows the bytes that arrived, not the sizes the
size prefixes announce."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalike.protocol.framing import CHUNK_BYTES, DIRECT_BYTES, FULL_AT, FrameSplitter

SIZES = st.one_of(
    st.integers(0, 100),
    st.integers(DIRECT_BYTES - 2, DIRECT_BYTES + 2),
    st.integers(DIRECT_BYTES, 6 * DIRECT_BYTES),
)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(SIZES, min_size=1, max_size=6), data=st.data())
def test_frames_survive_any_cut_and_memory_follows_the_bytes(sizes: list[int], data: st.DataObject) -> None:
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    splitter = FrameSplitter()
    out: list[bytes] = []
    pos = 0
    while pos < len(stream):
        piece = data.draw(st.integers(1, 3 * DIRECT_BYTES), label="piece")
        view = splitter.receive_view()
        if view is not None and data.draw(st.booleans(), label="into the view"):
            with view:
                n = min(piece, len(view), len(stream) - pos)
                view[:n] = stream[pos : pos + n]
            splitter.received(n)
        else:
            if view is not None:
                view.release()
            n = min(piece, len(stream) - pos)
            splitter.feed(stream[pos : pos + n])
        pos += n
        while (frame := splitter.next_frame()) is not None:
            out.append(frame)
        # What is held follows what arrived (pieces for the next frames included).
        assert splitter.allocated_bytes() <= FULL_AT * splitter.buffered() + CHUNK_BYTES + 3 * DIRECT_BYTES
    assert out == payloads
    assert splitter.buffered() == 0
