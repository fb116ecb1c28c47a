"""The broker's way to the active controller (Kafka's NodeToControllerChannelManager).

``await channel.request(api_key, version, body)`` sends one controller request (CreateTopics,
CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs, ElectLeaders,
AllocateProducerIds, BrokerRegistration, BrokerHeartbeat, UnregisterBroker, and a partition
leader's AlterPartition) to whichever node is the active controller now, and returns its
response body as the wire decodes it:

- the active controller is the metadata quorum's leader (``leader.leader_id``); when that is
  this node and the node has a controller host, the request is answered in process (no socket),
  else it goes over the network to the leader's CONTROLLER endpoint (from the voters' endpoints,
  or, on a broker that finds the quorum through ``controller.quorum.bootstrap.servers`` alone, the
  endpoint its quorum observer learned of the leader, as Kafka's RaftControllerNodeProvider);
- a response naming NOT_CONTROLLER anywhere, a refused or broken connection, or no known leader
  sends it again once the leader is known (or has changed), as Kafka's channel puts the request
  back at the head of its queue and looks up the controller again;
- all of that bounded by one deadline, ``request.timeout.ms`` by default (Kafka's channel
  manager uses the broker's request timeout for its retries): past it the request fails with
  :class:`ControllerUnavailable` (REQUEST_TIMED_OUT), which the forwarding handler answers.

One request at a time per channel, as Kafka's channel runs one in flight: a broker's controller
requests are few (admin requests, heartbeats, producer id blocks), and their order is kept.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

from kafkalike.protocol.api import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kafkalike.protocol.codec import Message
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.frames import receive_frame
from kafkalike.server.quorum.channel import NetworkFaults

log = logging.getLogger("kafkalike.controller_channel")

DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms
CONNECT_TIMEOUT_S = 2.0
RETRY_BACKOFF_MS = 50  # between attempts when the leader did not change meanwhile
RETRY_BACKOFF_MAX_MS = 1000
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
NO_LEADER = -1
_CORRELATION_ID = struct.Struct(">i")


class ControllerUnavailable(Exception):
    """No active controller answered before the deadline: REQUEST_TIMED_OUT to the client."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class LeaderSource(Protocol):
    """Who leads the metadata quorum (the node's QuorumDriver)."""

    @property
    def leader_id(self) -> int: ...

    async def changed(self) -> None: ...


class LocalController(Protocol):
    """This node's controller host, when it has the controller role."""

    @property
    def active(self) -> bool: ...

    async def handle(self, api_key: int, version: int, body: Message, context: Any) -> Any: ...


class ControllerChannel:
    """See the module docstring."""

    def __init__(
        self,
        node_id: int,
        leader: LeaderSource,
        controller_endpoints: Mapping[int, tuple[str, int]],
        *,
        local: LocalController | None = None,
        local_context: Callable[[RequestHeader], Any] | None = None,
        clock: Clock | None = None,
        faults: NetworkFaults | None = None,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        learned_endpoint: Callable[[int], tuple[str, int] | None] | None = None,
    ) -> None:
        """``controller_endpoints``: each voter's CONTROLLER listener (host, port);
        ``learned_endpoint``: where a controller not among them listens, as the quorum learned it.
        ``local`` and ``local_context``: the node's own controller host and how it wants a
        request's context (``ControllerRequestContext``); none on a broker-only node."""
        self.node_id = node_id
        self.leader = leader
        self.endpoints = dict(controller_endpoints)
        self.learned_endpoint = learned_endpoint
        self.local = local
        self.local_context = local_context
        self.clock = clock or SystemClock()
        self.faults = faults
        self.request_timeout_ms = request_timeout_ms
        self.client_id = f"broker-{node_id}-to-controller"
        self._lock = trio.Lock()
        self._correlation_id = 0
        self._stream: trio.SocketStream | None = None
        self._stream_peer = NO_LEADER
        self._splitter = FrameSplitter(MAX_RESPONSE_BYTES)
        self.sent_over_network = 0
        self.answered_locally = 0
        self.retries = 0

    async def request(self, api_key: int, version: int, body: Any, *, timeout_ms: int | None = None) -> Message:
        """The active controller's response to one request (see the module docstring)."""
        deadline_s = (
            self.clock.monotonic_s() + (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        )
        async with self._lock:
            with trio.move_on_after(max(deadline_s - self.clock.monotonic_s(), 0)):
                return await self._until_answered(api_key, version, body)
        await self._close()
        raise ControllerUnavailable(
            f"no active controller answered {api_key} v{version} within "
            f"{timeout_ms if timeout_ms is not None else self.request_timeout_ms} ms"
        )

    async def _until_answered(self, api_key: int, version: int, body: Any) -> Message:
        backoff_ms = RETRY_BACKOFF_MS
        while True:
            leader_id = self.leader.leader_id
            if leader_id == NO_LEADER:
                await self.leader.changed()
                continue
            response = await self._attempt(leader_id, api_key, version, body)
            if response is not None and not _names_not_controller(response):
                return response
            self.retries += 1
            await self._close()
            if self.leader.leader_id == leader_id:
                # Told the leader is not (or no longer) the controller, or it is unreachable:
                # wait for news of another leader, or a short while (it may be coming up).
                with trio.move_on_after(backoff_ms / 1000):
                    while self.leader.leader_id == leader_id:
                        await self.leader.changed()
                backoff_ms = min(backoff_ms * 2, RETRY_BACKOFF_MAX_MS)
            else:
                backoff_ms = RETRY_BACKOFF_MS

    async def _attempt(self, leader_id: int, api_key: int, version: int, body: Any) -> Message | None:
        """One try at ``leader_id``; None when it could not be asked or did not answer."""
        self._correlation_id += 1
        header = RequestHeader(api_key, version, self._correlation_id, self.client_id)
        if leader_id == self.node_id and self.local is not None:
            if not self.local.active:
                return None  # leading, not yet activated: asked again when it has
            # Through the wire format both ways, so each side sees what it would over a socket.
            _, decoded = decode_request(memoryview(encode_request(header, body))[4:])
            context = self.local_context(header) if self.local_context is not None else None
            answer = await self.local.handle(api_key, version, decoded, context)
            self.answered_locally += 1
            frame = encode_response(api_key, version, header.correlation_id, answer)
            return decode_response(api_key, version, memoryview(frame)[4:])[1]
        if self.faults is not None and self.faults.blocks(self.node_id, leader_id):
            return None
        address = self.endpoints.get(leader_id)
        if address is None and self.learned_endpoint is not None:
            address = self.learned_endpoint(leader_id)
        if address is None:
            log.warning("node %d: the controller %d has no known endpoint", self.node_id, leader_id)
            return None
        try:
            stream = await self._connect(leader_id, address)
            if stream is None:
                return None
            await stream.send_all(encode_request(header, body))
            received = await receive_frame(stream, self._splitter)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError) as exc:
            log.info("node %d: controller %d at %s:%d: %s", self.node_id, leader_id, *address, exc)
            return None
        if received is None:
            return None
        (correlation_id,) = _CORRELATION_ID.unpack_from(received, 0)
        if correlation_id != header.correlation_id:
            log.warning(
                "node %d: controller %d answered #%d to #%d",
                self.node_id,
                leader_id,
                correlation_id,
                header.correlation_id,
            )
            return None
        try:
            response = decode_response(api_key, version, received)[1]
        except ProtocolError as exc:
            log.warning("node %d: controller %d sent an unreadable response: %s", self.node_id, leader_id, exc)
            return None
        self.sent_over_network += 1
        return response

    async def _connect(self, leader_id: int, address: tuple[str, int]) -> trio.SocketStream | None:
        if self._stream is not None and self._stream_peer == leader_id:
            return self._stream
        await self._close()
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                self._stream = await trio.open_tcp_stream(*address)
        except (OSError, trio.TooSlowError) as exc:
            log.debug("node %d: cannot connect to controller %d at %s:%d (%s)", self.node_id, leader_id, *address, exc)
            return None
        self._stream_peer = leader_id
        self._splitter = FrameSplitter(MAX_RESPONSE_BYTES)
        return self._stream

    async def _close(self) -> None:
        stream, self._stream, self._stream_peer = self._stream, None, NO_LEADER
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def aclose(self) -> None:
        await self._close()


def _names_not_controller(message: Any) -> bool:
    """Whether NOT_CONTROLLER is any error code of the response (Kafka's channel looks for it in
    the response's error counts: CreateTopics carries it per topic, heartbeats at the top)."""
    pending = [message]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):  # a decoded struct
            if item.get("error_code") == ErrorCode.NOT_CONTROLLER:
                return True
            pending.extend(v for v in item.values() if isinstance(v, (list, dict)))
    return False
