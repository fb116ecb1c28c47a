"""Requests through the replica layer: a follower refuses with NOT_LEADER_OR_FOLLOWER (a
consumer's fetch only before v11, as Kafka's), the
leader-epoch check answers Kafka's codes for Fetch, ListOffsets and OffsetForLeaderEpoch, and a
waiting fetch is woken by the partition's moves (an append, a role change)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from trio.testing import MockClock

from kafkalike.protocol.errors import ErrorCode as E
from kafkalike.protocol.records import Record, build_batch
from kafkalike.replica import LeaderAndIsr, Partition
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.wire_client import AsyncWireClient
from tests.server.conftest import RunningBroker, serving
from tests.server.test_broker_basics import _create, _fetch_body, _produce_body

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 23
LOCAL_BROKER, OTHER_BROKER = 1, 2
BOUND_S = 10  # a bound on waits that end much sooner; never reached when the broker is right


def _partition(running: RunningBroker, topic: str) -> Partition:
    return running.broker.replicas[(topic, 0)]


def _state(leader: int, epoch: int) -> LeaderAndIsr:
    # The leader alone in the ISR: the other replica, never heard of, holds no high watermark back.
    return LeaderAndIsr(leader, epoch, epoch, (LOCAL_BROKER, OTHER_BROKER), (leader,))


async def _produce(client: AsyncWireClient, topic: str, value: bytes) -> Any:
    answer = await client.request(PRODUCE, 9, _produce_body(topic, 0, build_batch([Record(value=value)])))
    return answer.responses[0].partition_responses[0]


async def _fetch(client: AsyncWireClient, topic: str, epoch: int = -1, max_wait_ms: int = 0, version: int = 12) -> Any:
    body = _fetch_body(topic, 0, 0, max_wait_ms=max_wait_ms)
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch  # type: ignore[index]
    return (await client.request(FETCH, version, body)).responses[0].partitions[0]


async def _list_offsets(client: AsyncWireClient, topic: str, epoch: int = -1) -> Any:
    partition = {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [partition]}]}
    return (await client.request(LIST_OFFSETS, 7, body)).topics[0].partitions[0]


async def _epoch_end(client: AsyncWireClient, topic: str, current_epoch: int, epoch: int) -> Any:
    partition = {"partition": 0, "current_leader_epoch": current_epoch, "leader_epoch": epoch}
    body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [partition]}]}
    return (await client.request(OFFSET_FOR_LEADER_EPOCH, 4, body)).topics[0].partitions[0]


async def test_a_follower_refuses_produce_fetch_and_list_offsets(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "led")).error_code == 0
    assert (await _produce(client, "led", b"before")).error_code == E.NONE
    partition = _partition(running, "led")
    partition.make_follower(_state(leader=OTHER_BROKER, epoch=1), now_ms=0)
    refused = await _produce(client, "led", b"refused")
    assert refused.error_code == E.NOT_LEADER_OR_FOLLOWER
    assert partition.log_end_offset == 1  # nothing appended
    # A consumer's fetch before v11 reads from the leader only; from v11 a follower serves it
    # up to its high watermark (KIP-392, Kafka's fetchOnlyLeader).
    assert (await _fetch(client, "led", version=10)).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert (await _fetch(client, "led")).error_code == E.NONE
    assert (await _list_offsets(client, "led")).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert (await _epoch_end(client, "led", -1, 0)).error_code == E.NOT_LEADER_OR_FOLLOWER
    partition.make_leader(_state(leader=1, epoch=2), now_ms=0)  # led here again, in a new term
    accepted = await _produce(client, "led", b"after")
    assert accepted.error_code == E.NONE and accepted.base_offset == 1
    assert partition.high_watermark == 2


async def test_the_leader_epoch_check_answers_kafkas_codes(running: RunningBroker) -> None:
    client = await running.client()
    assert (await _create(client, "epochs")).error_code == 0
    _partition(running, "epochs").make_leader(_state(leader=1, epoch=3), now_ms=0)
    assert (await _produce(client, "epochs", b"x")).error_code == E.NONE
    for epoch, code in [(2, E.FENCED_LEADER_EPOCH), (4, E.UNKNOWN_LEADER_EPOCH), (3, E.NONE), (-1, E.NONE)]:
        fetched = await _fetch(client, "epochs", epoch)
        assert fetched.error_code == code, epoch
        # Kafka answers an epoch error with unknown offsets, the offsets otherwise.
        assert fetched.high_watermark == (1 if code == E.NONE else -1)
        listed = await _list_offsets(client, "epochs", epoch)
        assert listed.error_code == code and listed.offset == (1 if code == E.NONE else -1)
        ended = await _epoch_end(client, "epochs", epoch, 3)
        assert ended.error_code == code
        if code == E.NONE:
            assert (ended.leader_epoch, ended.end_offset) == (3, 1)
    assert (await _list_offsets(client, "epochs", 3)).leader_epoch == 3


async def test_a_waiting_fetch_wakes_for_an_append_and_for_a_leadership_change(running: RunningBroker) -> None:
    producer, consumer = await running.client(), await running.client()
    assert (await _create(producer, "woken")).error_code == 0
    waiters = running.broker.waiters
    answers: list[Any] = []

    async def long_poll() -> None:
        answers.append(await _fetch(consumer, "woken", max_wait_ms=600_000))

    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await waiters.until_watched(("woken", 0))  # the fetch is waiting
            assert (await _produce(producer, "woken", b"data")).error_code == E.NONE
        assert answers[0].error_code == E.NONE and answers[0].records

        async with trio.open_nursery() as nursery:
            answers.clear()
            body = _fetch_body("woken", 0, 1, max_wait_ms=600_000)  # past the end: it waits

            async def poll_past_the_end() -> None:
                # v10: a consumer that reads from leaders only (from v11 a follower would serve it).
                answers.append((await consumer.request(FETCH, 10, body)).responses[0].partitions[0])

            nursery.start_soon(poll_past_the_end)
            await waiters.until_watched(("woken", 0))
            _partition(running, "woken").make_follower(_state(leader=OTHER_BROKER, epoch=1), now_ms=0)
        assert answers[0].error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_an_unknown_partition_beside_a_known_one_does_not_end_the_wait(
    tmp_path: Path, autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    """As Kafka leaves partitions its metadata does not know out of the read: the fetch waits
    for the known one (to max_wait_ms here), while a failed read (a fenced epoch) ends it at once."""
    async with serving(tmp_path, clock=trio_clock, ephemeral=True) as running:
        client = await running.client()
        assert (await _create(client, "known")).error_code == 0
        body = _fetch_body("known", 0, 0, max_wait_ms=30_000)
        unknown = dict(body["topics"][0]["partitions"][0], partition=7)  # type: ignore[index]
        body["topics"][0]["partitions"].append(unknown)  # type: ignore[index]
        asked = trio.current_time()
        answer = (await client.request(FETCH, 12, body)).responses[0].partitions
        assert 30 <= trio.current_time() - asked < 31
        assert [p.error_code for p in answer] == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = 5  # type: ignore[index]
        asked = trio.current_time()
        answer = (await client.request(FETCH, 12, body)).responses[0].partitions
        assert trio.current_time() - asked < 30  # not at max_wait_ms
        assert [p.error_code for p in answer] == [E.UNKNOWN_LEADER_EPOCH, E.UNKNOWN_TOPIC_OR_PARTITION]
