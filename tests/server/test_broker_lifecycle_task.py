"""The broker's registration and heartbeats run over a stand-in controller channel on trio's MockClock:
registration with the broker's own listeners, rack, features and log directories; heartbeats at
the machine's pace and then every ``broker.heartbeat.interval.ms``; unfenced only once caught up;
controlled shutdown, approved or bounded by its deadline; a controller that stops answering
mid-heartbeat replaced by another; a registration nobody answers ends start-up."""

from __future__ import annotations

import itertools
import math
import random
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from kafkalike.controller.broker_lifecycle import BrokerState, Listener
from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.broker_lifecycle_task import (
    DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_S,
    REQUEST_VERSIONS,
    BrokerLifecycleFailed,
    BrokerLifecycleTask,
    lifecycle_from_config,
    supported_features,
)
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerUnavailable
from kafkalike.server.node import Node
from kafkalike.testing.clock import TrioClock

REGISTRATION, HEARTBEAT = 62, 63
CLUSTER = "cluster-of-tests"
LOG_DIRS = [uuid.UUID(int=(7 << 64) | 2), uuid.UUID(int=(3 << 64) | 1)]
LISTENERS = [Listener("PLAINTEXT", "127.0.0.1", 19092, 0), Listener("INTERNAL", "127.0.0.1", 19094, 0)]
BOUND_S = 600  # every wait here ends much sooner on the mock clock; this only bounds a broken run


@dataclass
class Sent:
    at_ms: int
    controller: str
    api_key: int
    body: Message


@dataclass
class StandInControllers:
    """Controllers sharing one replicated state (as the metadata log would): the active one answers
    BrokerRegistration and BrokerHeartbeat as Kafka's does for a single broker. Every request and
    answer goes through the real codec."""

    active: str = "A"
    caught_up_offset: int = 40  # the controller's offset of the broker's registration
    approve_shutdown_after: int | None = 2  # want_shut_down heartbeats before should_shut_down
    hang: set[str] = field(default_factory=set)  # controllers that never answer (stopped processes)
    unreachable: bool = False
    sent: list[Sent] = field(default_factory=list)
    broker_epoch: int = -1
    fenced: bool = True
    shutdown_asks: int = 0

    async def request(self, api_key: int, version: int, body: Any, *, timeout_ms: int | None = None) -> Message:
        header = RequestHeader(api_key, version, len(self.sent), "broker-1-to-controller")
        _, decoded = decode_request(memoryview(encode_request(header, body))[4:])
        controller = self.active
        self.sent.append(Sent(int(trio.current_time() * 1000), controller, api_key, decoded))
        with trio.move_on_after((timeout_ms or 30_000) / 1000):  # the channel's deadline
            if self.unreachable or controller in self.hang:
                await trio.sleep(math.inf)
            answer = self._answer(api_key, decoded)
            frame = encode_response(api_key, version, header.correlation_id, answer)
            return decode_response(api_key, version, memoryview(frame)[4:])[1]
        raise ControllerUnavailable(f"no active controller answered {api_key}")

    def _answer(self, api_key: int, body: Message) -> dict[str, Any]:
        if api_key == REGISTRATION:
            self.broker_epoch = 100 + len(self.sent)
            self.fenced = True
            return {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": self.broker_epoch}
        if body.broker_epoch != self.broker_epoch:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "should_shut_down": False}
        caught_up = body.current_metadata_offset >= self.caught_up_offset
        if caught_up and not body.want_fence:
            self.fenced = False
        should_shut_down = False
        if body.want_shut_down:
            self.shutdown_asks += 1
            self.fenced = True
            limit = self.approve_shutdown_after
            should_shut_down = limit is not None and self.shutdown_asks >= limit
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "is_caught_up": caught_up,
            "is_fenced": self.fenced,
            "should_shut_down": should_shut_down,
        }

    def heartbeats(self, controller: str | None = None) -> list[Sent]:
        return [s for s in self.sent if s.api_key == HEARTBEAT and controller in (None, s.controller)]


def _gaps(sent: list[Sent]) -> list[int]:
    """Milliseconds between successive requests."""
    return [b.at_ms - a.at_ms for a, b in itertools.pairwise(sent)]


def _config(**overrides: str) -> BrokerConfig:
    return BrokerConfig(
        {"node.id": "1", "broker.rack": "rack-a", **{k.replace("_", "."): v for k, v in overrides.items()}}
    )


def _task(controllers: StandInControllers, offset: list[int], **overrides: str) -> BrokerLifecycleTask:
    lifecycle = lifecycle_from_config(
        _config(**overrides), cluster_id=CLUSTER, listeners=LISTENERS, log_dirs=LOG_DIRS, rng=random.Random(1)
    )
    return BrokerLifecycleTask(lifecycle, controllers, TrioClock(), lambda: offset[0])


async def test_registers_then_heartbeats_at_the_interval_and_is_unfenced_once_caught_up(
    autojump_clock: MockClock,
) -> None:
    controllers = StandInControllers()
    offset = [10]  # behind the controller's 40
    task = _task(controllers, offset)
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await trio.sleep(1)
            # Registered; heartbeats every 10 ms while STARTING, and not caught up yet.
            (registration,) = [s for s in controllers.sent if s.api_key == REGISTRATION]
            assert registration.body.broker_id == 1 and registration.body.cluster_id == CLUSTER
            assert [(x.name, x.port) for x in registration.body.listeners] == [
                ("PLAINTEXT", 19092),
                ("INTERNAL", 19094),
            ]
            assert registration.body.rack == "rack-a"
            assert registration.body.log_dirs == sorted(LOG_DIRS)  # Kafka's Uuid order: both halves signed
            assert {f.name for f in registration.body.features} >= {"metadata.version", "kraft.version"}
            assert registration.body.incarnation_id == task.lifecycle.incarnation_id
            beats = controllers.heartbeats()
            assert 90 <= len(beats) <= 101
            assert set(_gaps(beats)) == {10}
            assert all(b.body.want_fence and b.body.current_metadata_offset == 10 for b in beats)
            assert task.state == BrokerState.STARTING and not task.caught_up.is_set()

            offset[0] = 40  # the node has applied the log up to the registration

            async def first_publish() -> None:
                assert task.caught_up.is_set()  # Kafka waits for the controller first

            await task.startup(first_publish)
            assert task.state == BrokerState.RUNNING and not controllers.fenced
            start = len(controllers.heartbeats())
            await trio.sleep(20)
            running = controllers.heartbeats()[start:]
            assert _gaps(running) == [2000] * (len(running) - 1)
            assert 9 <= len(running) <= 11
            assert not any(b.body.want_fence for b in running)
            nursery.cancel_scope.cancel()


async def test_controlled_shutdown_waits_for_the_controller_then_stops(autojump_clock: MockClock) -> None:
    controllers = StandInControllers(caught_up_offset=0, approve_shutdown_after=3)
    task = _task(controllers, [0])
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            began_ms = int(trio.current_time() * 1000)
            assert await task.controlled_shutdown(timeout_s=60)
            asks = [b for b in controllers.heartbeats() if b.body.want_shut_down]
            assert len(asks) == 3 and controllers.shutdown_asks == 3
            # The first at once, the second 50 ms after the first answer, then the interval.
            assert [a.at_ms - began_ms for a in asks] == [0, 50, 2050]
            sent = len(controllers.sent)
            await trio.sleep(30)
            assert len(controllers.sent) == sent  # nothing more once the controller let it go
            assert task.state == BrokerState.SHUTTING_DOWN
        # run() returned on its own: the nursery closed without a cancel.


async def test_controlled_shutdown_is_bounded_by_its_deadline(autojump_clock: MockClock) -> None:
    controllers = StandInControllers(caught_up_offset=0, approve_shutdown_after=None)
    task = _task(controllers, [0])
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            began = trio.current_time()
            assert not await task.controlled_shutdown(timeout_s=7)
            assert trio.current_time() - began == pytest.approx(7)
            sent = len(controllers.sent)
            await trio.sleep(30)
            assert len(controllers.sent) == sent


async def test_a_controlled_shutdown_cut_short_by_the_caller_still_stops_the_heartbeats(
    autojump_clock: MockClock,
) -> None:
    controllers = StandInControllers(caught_up_offset=0, approve_shutdown_after=None)
    task = _task(controllers, [0])
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            with trio.move_on_after(5):  # the node's own bound, shorter than the task's
                await task.controlled_shutdown(timeout_s=300)
            await task.stopped.wait()
            sent = len(controllers.sent)
            await trio.sleep(30)
            assert len(controllers.sent) == sent and task.state == BrokerState.SHUTTING_DOWN


def _node_with(task: BrokerLifecycleTask) -> Any:
    """What ``Node._shut_down`` reads of a node: its broker (the task's controlled shutdown) and no quorum driver."""
    return SimpleNamespace(broker=SimpleNamespace(controlled_shutdown=task.controlled_shutdown), driver=None)


async def test_a_nodes_graceful_stop_waits_for_an_approval_that_comes_late(autojump_clock: MockClock) -> None:
    """Kafka's BrokerServer.shutdown() waits for the controller's answer up to its five-minute
    deadline; the node puts no shorter bound of its own on it (it used to give up after 5 s)."""
    controllers = StandInControllers(caught_up_offset=0, approve_shutdown_after=20)  # ~38 s of heartbeats
    task = _task(controllers, [0])
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            began = trio.current_time()
            await Node._shut_down(_node_with(task))
            assert task.shutdown_approved and controllers.shutdown_asks == 20
            assert 30 < trio.current_time() - began < 60


async def test_a_nodes_graceful_stop_without_an_approval_ends_at_kafkas_deadline(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """No approval (no quorum to give it): heartbeats asking to shut down go on until the
    five-minute deadline, then Kafka's error line, and nothing more is sent."""
    controllers = StandInControllers(caught_up_offset=0, approve_shutdown_after=None)
    task = _task(controllers, [0])
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            began = trio.current_time()
            await Node._shut_down(_node_with(task))
            assert trio.current_time() - began == pytest.approx(DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_S)
            assert not task.shutdown_approved and task.state == BrokerState.SHUTTING_DOWN
            asks = [b for b in controllers.heartbeats() if b.body.want_shut_down]
            assert asks[-1].at_ms - asks[0].at_ms > 290_000  # still asking long after 5 s
            assert "timed out waiting for the controller to approve controlled shutdown" in caplog.text
            sent = len(controllers.sent)
            await trio.sleep(30)
            assert len(controllers.sent) == sent


async def test_a_controller_that_stops_mid_heartbeat_is_replaced_by_the_new_one(autojump_clock: MockClock) -> None:
    controllers = StandInControllers(caught_up_offset=0)
    task = _task(controllers, [0], broker_session_timeout_ms="9000")
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            await trio.sleep(5)
            controllers.hang.add("A")  # A stops (SIGSTOP): the next heartbeat gets no answer
            before = len(controllers.heartbeats("A"))
            await trio.sleep(2.5)
            (stuck,) = controllers.heartbeats("A")[before:]
            controllers.active = "B"  # a new controller is elected meanwhile
            await trio.sleep(10)
            on_b = controllers.heartbeats("B")
            # Each request waits half the session timeout (4.5 s), then the machine backs off
            # (100 ms +-2%) and sends again: to B, with the same broker epoch, and stays unfenced.
            assert 4500 + 98 <= on_b[0].at_ms - stuck.at_ms <= 4500 + 102
            assert {b.body.broker_epoch for b in on_b} == {controllers.broker_epoch}
            assert _gaps(on_b) == [2000] * (len(on_b) - 1)
            assert task.state == BrokerState.RUNNING and not controllers.fenced
            nursery.cancel_scope.cancel()


async def test_start_up_fails_when_no_controller_answers_the_registration(autojump_clock: MockClock) -> None:
    controllers = StandInControllers(unreachable=True)
    task = _task(controllers, [0], initial_broker_registration_timeout_ms="20000")
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            with pytest.raises(BrokerLifecycleFailed):
                await task.startup()
            assert trio.current_time() == pytest.approx(20, abs=0.01)
            assert task.state == BrokerState.SHUTTING_DOWN
    assert {s.api_key for s in controllers.sent} == {REGISTRATION}  # retried with backoff, never heartbeating
    assert len(controllers.sent) >= 3


def test_the_broker_supports_what_its_own_bootstrap_finalizes() -> None:
    from kafkalike.controller.features import LATEST_PRODUCTION, feature_levels

    supported = {f.name: (f.min_version, f.max_version) for f in supported_features()}
    for dynamic in (False, True):
        for name, level in feature_levels(LATEST_PRODUCTION, dynamic_quorum=dynamic).items():
            low, high = supported[name]
            assert low <= level <= high, name
    assert REQUEST_VERSIONS == {REGISTRATION: 4, HEARTBEAT: 1}


async def test_a_registration_without_log_directories_is_sent_again(autojump_clock: MockClock) -> None:
    """Kafka's BrokerRegistrationTracker: from metadata.version 3.7-IV2 a registration must list the
    log directories; one the image shows without them (written before the version rose) is resent."""
    from types import SimpleNamespace

    from kafkalike.controller.features import LEVELS_BY_NAME
    from kafkalike.controller.image import BrokerRegistration, MetadataImage

    controllers = StandInControllers(caught_up_offset=0)
    task = _task(controllers, [0])

    def registrations() -> int:
        return sum(1 for s in controllers.sent if s.api_key == REGISTRATION)

    def image(level: int, directories: tuple[uuid.UUID, ...]) -> MetadataImage:
        registered = BrokerRegistration(1, task.broker_epoch, task.lifecycle.incarnation_id, directories=directories)
        return MetadataImage(metadata_version=level, brokers={1: registered})

    changed = SimpleNamespace(changed_brokers={1: None})
    unchanged = SimpleNamespace(changed_brokers={})
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(task.run)
            await task.startup()
            assert registrations() == 1
            task.on_metadata_update(changed, image(LEVELS_BY_NAME["3.7-IV1"], ()))  # type: ignore[arg-type]
            task.on_metadata_update(changed, image(LEVELS_BY_NAME["3.7-IV2"], tuple(LOG_DIRS)))  # type: ignore[arg-type]
            task.on_metadata_update(unchanged, image(LEVELS_BY_NAME["3.7-IV2"], ()))  # type: ignore[arg-type]
            await trio.sleep(1)
            assert registrations() == 1  # too old a version, directories present, nothing changed
            task.on_metadata_update(changed, image(LEVELS_BY_NAME["3.7-IV2"], ()))  # type: ignore[arg-type]
            await trio.sleep(1)
            assert registrations() == 2 and task.state == BrokerState.RUNNING
            nursery.cancel_scope.cancel()
