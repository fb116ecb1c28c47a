"""A broker's producer id blocks as Kafka's RPCProducerIdManager keeps them: ids are handed out
without waiting; the id at 90% of a block asks for the next one in the background; a call that
finds no id left asks for a block and is answered COORDINATOR_LOAD_IN_PROGRESS at once; one
request at a time, an error answer holds the next one back 50 ms, no answer holds nothing back.
The driver (``ClusterController.run_producer_ids``) runs on trio's MockClock against a controller
that answers only when the test lets it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.cluster_metadata import ClusterController
from kafkalike.server.controller_channel import ControllerUnavailable
from kafkalike.server.producer_ids import RETRY_BACKOFF_MS, NoProducerId, ProducerIdBlock, ProducerIdManager
from kafkalike.testing.clock import TrioClock

E = ErrorCode


def test_the_first_call_asks_for_a_block_and_is_answered_load_in_progress() -> None:
    ids = ProducerIdManager()
    with pytest.raises(NoProducerId) as refused:
        ids.generate(0)
    assert refused.value.code is E.COORDINATOR_LOAD_IN_PROGRESS
    assert ids.take_request() and not ids.take_request()  # asked once
    with pytest.raises(NoProducerId):
        ids.generate(1)
    assert not ids.take_request()  # one request in flight: not asked again
    ids.on_response(E.NONE, 1000, 10, 2)
    assert [ids.generate(3) for _ in range(3)] == [1000, 1001, 1002]


def test_the_id_at_ninety_percent_asks_for_the_next_block_and_the_current_one_is_used_first() -> None:
    ids = ProducerIdManager()
    with pytest.raises(NoProducerId):
        ids.generate(0)
    assert ids.take_request()
    ids.on_response(E.NONE, 1000, 100, 0)
    assert [ids.generate(0) for _ in range(90)] == list(range(1000, 1090)) and not ids.take_request()
    assert ids.generate(0) == 1090 and ids.take_request()  # first + 90% of the size: asked
    ids.on_response(E.NONE, 5000, 100, 0)
    assert [ids.generate(0) for _ in range(9)] == list(range(1091, 1100))  # the current block to its end first
    assert ids.generate(0) == 5000 and ids.current == ProducerIdBlock(5000, 100) and ids.following is None
    assert not ids.take_request()


def test_an_error_answer_holds_the_next_request_back_and_no_answer_does_not() -> None:
    ids = ProducerIdManager()
    with pytest.raises(NoProducerId):
        ids.generate(0)
    assert ids.take_request()
    ids.on_response(E.STALE_BROKER_EPOCH, -1, 0, 100)
    with pytest.raises(NoProducerId):
        ids.generate(100 + RETRY_BACKOFF_MS - 1)
    assert not ids.take_request()  # backing off
    with pytest.raises(NoProducerId):
        ids.generate(100 + RETRY_BACKOFF_MS)
    assert ids.take_request()
    ids.on_no_answer()
    with pytest.raises(NoProducerId):
        ids.generate(100 + RETRY_BACKOFF_MS)
    assert ids.take_request()  # at once after a timeout


def test_a_block_that_does_not_follow_the_current_one_is_refused() -> None:
    ids = ProducerIdManager()
    with pytest.raises(NoProducerId):
        ids.generate(0)
    ids.take_request()
    ids.on_response(E.NONE, 1000, 10, 0)
    for _ in range(10):
        ids.generate(0)
    assert ids.take_request()
    ids.on_response(E.NONE, 1005, 10, 0)  # overlaps the current block
    assert ids.following is None and not ids.request_in_flight


def test_ids_over_many_blocks_are_never_repeated() -> None:
    ids = ProducerIdManager()
    given: list[int] = []
    next_start, refusals = 0, 0
    for now in range(5000):
        try:
            given.append(ids.generate(now))
        except NoProducerId:
            refusals += 1
        if ids.take_request():
            ids.on_response(E.NONE, next_start, 100, now)
            next_start += 100
    assert refusals == 1  # only the very first call: every later block came ahead of need
    assert len(set(given)) == len(given) == 4999 and given == sorted(given)


class HeldController:
    """A controller channel whose AllocateProducerIds answers wait for ``answer``."""

    def __init__(self) -> None:
        self.asked = 0
        self.answers: trio.MemorySendChannel[Any]
        self.answers, self._answers = trio.open_memory_channel[Any](10)
        self.next_start = 0

    async def request(self, api_key: int, version: int, body: Any, *, timeout_ms: int | None = None) -> Message:
        assert api_key == 67 and body["broker_id"] == 7
        self.asked += 1
        answer = await self._answers.receive()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def block(self, size: int = 10, error: ErrorCode = E.NONE) -> Message:
        start, self.next_start = self.next_start, self.next_start + size
        return SimpleNamespace(error_code=int(error), producer_id_start=start, producer_id_len=size)


async def _until(condition: Any) -> None:
    """Every task blocked again (the sender waiting for the controller or for a new ask), then ``condition``."""
    await wait_all_tasks_blocked()
    assert condition()


async def test_calls_never_wait_for_the_controller(autojump_clock: MockClock) -> None:
    channel = HeldController()
    cluster = ClusterController(7, channel, None, TrioClock(), lambda: None)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cluster.run_producer_ids)
        with pytest.raises(NoProducerId):
            cluster.allocate_producer_id()  # nothing yet: asked in the background
        await _until(lambda: channel.asked == 1)
        with pytest.raises(NoProducerId):
            cluster.allocate_producer_id()  # still on its way: no second request
        await channel.answers.send(channel.block())
        await _until(lambda: cluster.producer_ids.has_id())
        before = trio.current_time()
        taken = [cluster.allocate_producer_id() for _ in range(10)]  # the 10th (90% of 10) asks for the next block
        assert taken == list(range(10)) and trio.current_time() == before  # none waited
        await _until(lambda: channel.asked == 2)
        with pytest.raises(NoProducerId):
            cluster.allocate_producer_id()  # block used up, the next one not answered yet
        await channel.answers.send(ControllerUnavailable("no controller"))
        await _until(lambda: not cluster.producer_ids.request_in_flight)
        with pytest.raises(NoProducerId):
            cluster.allocate_producer_id()  # asks again at once after no answer
        await _until(lambda: channel.asked == 3)
        await channel.answers.send(channel.block())
        await _until(lambda: cluster.producer_ids.has_id())
        assert cluster.allocate_producer_id() == 10
        nursery.cancel_scope.cancel()
    assert channel.asked == 3
