"""The peer channel alone: Kafka's request bytes to a listening peer and the answer back by
correlation id; a peer that is down answered at once with BROKER_NOT_AVAILABLE (and tried again
after a doubling reconnect backoff); a peer that comes up is reached; isolate/heal."""

from __future__ import annotations

import trio

from kafkalike.protocol.api import decode_request, encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.server.quorum.channel import RECONNECT_BACKOFF_MS, NetworkFaults, PeerChannels

DEADLINE_S = 10


def vote(correlation_id: int) -> m.RaftMessage:
    body = m.vote_request("c", VoterKey(1), 3, VoterKey(2), 1, 10, pre_vote=True)
    return m.RaftMessage(1, 2, m.VOTE, correlation_id, body)


async def answer_votes(listener: trio.SocketListener, seen: list[tuple[str | None, int]]) -> None:
    """A peer that grants every vote, recording each request's client id and correlation id."""
    async with listener:
        stream = await listener.accept()
    splitter = FrameSplitter()
    async with stream:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            splitter.feed(data)
            while (frame := splitter.take_frame()) is not None:
                header, _ = decode_request(frame)
                seen.append((header.client_id, header.correlation_id))
                body = m.vote_response(ErrorCode.NONE, 3, -1, True)
                await stream.send_all(encode_response(m.VOTE, header.api_version, header.correlation_id, body))


async def test_a_request_goes_out_with_kafkas_header_and_its_answer_comes_back() -> None:
    received: list[m.RaftMessage] = []
    seen: list[tuple[str | None, int]] = []
    both = trio.Event()

    def deliver(message: m.RaftMessage) -> None:
        received.append(message)
        if len(received) == 2:
            both.set()

    with trio.fail_after(DEADLINE_S):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        channels = PeerChannels(1, {2: ("127.0.0.1", port)}, deliver=deliver)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_votes, listener, seen)
            await nursery.start(channels.run)
            channels.send(vote(7))
            channels.send(vote(8))  # pipelined on the same connection
            await both.wait()
            nursery.cancel_scope.cancel()
    assert seen == [("raft-client-1", 7), ("raft-client-1", 8)]
    assert [(r.source, r.destination, r.correlation_id, r.is_response) for r in received] == [
        (2, 1, 7, True),
        (2, 1, 8, True),
    ]
    assert m.partition_of(received[0].body)["vote_granted"]


async def test_a_peer_that_is_down_is_answered_at_once_and_reached_once_it_is_up() -> None:
    received: list[m.RaftMessage] = []
    seen: list[tuple[str | None, int]] = []
    arrived = trio.Event()

    def deliver(message: m.RaftMessage) -> None:
        received.append(message)
        arrived.set()

    with trio.fail_after(DEADLINE_S):
        probe = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = probe.socket.getsockname()[1]
        await probe.aclose()  # nothing listens there now
        channels = PeerChannels(1, {2: ("127.0.0.1", port)}, deliver=deliver)
        async with trio.open_nursery() as nursery:
            await nursery.start(channels.run)
            channels.send(vote(1))
            await arrived.wait()
            assert received[-1].body["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE
            connection = channels._connections[2]
            assert connection.retry_at_s > trio.current_time()  # the reconnect backoff began
            assert connection.backoff_ms == 2 * RECONNECT_BACKOFF_MS  # and doubles on the next failure
            arrived = trio.Event()
            channels.send(vote(2))
            await arrived.wait()
            assert received[-1].body["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE
            listener = (await trio.open_tcp_listeners(port, host="127.0.0.1"))[0]
            nursery.start_soon(answer_votes, listener, seen)
            correlation_id = 3
            while not seen:  # resent, as the node does after each failure, until the backoff ends
                arrived = trio.Event()
                channels.send(vote(correlation_id))
                await arrived.wait()
                correlation_id += 1
            assert received[-1].body["error_code"] == ErrorCode.NONE
            nursery.cancel_scope.cancel()


def test_isolation_cuts_a_node_off_both_ways_until_healed() -> None:
    faults = NetworkFaults()
    faults.isolate(2)
    assert faults.blocks(1, 2) and faults.blocks(2, 3)
    assert not faults.blocks(1, 3)
    faults.heal()
    assert not faults.blocks(1, 2)
