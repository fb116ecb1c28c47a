"""The broker's channel to the active controller: in process when the controller is this node,
over the CONTROLLER listener otherwise; following the leader through NOT_CONTROLLER and a
controller that stops; REQUEST_TIMED_OUT once its deadline passes without one."""

from __future__ import annotations

import math

import pytest
import trio
from trio.testing import MockClock

from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.controller_channel import ControllerChannel, ControllerUnavailable
from kafkalike.server.controller_host import ControllerRequestContext
from kafkalike.testing.clock import TrioClock
from kafkalike.testing.controller_quorum import ControllerQuorum
from kafkalike.testing.controller_requests import heartbeat, registration
from kafkalike.testing.quorum import CLUSTER_ID

DEADLINE_S = 30


def create_topics(*names: str) -> dict[str, object]:
    topics = [
        {"name": n, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []} for n in names
    ]
    return {"topics": topics, "timeout_ms": 5000, "validate_only": False}


def endpoints(quorum: ControllerQuorum) -> dict[int, tuple[str, int]]:
    return {node_id: ("127.0.0.1", quorum.port(node_id)) for node_id in quorum.voter_ids}


async def register_unfenced(channel: ControllerChannel, broker_id: int) -> None:
    """A broker registered and out of fencing, so that topics have somewhere to go."""
    registered = await channel.request(62, 4, registration(broker_id, CLUSTER_ID))
    assert registered.error_code == 0, registered
    beat = await channel.request(63, 1, heartbeat(broker_id, registered.broker_epoch, 2**40))
    assert beat.error_code == 0 and not beat.is_fenced, beat


class PinnedLeader:
    """A leader source that names ``wrong`` until asked past it, then ``right``."""

    def __init__(self, wrong: int, right: int) -> None:
        self.answers = [wrong, right]
        self.asked = 0
        self.moved = trio.Event()

    @property
    def leader_id(self) -> int:
        self.asked += 1
        return self.answers[0] if self.asked <= 1 else self.answers[1]

    async def changed(self) -> None:
        await trio.sleep(0)


class NoLeader:
    leader_id = -1

    async def changed(self) -> None:
        await trio.sleep(math.inf)


async def test_the_local_controller_is_asked_in_process() -> None:
    quorum = ControllerQuorum(1)
    async with quorum.running(deadline_s=DEADLINE_S):
        host = await quorum.active_host()
        channel = ControllerChannel(
            1, quorum.driver(1), endpoints(quorum), local=host, local_context=ControllerRequestContext
        )
        await register_unfenced(channel, 1)
        response = await channel.request(19, 7, create_topics("orders"))
        (topic,) = response.topics
        assert (topic.name, topic.error_code, topic.num_partitions) == ("orders", 0, 2)
        assert host.image.topic("orders") is not None
        assert (channel.answered_locally, channel.sent_over_network) == (3, 0)


async def test_a_remote_controller_is_followed_through_its_failure() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        first = await quorum.active_host()
        follower = next(n for n in quorum.voter_ids if n != first.node_id)
        # A broker-only node (id 100) follows the leader as the follower's driver sees it.
        channel = ControllerChannel(100, quorum.driver(follower), endpoints(quorum))
        await register_unfenced(channel, 100)
        response = await channel.request(19, 7, create_topics("a"))
        assert response.topics[0].error_code == 0
        assert channel.sent_over_network == 3

        await quorum.stop(first.node_id)
        # Asked at once: the old leader refuses the connection, or is still named until a new
        # one is elected; the channel waits for it and asks again.
        response = await channel.request(19, 7, create_topics("b"))
        assert response.topics[0].error_code == 0
        assert channel.retries >= 1
        second = await quorum.active_host({n for n in quorum.voter_ids if n != first.node_id})
        assert second.image.topic("b") is not None
        await channel.aclose()


async def test_not_controller_sends_the_request_again_to_the_new_leader() -> None:
    quorum = ControllerQuorum(3)
    async with quorum.running(deadline_s=DEADLINE_S):
        active = await quorum.active_host()
        standby = next(n for n in quorum.voter_ids if n != active.node_id)
        leader = PinnedLeader(wrong=standby, right=active.node_id)
        other = ControllerChannel(101, quorum.driver(active.node_id), endpoints(quorum))
        await register_unfenced(other, 101)
        await other.aclose()
        channel = ControllerChannel(100, leader, endpoints(quorum))
        response = await channel.request(19, 7, create_topics("c"))
        assert response.topics[0].error_code == 0
        # The standby answered NOT_CONTROLLER first (the negative control: without the retry
        # this request's answer would carry that error).
        assert channel.retries == 1 and channel.sent_over_network == 2
        await channel.aclose()


async def test_no_controller_before_the_deadline_is_request_timed_out(
    autojump_clock: MockClock, trio_clock: TrioClock
) -> None:
    channel = ControllerChannel(1, NoLeader(), {}, clock=trio_clock, request_timeout_ms=30_000)
    start = trio.current_time()
    with pytest.raises(ControllerUnavailable) as caught:
        await channel.request(19, 7, create_topics("d"))
    assert caught.value.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert trio.current_time() - start == pytest.approx(30.0)
