"""The peer channel alone: Kafka's request bytes to a listening peer and the answer back by
correlation id; each connection asks ApiVersions first and sends a peer of an older release the
versions it reads; a peer that is down answered at once with BROKER_NOT_AVAILABLE (and tried again
after a doubling reconnect backoff); a peer that comes up is reached; isolate/heal."""

from __future__ import annotations

import trio

from kafkalike.protocol.api import API_VERSIONS_KEY, decode_request, encode_response
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.raft import messages as m
from kafkalike.raft.config import VoterKey
from kafkalike.server.quorum.channel import RECONNECT_BACKOFF_MS, NetworkFaults, PeerChannels

DEADLINE_S = 10


def vote(correlation_id: int) -> m.RaftMessage:
    body = m.vote_request("c", VoterKey(1), 3, VoterKey(2), 1, 10, pre_vote=True)
    return m.RaftMessage(1, 2, m.VOTE, correlation_id, body)


def fetch(correlation_id: int) -> m.RaftMessage:
    body = m.fetch_request("c", VoterKey(1), 3, 10, 2, 0, 1024, high_watermark=7)
    return m.RaftMessage(1, 2, m.FETCH, correlation_id, body)


async def answer_votes(
    listener: trio.SocketListener,
    seen: list[tuple[str | None, int]],
    versions: dict[int, int] | None = None,
    requests: list[tuple[int, int, object]] | None = None,
) -> None:
    """A peer that answers ApiVersions (each quorum API up to ``versions``, by default ours), grants
    every vote and answers every fetch empty, recording each quorum request's client id and
    correlation id (and in ``requests`` its api key, version and body)."""
    table = {**m.API_VERSIONS, **(versions or {})}
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
                header, request = decode_request(frame)
                if header.api_key == API_VERSIONS_KEY:
                    keys = [{"api_key": k, "min_version": 0, "max_version": v} for k, v in sorted(table.items())]
                    body: dict = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
                elif header.api_key == m.FETCH:
                    body = m.fetch_response(ErrorCode.NONE, 3, 2, 5, 0)
                else:
                    body = m.vote_response(ErrorCode.NONE, 3, -1, True)
                if header.api_key != API_VERSIONS_KEY:
                    seen.append((header.client_id, header.correlation_id))
                    if requests is not None:
                        requests.append((header.api_key, header.api_version, request))
                frame_out = encode_response(header.api_key, header.api_version, header.correlation_id, body)
                await stream.send_all(frame_out)


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


async def exchange(messages: list[m.RaftMessage], versions: dict[int, int]) -> list[tuple[int, int, object]]:
    """Send ``messages`` to a peer that reads the quorum APIs up to ``versions``: what it got."""
    received: list[m.RaftMessage] = []
    requests: list[tuple[int, int, object]] = []
    done = trio.Event()

    def deliver(message: m.RaftMessage) -> None:
        received.append(message)
        if len(received) == len(messages):
            done.set()

    with trio.fail_after(DEADLINE_S):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        channels = PeerChannels(1, {2: ("127.0.0.1", port)}, deliver=deliver)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_votes, listener, [], versions, requests)
            await nursery.start(channels.run)
            for message in messages:
                channels.send(message)
            await done.wait()
            nursery.cancel_scope.cancel()
    assert all(r.body.get("error_code", 0) == ErrorCode.NONE for r in received)
    assert m.partition_of(received[-1].body)["high_watermark"] == 5
    return requests


async def test_fetch_goes_at_v18_with_the_known_high_watermark() -> None:
    ((api_key, version, body),) = await exchange([fetch(4)], {})
    assert (api_key, version) == (m.FETCH, 18)
    assert m.partition_of(body)["high_watermark"] == 7  # type: ignore[arg-type]


async def test_a_peer_without_fetch_v18_is_sent_v17() -> None:
    """As a Kafka 4.0 voter: it reads Fetch up to v17, which has no high watermark field."""
    ((api_key, version, body),) = await exchange([fetch(4)], {m.FETCH: 17})
    assert (api_key, version) == (m.FETCH, 17)
    assert m.fetch_high_watermark(m.partition_of(body)) == m.UNKNOWN_HIGH_WATERMARK  # type: ignore[arg-type]


def test_isolation_cuts_a_node_off_both_ways_until_healed() -> None:
    faults = NetworkFaults()
    faults.isolate(2)
    assert faults.blocks(1, 2) and faults.blocks(2, 3)
    assert not faults.blocks(1, 3)
    faults.heal()
    assert not faults.blocks(1, 2)
