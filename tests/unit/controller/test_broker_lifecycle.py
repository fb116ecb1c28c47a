"""The broker's lifecycle towards the controller: registration, heartbeat timing, backoff,
catching up, unfencing and controlled shutdown, as Kafka's BrokerLifecycleManager."""

from __future__ import annotations

import random
import uuid
from types import SimpleNamespace
from typing import Any

from kafkalike.controller.broker_lifecycle import (
    BROKER_HEARTBEAT_API,
    BROKER_REGISTRATION_API,
    BrokerLifecycle,
    BrokerState,
    Feature,
    Listener,
    OutboundRequest,
    exponential_backoff_ms,
    java_uuid_order,
)
from kafkalike.protocol.errors import ErrorCode


def lifecycle(**overrides: Any) -> BrokerLifecycle:
    config: dict[str, Any] = {
        "node_id": 3,
        "cluster_id": "c1",
        "incarnation_id": uuid.UUID(int=9),
        "listeners": [Listener("PLAINTEXT", "127.0.0.1", 9095)],
        "features": [Feature("metadata.version", 7, 25)],
        "rng": random.Random(1),
        "log_dirs": [uuid.UUID(int=(2 << 64) | 5), uuid.UUID(int=(1 << 127) | 5)],
        **overrides,
    }
    return BrokerLifecycle(**config)


def registered(epoch: int = 40) -> Any:
    return SimpleNamespace(error_code=ErrorCode.NONE, broker_epoch=epoch)


def hb_reply(**fields: Any) -> Any:
    base = {"error_code": ErrorCode.NONE, "is_caught_up": False, "is_fenced": True, "should_shut_down": False}
    return SimpleNamespace(**{**base, **fields})


def state(life: BrokerLifecycle) -> BrokerState:
    return life.state  # read through a call: each event may change it


def one(life: BrokerLifecycle) -> OutboundRequest:
    (request,) = life.take_requests()
    return request


def test_start_sends_a_registration_with_everything_the_controller_checks() -> None:
    life = lifecycle(previous_broker_epoch=17, rack="r2")
    life.start(0)
    assert life.state == BrokerState.STARTING
    request = one(life)
    assert request.api_key == BROKER_REGISTRATION_API
    body = request.body
    assert (body["broker_id"], body["cluster_id"], body["incarnation_id"]) == (3, "c1", uuid.UUID(int=9))
    assert body["previous_broker_epoch"] == 17 and body["rack"] == "r2"
    assert body["features"] == [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 25}]
    # Kafka sorts the directories by Uuid.compareTo: signed halves, so the high-bit one first.
    assert body["log_dirs"] == [uuid.UUID(int=(1 << 127) | 5), uuid.UUID(int=(2 << 64) | 5)]


def test_a_heartbeat_follows_registration_at_once_then_every_10_ms_until_caught_up() -> None:
    life = lifecycle()
    life.start(0)
    life.take_requests()
    life.on_registration_response(registered(40), 5)
    assert life.poll(5, metadata_offset=12) is None  # the heartbeat left at once; nothing else is due
    assert one(life).api_key == BROKER_HEARTBEAT_API and life.in_flight
    life.on_heartbeat_response(hb_reply(is_caught_up=False), 7)
    assert life.poll(7, 12) == 17  # STARTING: every 10 ms
    life.poll(17, 30)
    body = one(life).body
    assert (body["broker_epoch"], body["current_metadata_offset"], body["want_fence"]) == (40, 30, True)
    life.on_heartbeat_response(hb_reply(is_caught_up=True), 20)
    assert life.state == BrokerState.RECOVERY and life.caught_up


def test_want_fence_until_ready_and_running_once_unfenced() -> None:
    life = running_life()
    assert life.state == BrokerState.RUNNING and life.unfenced_once
    assert life.poll(1000, 50) == 2100  # every heartbeat interval once running
    life.poll(2100, 51)
    body = one(life).body
    assert body["want_fence"] is False and body["want_shut_down"] is False


def running_life() -> BrokerLifecycle:
    life = lifecycle()
    life.start(0)
    life.take_requests()
    life.on_registration_response(registered(40), 0)
    life.poll(0, 40)
    life.take_requests()
    life.on_heartbeat_response(hb_reply(is_caught_up=True), 50)
    life.set_ready_to_unfence(60)
    life.poll(60, 41)
    assert one(life).body["want_fence"] is False
    life.on_heartbeat_response(hb_reply(is_caught_up=True, is_fenced=False), 100)
    return life


def test_failures_back_off_exponentially_up_to_the_session_timeout() -> None:
    rng = random.Random(5)
    delays = [exponential_backoff_ms(n, 9000, rng) for n in range(10)]
    assert all(abs(d - 100 * 2**n) <= 0.02 * 100 * 2**n + 1 for n, d in enumerate(delays[:6]))
    assert delays[-1] == 9000
    life = lifecycle()
    life.start(0)
    life.take_requests()
    life.on_registration_response(SimpleNamespace(error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION), 10)
    first = life.poll(10, -1)
    assert first is not None and 108 <= first <= 112 and life.failed_attempts == 1
    life.poll(first, -1)
    assert one(life).api_key == BROKER_REGISTRATION_API
    life.on_registration_response(None, first + 1)  # no answer: a failure too
    second = life.poll(first + 1, -1)
    assert second is not None and 195 <= second - (first + 1) <= 205
    life.poll(second, -1)
    life.take_requests()
    life.on_registration_response(registered(7), second + 1)
    assert life.failed_attempts == 0 and life.registered


def test_one_request_at_a_time_and_a_due_one_goes_when_the_other_completes() -> None:
    life = running_life()
    life.poll(2100, 60)
    life.take_requests()
    life.begin_controlled_shutdown(2105)  # due now, but a heartbeat is in flight
    life.poll(2105, 60)
    assert life.take_requests() == []
    life.on_heartbeat_response(hb_reply(is_caught_up=True, is_fenced=False), 2200)
    assert life.poll(2200, 61) is None or life.in_flight
    body = one(life).body
    assert body["want_shut_down"] is True


def test_controlled_shutdown_waits_for_the_controller() -> None:
    life = running_life()
    life.begin_controlled_shutdown(200)
    assert life.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
    life.poll(200, 60)
    assert one(life).body["want_shut_down"] is True
    life.on_heartbeat_response(hb_reply(is_caught_up=True, is_fenced=False), 210)
    assert life.poll(210, 60) == 260  # 50 ms until the first answer in this state
    life.poll(260, 60)
    one(life)
    life.on_heartbeat_response(hb_reply(is_caught_up=True, is_fenced=False), 270)
    assert life.poll(270, 60) == 2270
    life.poll(2270, 60)
    one(life)
    life.on_heartbeat_response(hb_reply(is_caught_up=True, is_fenced=True, should_shut_down=True), 2280)
    assert state(life) == BrokerState.SHUTTING_DOWN and life.poll(2280, 60) is None


def test_shutdown_before_running_is_immediate() -> None:
    life = lifecycle()
    life.start(0)
    life.begin_controlled_shutdown(5)
    assert life.state == BrokerState.SHUTTING_DOWN


def test_no_registration_within_the_initial_timeout_shuts_the_broker_down() -> None:
    life = lifecycle(initial_registration_timeout_ms=1000)
    life.start(0)
    life.take_requests()
    life.on_registration_response(None, 100)
    deadline = life.poll(100, -1)
    assert deadline is not None and deadline < 1000
    assert life.poll(1000, -1) is None and life.state == BrokerState.SHUTTING_DOWN


def test_a_lost_registration_is_sent_again() -> None:
    life = running_life()
    life.resend_registration(500)
    life.poll(500, 60)
    assert one(life).api_key == BROKER_REGISTRATION_API
    life.on_registration_response(registered(90), 510)
    life.poll(510, 89)
    body = one(life).body
    assert body["broker_epoch"] == 90 and body["want_fence"] is False


def test_kafka_uuid_order_is_signed() -> None:
    high = uuid.UUID(int=1 << 127)
    low = uuid.UUID(int=1)
    assert sorted([low, high], key=java_uuid_order) == [high, low]
