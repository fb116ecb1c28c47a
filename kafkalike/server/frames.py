"""Reading whole frames from a stream: what every connection that waits for one request or one
response does (the CONTROLLER listener, the peer, controller and inter-broker channels). The
splitter bounds a frame's size; the broker's client connections read their own way (shared
receive buffer, memory reserved before a frame arrives)."""

from __future__ import annotations

import trio

from kafkalike.protocol.framing import FrameSplitter

RECEIVE_BYTES = 64 * 1024


async def receive_frame(stream: trio.abc.ReceiveStream, splitter: FrameSplitter) -> bytearray | None:
    """The next whole frame, None once the peer closed the stream (a frame cut short included).
    Raises what the stream raises, and FrameError for a size the splitter refuses."""
    while (frame := splitter.take_frame()) is None:
        data = await stream.receive_some(RECEIVE_BYTES)
        if not data:
            return None
        splitter.feed(data)
    return frame
