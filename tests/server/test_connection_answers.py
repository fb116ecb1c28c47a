"""A connection's answers (server/connection.py ``_Answers``): sent in request order whatever
order they become ready in, at once when none waits, with at most ``MAX_WAITING_ANSWERS``
waiting before the connection reads on; a failure while waiting ends the connection. And on a
cluster: a pipelined request is handled while an acks=all produce before it waits for its
replicas, and answered after it."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import trio
import trio.testing

from kafkalike.protocol.api import RequestHeader, decode_response, encode_response
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.records import Record, build_batch
from kafkalike.server.clock import SystemClock
from kafkalike.server.connection import MAX_WAITING_ANSWERS, _Answers, _Later, _Socket
from kafkalike.server.registry import AnswerLater
from kafkalike.testing.cluster import Cluster, NodeThread
from kafkalike.testing.wire_client import WireClient

API_VERSIONS = 18
ANSWER = {"error_code": 0, "api_keys": []}
WAIT_S = 30.0


def later(correlation_id: int, release: trio.Event, fails: bool = False) -> _Later:
    async def answer() -> Mapping[str, Any]:
        await release.wait()
        if fails:
            raise RuntimeError("a handler's bug")
        return ANSWER

    return _Later(RequestHeader(API_VERSIONS, 0, correlation_id, "t"), AnswerLater(answer))


def ready(correlation_id: int) -> bytes:
    return encode_response(API_VERSIONS, 0, correlation_id, ANSWER)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def received(sock: socket.socket) -> list[int]:
    """Correlation ids of the whole frames sent so far."""
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            break
        data += chunk
    ids = []
    while data:
        (size,) = struct.unpack(">i", data[:4])
        ids.append(decode_response(API_VERSIONS, 0, data[4 : 4 + size])[0])
        data = data[4 + size :]
    return ids


async def test_answers_go_in_request_order_whatever_order_they_are_ready_in(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    first, third = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        answers = _Answers(_Socket(ours.fileno()), nursery)
        await answers.send(ready(0))  # none waiting: out at once
        assert received(theirs) == [0]
        await answers.later(later(1, first))
        await answers.send(ready(2))  # ready, but behind 1
        await answers.later(later(3, third))
        third.set()
        await trio.testing.wait_all_tasks_blocked()
        assert received(theirs) == []
        first.set()
        await trio.testing.wait_all_tasks_blocked()
        assert received(theirs) == [1, 2, 3]
        await answers.send(ready(4))  # the queue is empty again: out at once
        assert received(theirs) == [4]
    assert answers.failure is None


async def test_at_most_so_many_answers_wait_before_the_connection_reads_on(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    releases = [trio.Event() for _ in range(MAX_WAITING_ANSWERS + 1)]
    handled: list[int] = []
    async with trio.open_nursery() as nursery:
        answers = _Answers(_Socket(ours.fileno()), nursery)

        async def read_requests() -> None:
            for i, release in enumerate(releases):
                await answers.later(later(i, release))
                handled.append(i)

        nursery.start_soon(read_requests)
        await trio.testing.wait_all_tasks_blocked()
        # The last one taken fills the queue: the connection waits before reading another.
        assert len(handled) == MAX_WAITING_ANSWERS - 1
        releases[0].set()
        await trio.testing.wait_all_tasks_blocked()
        assert received(theirs) == [0] and len(handled) == MAX_WAITING_ANSWERS
        for release in releases:
            release.set()
    assert received(theirs) == list(range(1, MAX_WAITING_ANSWERS + 1))


async def test_a_failure_while_waiting_ends_the_connection(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    fails, never = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        answers = _Answers(_Socket(ours.fileno()), nursery)
        await answers.later(later(1, never))
        await answers.later(later(2, fails, fails=True))
        fails.set()
        await trio.sleep_forever()  # cancelled by the failure
    assert isinstance(answers.failure, ProtocolError)
    assert received(theirs) == []


# -- on a cluster --------------------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as running:
        yield running


def produce_body(topic: str, value: bytes, acks: int) -> dict[str, Any]:
    batch = build_batch([Record(value=value)], base_timestamp=SystemClock().wall_ms())
    return {
        "acks": acks,
        "timeout_ms": int(WAIT_S * 1000),
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }


def test_a_pipelined_request_is_handled_while_an_acks_all_produce_waits(cluster: Cluster) -> None:
    cluster.create_topic("piped", partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    leader_id = cluster.leader("piped", 0)
    leader = cluster.broker(leader_id)
    assert isinstance(leader, NodeThread) and leader.node is not None
    partition = leader.node.broker.replicas[("piped", 0)]
    follower = next(n for n in cluster.node_ids if n not in (leader_id, cluster.active_controller()))
    # Still in the ISR for replica.lag.time.max.ms (30 s): the high watermark waits for it.
    cluster.isolate(follower)
    with WireClient(leader.address.host, leader.address.client_port) as client:
        waits = client.send(0, 9, produce_body("piped", b"acks=all", acks=-1))
        cluster.wait_for(lambda: partition.log_end_offset == 1, "the acks=all batch appended", WAIT_S)
        behind = client.send(0, 9, produce_body("piped", b"acks=1", acks=1))
        # Handled while the first waits (Kafka would read it only after answering the first).
        cluster.wait_for(lambda: partition.log_end_offset == 2, "the pipelined batch appended", WAIT_S)
        assert partition.high_watermark == 0
        cluster.heal()
        answers = []
        for _ in range(2):
            frame = client.receive_frame()
            assert frame is not None
            correlation_id, body = decode_response(0, 9, frame)
            answers.append((correlation_id, ErrorCode(body.responses[0].partition_responses[0].error_code)))
    assert answers == [(waits, ErrorCode.NONE), (behind, ErrorCode.NONE)]
