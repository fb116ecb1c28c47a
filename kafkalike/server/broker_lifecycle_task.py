"""The broker's registration and heartbeats, run: ``BrokerLifecycle`` driven over the controller channel.

``kafkalike.controller.broker_lifecycle.BrokerLifecycle`` (Kafka's BrokerLifecycleManager) says
what to send and when; this task sends it to the active controller through the
``ControllerChannel`` (one request in flight, each bounded by half the session timeout, as
Kafka's heartbeat channel is: KAFKA-14392), hands every answer (or its absence) back, and sleeps
until the machine's next deadline or the next answer.

Start-up, as Kafka's BrokerServer waits for it (``startup``): registered and told by the
controller that this broker has caught up with the metadata log (a heartbeat answer with
``is_caught_up``), then the first metadata image published here, then ready to unfence: the
controller unfences the broker at the next heartbeat. Kafka opens the client listeners only after
that, so a broker serves no client request while it is fenced at start-up.

Controlled shutdown (SIGTERM): ``controlled_shutdown(deadline)`` asks to shut down
(``want_shut_down`` heartbeats) and waits until the controller answers ``should_shut_down`` (it
has moved the broker's leaderships away), or the deadline; then the heartbeats stop. The broker is
never unregistered on its own (UnregisterBroker is an admin operation).
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from kafkalike.controller.broker_lifecycle import (
    BROKER_HEARTBEAT_API,
    BROKER_REGISTRATION_API,
    BrokerLifecycle,
    BrokerState,
    Feature,
    Listener,
    OutboundRequest,
)
from kafkalike.controller.features import (
    FEATURE_DEFAULTS,
    KRAFT_VERSION_FEATURE,
    LATEST_PRODUCTION,
    LEVELS_BY_NAME,
    METADATA_VERSION_FEATURE,
    METADATA_VERSIONS,
)
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ProtocolError
from kafkalike.server.clock import Clock
from kafkalike.server.config import BrokerConfig
from kafkalike.server.controller_channel import ControllerUnavailable
from kafkalike.server.listener_config import BrokerListeners, ListenerEndpoint

if TYPE_CHECKING:
    from kafkalike.controller.delta import MetadataDelta
    from kafkalike.controller.image import MetadataImage

log = logging.getLogger("kafkalike.broker_lifecycle")

# The versions Kafka 4.0's broker sends (its controller advertises BrokerRegistration 0-4, BrokerHeartbeat 0-1).
REQUEST_VERSIONS = {BROKER_REGISTRATION_API: 4, BROKER_HEARTBEAT_API: 1}
# Kafka's BrokerServer.shutdown(): five minutes for the whole shutdown, controlled shutdown included.
DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_S = 300.0
# From this metadata.version on a registration lists its log directories (JBOD, KIP-858).
DIRECTORIES_METADATA_VERSION = LEVELS_BY_NAME["3.7-IV2"]
_HALF_MS = 0.5  # wake half a millisecond after a deadline, so the machine sees it as reached


class ControllerRequests(Protocol):
    """What this task needs of the controller channel (server/controller_channel.py)."""

    async def request(self, api_key: int, version: int, body: Any, *, timeout_ms: int | None = None) -> Message: ...


class BrokerLifecycleFailed(Exception):
    """The broker stopped before start-up completed (not registered in time, or shut down)."""


def supported_features() -> list[Feature]:
    """What this broker supports: every metadata.version kafkalike knows up to the latest production
    one, kraft.version 0-1 as Kafka's broker (the voters' records are the quorum's business), and
    the other features up to the levels kafkalike's own bootstrap finalizes (so a cluster it
    formats always accepts its brokers)."""
    levels = [level for _, level in METADATA_VERSIONS if level <= LEVELS_BY_NAME[LATEST_PRODUCTION]]
    features = [Feature(METADATA_VERSION_FEATURE, min(levels), max(levels)), Feature(KRAFT_VERSION_FEATURE, 0, 1)]
    for name, steps in sorted(FEATURE_DEFAULTS.items()):
        features.append(Feature(name, 0, max(value for _, value in steps)))
    return features


def lifecycle_from_config(
    config: BrokerConfig,
    *,
    cluster_id: str,
    listeners: Sequence[Listener],
    log_dirs: Sequence[uuid.UUID] = (),
    previous_broker_epoch: int = -1,
    rng: random.Random | None = None,
) -> BrokerLifecycle:
    """The machine for this broker: its advertised broker listeners (never the controller's),
    ``broker.rack``, the supported features, a new incarnation id, its log directories' ids, and
    the ``broker.*`` timings."""
    rng = rng or random.Random()
    return BrokerLifecycle(
        node_id=config.node_id,
        cluster_id=cluster_id,
        incarnation_id=uuid.UUID(int=rng.getrandbits(128), version=4),
        listeners=list(listeners),
        features=supported_features(),
        rng=rng,
        rack=config.get("broker.rack"),
        log_dirs=list(log_dirs),
        previous_broker_epoch=previous_broker_epoch,
        heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("broker.session.timeout.ms"),
        initial_registration_timeout_ms=config.get_int("initial.broker.registration.timeout.ms"),
    )


def registered(config: BrokerConfig, advertised: Sequence[ListenerEndpoint]) -> list[Listener]:
    """The listeners a registration names: every advertised one (resolved: no port 0, no blank
    host), the inter-broker listener first, as Kafka's ListenerInfo.create orders them (the
    first is the one other brokers use)."""
    inter_broker = BrokerListeners.from_config(config).inter_broker_name
    ordered = sorted(advertised, key=lambda e: e.name != inter_broker)  # stable: the rest keep their order
    return [Listener(e.name, e.host, e.port, e.security_protocol_id) for e in ordered]


class BrokerLifecycleTask:
    """Runs one ``BrokerLifecycle``; ``run`` in a nursery, the waits from the node's start-up and shutdown."""

    def __init__(
        self,
        lifecycle: BrokerLifecycle,
        channel: ControllerRequests,
        clock: Clock,
        metadata_offset: Callable[[], int],
    ) -> None:
        """``metadata_offset()``: the offset of the last metadata record applied here (Kafka's
        loader.lastAppliedOffset), reported in every heartbeat."""
        self.lifecycle = lifecycle
        self._channel = channel
        self._clock = clock
        self._metadata_offset = metadata_offset
        self._wake = trio.Event()
        self.caught_up = trio.Event()  # the controller said so (Kafka's initialCatchUpFuture)
        self.unfenced = trio.Event()  # unfenced once since start (initialUnfenceFuture)
        self.stopped = trio.Event()  # SHUTTING_DOWN: no more requests
        self.shutdown_approved = False  # the controller answered should_shut_down
        self._seen_metadata_version: int | None = None

    # -- what the node calls

    @property
    def state(self) -> BrokerState:
        return self.lifecycle.state

    @property
    def broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch

    def set_ready_to_unfence(self) -> None:
        self.lifecycle.set_ready_to_unfence(self._now_ms())
        self._wake.set()

    def begin_controlled_shutdown(self) -> None:
        self.lifecycle.begin_controlled_shutdown(self._now_ms())
        self._wake.set()

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Kafka's BrokerRegistrationTracker: when metadata.version changed or this broker's
        registration did, and the version wants log directories the registration lacks, register
        again (a registration written before the version rose)."""
        version_changed = image.metadata_version != self._seen_metadata_version
        self._seen_metadata_version = image.metadata_version
        node_id = self.lifecycle.node_id
        if not version_changed and node_id not in delta.changed_brokers:
            return
        registration = image.brokers.get(node_id)
        if registration is None or registration.directories:
            return
        if image.metadata_version >= DIRECTORIES_METADATA_VERSION:
            log.info(
                "broker %d: the registration lists no log directories, but the metadata version wants them: "
                "registering again",
                node_id,
            )
            self.lifecycle.resend_registration(self._now_ms())
            self._wake.set()

    async def startup(self, first_publish: Callable[[], Awaitable[None]] | None = None) -> None:
        """Until unfenced: caught up (the controller says), ``first_publish()`` (the first image
        published here), ready to unfence, unfenced. BrokerLifecycleFailed if the machine stops
        first (registration timed out)."""
        await self._until(self.caught_up, "the controller to acknowledge that we are caught up")
        if first_publish is not None:
            await first_publish()
        self.set_ready_to_unfence()
        await self._until(self.unfenced, "the broker to be unfenced")

    async def controlled_shutdown(self, timeout_s: float = DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_S) -> bool:
        """Ask the controller to let this broker go and wait (bounded) until it does; then stop
        heartbeating. True when the controller approved before the deadline."""
        self.begin_controlled_shutdown()
        try:
            with trio.move_on_after(timeout_s):
                await self.stopped.wait()
        finally:  # also when the caller's own deadline cancels the wait
            if not self.stopped.is_set():
                log.error("timed out waiting for the controller to approve controlled shutdown")
            self.lifecycle.state = BrokerState.SHUTTING_DOWN  # Kafka's beginShutdown: nothing more is sent
            self._wake.set()
        return self.shutdown_approved

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Register, heartbeat, until the machine is SHUTTING_DOWN."""
        lifecycle = self.lifecycle
        lifecycle.start(self._now_ms())
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                self._wake = trio.Event()
                deadline_ms = lifecycle.poll(self._now_ms(), self._metadata_offset())
                for request in lifecycle.take_requests():
                    nursery.start_soon(self._send, request)
                self._note_state()
                if lifecycle.state == BrokerState.SHUTTING_DOWN:
                    break
                wake_at_s = math.inf if deadline_ms is None else (deadline_ms + _HALF_MS) / 1000
                with trio.move_on_at(wake_at_s):
                    await self._wake.wait()
            nursery.cancel_scope.cancel()  # an answer in flight no longer matters

    # -- internals

    def _now_ms(self) -> int:
        return int(self._clock.monotonic_s() * 1000)

    async def _until(self, event: trio.Event, what: str) -> None:
        async with trio.open_nursery() as nursery:

            async def stopped() -> None:
                await self.stopped.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(stopped)
            log.info("waiting for %s", what)
            await event.wait()
            nursery.cancel_scope.cancel()
        if not event.is_set():
            raise BrokerLifecycleFailed(f"broker {self.lifecycle.node_id} stopped while waiting for {what}")

    async def _send(self, request: OutboundRequest) -> None:
        lifecycle = self.lifecycle
        response: Message | None
        try:
            response = await self._channel.request(
                request.api_key,
                REQUEST_VERSIONS[request.api_key],
                request.body,
                timeout_ms=max(lifecycle.session_timeout_ms // 2, 1),
            )
        except (ControllerUnavailable, OSError, ProtocolError) as exc:
            log.info("broker %d: no answer from the controller: %s", lifecycle.node_id, exc)
            response = None
        now_ms = self._now_ms()
        if request.api_key == BROKER_REGISTRATION_API:
            lifecycle.on_registration_response(response, now_ms)
        else:
            if response is not None and lifecycle.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
                self.shutdown_approved = bool(response.error_code == 0 and response.should_shut_down)
            lifecycle.on_heartbeat_response(response, now_ms)
        self._wake.set()

    def _note_state(self) -> None:
        lifecycle = self.lifecycle
        if lifecycle.caught_up and not self.caught_up.is_set():
            log.info("broker %d caught up with the metadata log", lifecycle.node_id)
            self.caught_up.set()
        if lifecycle.unfenced_once and not self.unfenced.is_set():
            log.info("broker %d unfenced (broker epoch %d)", lifecycle.node_id, lifecycle.broker_epoch)
            self.unfenced.set()
        if lifecycle.state == BrokerState.SHUTTING_DOWN and not self.stopped.is_set():
            self.stopped.set()
