"""A broker's side of registration and heartbeats (pure): Kafka's ``BrokerLifecycleManager``.

Events in (``start``, responses, ``set_ready_to_unfence``, ``begin_controlled_shutdown``,
``resend_registration``), requests out (``take_requests``), ``poll(now_ms, metadata_offset)``
gives the next deadline. The caller sends each request to the active controller and hands its
response back (None when it failed or timed out). One request is in flight at a time.

States (Kafka's BrokerState): NOT_RUNNING -> STARTING (registering, then heartbeating until the
controller says it has caught up with the metadata log) -> RECOVERY (caught up, fenced, until
unfenced) -> RUNNING; ``begin_controlled_shutdown`` from RUNNING -> PENDING_CONTROLLED_SHUTDOWN
(heartbeats with want_shut_down) -> SHUTTING_DOWN when the controller says should_shut_down
(from any other state it shuts down at once). Not registered within
``initial.broker.registration.timeout.ms`` -> SHUTTING_DOWN.

Timing as Kafka: a heartbeat right after registering; every 10 ms while STARTING; every 50 ms
until the first reply in PENDING_CONTROLLED_SHUTDOWN; else every
``broker.heartbeat.interval.ms``. A failure (error code, no response) backs off exponentially
from 100 ms, doubling, up to the session timeout, with 2% jitter; success resets it. A
communication due while one is in flight is sent as soon as that one completes. Heartbeats ask
to stay fenced (``want_fence``) until ``set_ready_to_unfence``.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kafkalike.configs import declared_int
from kafkalike.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

BROKER_REGISTRATION_API = 62
BROKER_HEARTBEAT_API = 63
DEFAULT_HEARTBEAT_INTERVAL_MS = declared_int("broker.heartbeat.interval.ms")
DEFAULT_SESSION_TIMEOUT_MS = declared_int("broker.session.timeout.ms")
DEFAULT_INITIAL_REGISTRATION_TIMEOUT_MS = declared_int("initial.broker.registration.timeout.ms")
STARTING_HEARTBEAT_MS = 10
FIRST_SHUTDOWN_HEARTBEAT_MS = 50
BACKOFF_INITIAL_MS = 100
BACKOFF_MULTIPLIER = 2
BACKOFF_JITTER = 0.02


class BrokerState(IntEnum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    api_key: int
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int = 0


def java_uuid_order(u: uuid.UUID) -> tuple[int, int]:
    """Kafka's Uuid.compareTo: the two halves compared as signed 64-bit numbers."""

    def signed(v: int) -> int:
        return v - (1 << 64) if v >> 63 else v

    return signed(u.int >> 64), signed(u.int & ((1 << 64) - 1))


def exponential_backoff_ms(attempts: int, max_ms: int, rng: random.Random) -> int:
    """Kafka's ExponentialBackoff(100, 2, max, 0.02).backoff(attempts)."""
    exp_max = math.log(max_ms / BACKOFF_INITIAL_MS) / math.log(BACKOFF_MULTIPLIER) if max_ms > BACKOFF_INITIAL_MS else 0
    term = BACKOFF_INITIAL_MS * BACKOFF_MULTIPLIER ** min(attempts, exp_max)
    value = int(rng.uniform(1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER) * term)
    return min(value, max_ms)


@dataclass
class BrokerLifecycle:
    """One broker's lifecycle towards the controller. Plain object; time comes in as ``now_ms``."""

    node_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: Sequence[Listener]
    features: Sequence[Feature]
    rng: random.Random
    rack: str | None = None
    log_dirs: Sequence[uuid.UUID] = ()
    previous_broker_epoch: int = -1
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    initial_registration_timeout_ms: int = DEFAULT_INITIAL_REGISTRATION_TIMEOUT_MS

    state: BrokerState = BrokerState.NOT_RUNNING
    broker_epoch: int = -1
    registered: bool = False
    ready_to_unfence: bool = False
    caught_up: bool = False  # the controller said so (Kafka's initialCatchUpFuture)
    unfenced_once: bool = False  # Kafka's initialUnfenceFuture
    failed_attempts: int = 0
    in_flight: bool = False
    _next_ms: int | None = None
    _send_when_done: bool = False
    _registration_deadline_ms: int | None = None
    _registration_succeeded: bool = False
    _got_shutdown_reply: bool = False
    _requests: list[OutboundRequest] = field(default_factory=list)

    # -- events

    def start(self, now_ms: int) -> None:
        self.state = BrokerState.STARTING
        self._registration_deadline_ms = now_ms + self.initial_registration_timeout_ms
        self._send_registration()
        log.info(
            "incarnation %s of broker %d in cluster %s is now STARTING",
            self.incarnation_id,
            self.node_id,
            self.cluster_id,
        )

    def set_ready_to_unfence(self, now_ms: int) -> None:
        self.ready_to_unfence = True
        self._schedule(now_ms, 0)

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        if self.state == BrokerState.RUNNING:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self._schedule(now_ms, 0)
        elif self.state != BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._shut_down()

    def resend_registration(self, now_ms: int) -> None:
        """The image no longer shows this incarnation registered: register again."""
        self.registered = False
        self._schedule(now_ms, 0)

    def on_registration_response(self, response: Any | None, now_ms: int) -> None:
        self.in_flight = False
        if self.state == BrokerState.SHUTTING_DOWN:
            return
        if response is None or response.error_code != ErrorCode.NONE:
            code = "no response" if response is None else ErrorCode(response.error_code).name
            log.info("unable to register broker %d: %s", self.node_id, code)
            self._schedule_after_failure(now_ms)
            return
        self.failed_attempts = 0
        self.broker_epoch = response.broker_epoch
        self.registered = self._registration_succeeded = True
        log.info("registered broker %d with broker epoch %d", self.node_id, self.broker_epoch)
        self._schedule(now_ms, 0)

    def on_heartbeat_response(self, response: Any | None, now_ms: int) -> None:
        self.in_flight = False
        if self.state == BrokerState.SHUTTING_DOWN:
            return
        if response is None or response.error_code != ErrorCode.NONE:
            code = "no response" if response is None else ErrorCode(response.error_code).name
            log.warning("broker %d heartbeat failed: %s", self.node_id, code)
            self._schedule_after_failure(now_ms)
            return
        self.failed_attempts = 0
        if self.state == BrokerState.STARTING:
            if response.is_caught_up:
                self.state, self.caught_up = BrokerState.RECOVERY, True
            self._schedule(now_ms, STARTING_HEARTBEAT_MS)
        elif self.state == BrokerState.RECOVERY:
            if not response.is_fenced:
                self.state, self.unfenced_once = BrokerState.RUNNING, True
            self._schedule(now_ms, self.heartbeat_interval_ms)
        elif self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if response.should_shut_down:
                self._shut_down()
                return
            delay = self.heartbeat_interval_ms if self._got_shutdown_reply else FIRST_SHUTDOWN_HEARTBEAT_MS
            self._got_shutdown_reply = True
            self._schedule(now_ms, delay)
        else:
            self._schedule(now_ms, self.heartbeat_interval_ms)

    # -- driving

    def poll(self, now_ms: int, metadata_offset: int) -> int | None:
        """Do what is due at ``now_ms``; the next deadline (None when there is nothing left)."""
        if self.state in (BrokerState.NOT_RUNNING, BrokerState.SHUTTING_DOWN):
            return None
        deadline = self._registration_deadline_ms
        if deadline is not None and not self._registration_succeeded and now_ms >= deadline:
            log.error("broker %d shutting down: unable to register with the controller quorum", self.node_id)
            self._shut_down()
            return None
        if self._next_ms is not None and now_ms >= self._next_ms:
            self._next_ms = None
            if self.in_flight:
                self._send_when_done = True
            elif self.registered:
                self._send_heartbeat(metadata_offset)
            else:
                self._send_registration()
        due = [t for t in (self._next_ms, None if self._registration_succeeded else deadline) if t is not None]
        return min(due, default=None)

    def take_requests(self) -> list[OutboundRequest]:
        out, self._requests = self._requests, []
        return out

    # -- internals

    def _schedule(self, now_ms: int, delay_ms: int) -> None:
        if self._send_when_done:
            delay_ms, self._send_when_done = 0, False
        self._next_ms = now_ms + delay_ms

    def _schedule_after_failure(self, now_ms: int) -> None:
        delay = exponential_backoff_ms(self.failed_attempts, self.session_timeout_ms, self.rng)
        self.failed_attempts += 1
        self._send_when_done = False  # never at once after a failure
        self._schedule(now_ms, delay)

    def _shut_down(self) -> None:
        self.state = BrokerState.SHUTTING_DOWN
        self._next_ms = None

    def _send_registration(self) -> None:
        body = {
            "broker_id": self.node_id,
            "cluster_id": self.cluster_id,
            "incarnation_id": self.incarnation_id,
            "listeners": [
                {"name": x.name, "host": x.host, "port": x.port, "security_protocol": x.security_protocol}
                for x in self.listeners
            ],
            "features": [
                {"name": f.name, "min_supported_version": f.min_version, "max_supported_version": f.max_version}
                for f in self.features
            ],
            "rack": self.rack,
            "is_migrating_zk_broker": False,
            "log_dirs": sorted(self.log_dirs, key=java_uuid_order),
            "previous_broker_epoch": self.previous_broker_epoch,
        }
        self._requests.append(OutboundRequest(BROKER_REGISTRATION_API, body))
        self.in_flight = True

    def _send_heartbeat(self, metadata_offset: int) -> None:
        body = {
            "broker_id": self.node_id,
            "broker_epoch": self.broker_epoch,
            "current_metadata_offset": metadata_offset,
            "want_fence": not self.ready_to_unfence,
            "want_shut_down": self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            "offline_log_dirs": [],
        }
        self._requests.append(OutboundRequest(BROKER_HEARTBEAT_API, body))
        self.in_flight = True
