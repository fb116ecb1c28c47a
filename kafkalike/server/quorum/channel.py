"""The quorum's outbound channel: one connection per peer voter, Kafka's wire protocol.

A request from the node goes out on its destination's connection with a request header (client id
``raft-client-N``, the node's correlation id) and the node's body at ``messages.API_VERSIONS``,
the bytes Kafka's KafkaRaftClient sends, or at the peer's highest version when that is lower: as
Kafka's NetworkClient, each connection first asks ApiVersions (so that a peer of an older release,
say a Kafka 4.0 voter without Fetch v18, is sent what it reads; a version's new fields are left
out). The response is decoded by the correlation id it answers and handed back as a
:class:`~kafkalike.raft.messages.RaftMessage`. A connection is opened when
the first request for its peer comes, and again after it breaks, with Kafka's reconnect backoff
(``reconnect.backoff.ms`` 50 doubling up to ``reconnect.backoff.max.ms`` 1000). A request that
cannot be sent (no connection, or the connection broke before its answer) is answered at once
with BROKER_NOT_AVAILABLE, as Kafka's NetworkClient answers a disconnected request, so the node
backs off ``controller.quorum.retry.backoff.ms`` and sends again instead of waiting out its
request timeout.

:class:`NetworkFaults` is the test hook at this channel: ``isolate(node_id)`` drops every message
between that node and the others (both ways, silently, as a network partition does: the senders
time out), ``heal()`` ends it. The controller listener consults the same object for what
arrives.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping

import trio

from kafkalike.protocol.api import API_VERSIONS_KEY, RequestHeader, decode_response, encode_request
from kafkalike.protocol.errors import DecodeError, ErrorCode, ProtocolError
from kafkalike.protocol.framing import FrameSplitter
from kafkalike.raft import messages as m
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.frames import receive_frame

log = logging.getLogger("kafkalike.quorum.channel")

RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000
CONNECT_TIMEOUT_S = 2.0
QUEUE_SIZE = 256
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
_CORRELATION_ID = struct.Struct(">i")
API_VERSIONS_VERSION = 3
API_VERSIONS_TIMEOUT_S = 5.0
# The correlation id of a connection's ApiVersions; the node's own ids are positive.
API_VERSIONS_CORRELATION_ID = 0


class NetworkFaults:
    """Which nodes are cut off from the rest (see the module docstring)."""

    def __init__(self) -> None:
        self.isolated: set[int] = set()
        self.dropped = 0

    def isolate(self, node_id: int) -> None:
        self.isolated.add(node_id)

    def heal(self) -> None:
        self.isolated.clear()

    def blocks(self, source: int, destination: int) -> bool:
        if source != destination and (source in self.isolated or destination in self.isolated):
            self.dropped += 1
            return True
        return False


def error_answer(message: m.RaftMessage, error: ErrorCode) -> m.RaftMessage:
    """The response a request gets when it never reached its destination."""
    body = m.fetch_top_level_error(error) if message.api_key == m.FETCH else m.top_level_error(error)
    return m.RaftMessage(message.destination, message.source, message.api_key, message.correlation_id, body, True)


class PeerChannels:
    """One :class:`_PeerConnection` per destination (``endpoints``: node id -> (host, port)),
    started on first use inside ``run``; ``deliver`` gets every response."""

    def __init__(
        self,
        node_id: int,
        endpoints: Mapping[int, tuple[str, int]],
        faults: NetworkFaults | None = None,
        deliver: Callable[[m.RaftMessage], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.node_id = node_id
        self.clock: Clock = clock or SystemClock()
        self.endpoints = dict(endpoints)
        self.faults = faults or NetworkFaults()
        self.deliver = deliver
        self._connections: dict[int, _PeerConnection] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def send(self, message: m.RaftMessage) -> None:
        if self.faults.blocks(message.source, message.destination):
            return
        connection = self._connections.get(message.destination)
        if connection is None:
            address = self.endpoints.get(message.destination)
            if address is None or self._nursery is None:
                log.warning("node %d: no address for node %d; %s not sent", self.node_id, message.destination, message)
                self._answer(error_answer(message, ErrorCode.BROKER_NOT_AVAILABLE))
                return
            connection = _PeerConnection(self, message.destination, address)
            self._connections[message.destination] = connection
            self._nursery.start_soon(connection.run)
        try:
            connection.queue_send.send_nowait(message)
        except trio.WouldBlock:
            self._answer(error_answer(message, ErrorCode.BROKER_NOT_AVAILABLE))

    def update_endpoints(self, endpoints: Mapping[int, tuple[str, int]]) -> None:
        """The node learned where a node listens (an observer, of its leader): its next
        connection goes there."""
        self.endpoints = dict(endpoints)
        for node_id, connection in self._connections.items():
            address = self.endpoints.get(node_id)
            if address is not None:
                connection.address = address

    def _answer(self, message: m.RaftMessage) -> None:
        if self.deliver is not None:
            self.deliver(message)

    def received(self, message: m.RaftMessage) -> None:
        if not self.faults.blocks(message.source, message.destination):
            self._answer(message)


class _PeerConnection:
    def __init__(self, channels: PeerChannels, peer_id: int, address: tuple[str, int]) -> None:
        self.channels = channels
        self.peer_id = peer_id
        self.address = address
        self.queue_send, self.queue = trio.open_memory_channel[m.RaftMessage](QUEUE_SIZE)
        self.pending: dict[int, tuple[m.RaftMessage, int]] = {}  # with the version it was sent at
        self.versions: dict[int, int] = dict(m.API_VERSIONS)  # what this connection's peer reads
        self.backoff_ms = RECONNECT_BACKOFF_MS
        self.retry_at_s = 0.0
        self.client_id = f"raft-client-{channels.node_id}"
        self.reachable = True  # until a connection attempt fails

    async def run(self) -> None:
        async for first in self.queue:
            if self.channels.clock.monotonic_s() < self.retry_at_s:
                self.channels._answer(error_answer(first, ErrorCode.BROKER_NOT_AVAILABLE))
                continue
            stream = await self._connect()
            if stream is None:
                self.channels._answer(error_answer(first, ErrorCode.BROKER_NOT_AVAILABLE))
                continue
            try:
                async with stream:
                    splitter = FrameSplitter(MAX_RESPONSE_BYTES)
                    # Outside the nursery: a peer closing before it answers is caught below, not
                    # raised as an exception group.
                    await self._negotiate(stream, splitter)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._read, stream, splitter, nursery.cancel_scope)
                        await self._write(stream, first)
                        nursery.cancel_scope.cancel()
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError) as exc:
                log.debug("connection to node %d ended: %s", self.peer_id, exc)
            self._fail_pending()

    async def _connect(self) -> trio.SocketStream | None:
        host, port = self.address
        try:
            with trio.fail_after(CONNECT_TIMEOUT_S):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            # Once per outage at INFO (a voter that is down is expected), each retry at DEBUG.
            log.log(
                logging.INFO if self.reachable else logging.DEBUG,
                "node %d: cannot connect to node %d at %s:%d (%s); retrying",
                self.channels.node_id,
                self.peer_id,
                host,
                port,
                exc or type(exc).__name__,
            )
            self.reachable = False
            self.retry_at_s = self.channels.clock.monotonic_s() + self.backoff_ms / 1000
            self.backoff_ms = min(self.backoff_ms * 2, RECONNECT_BACKOFF_MAX_MS)
            return None
        if not self.reachable:
            log.info("node %d: connected to node %d at %s:%d", self.channels.node_id, self.peer_id, host, port)
        self.reachable = True
        self.backoff_ms = RECONNECT_BACKOFF_MS
        return stream

    async def _negotiate(self, stream: trio.SocketStream, splitter: FrameSplitter) -> None:
        """ApiVersions first: send each API at the highest version both ends have (ours when the
        peer names none, or does not answer in time)."""
        header = RequestHeader(API_VERSIONS_KEY, API_VERSIONS_VERSION, API_VERSIONS_CORRELATION_ID, self.client_id)
        await stream.send_all(
            encode_request(header, {"client_software_name": "kafkalike", "client_software_version": "0"})
        )
        with trio.move_on_after(API_VERSIONS_TIMEOUT_S):
            frame = await receive_frame(stream, splitter)
            if frame is None:
                raise trio.BrokenResourceError("closed before answering ApiVersions")
            try:
                _, body = decode_response(API_VERSIONS_KEY, API_VERSIONS_VERSION, frame)
            except DecodeError as exc:
                raise ProtocolError(f"ApiVersions answer from node {self.peer_id}: {exc}") from exc
            if body.error_code != ErrorCode.NONE:
                return
            theirs = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
            for api_key, ours in m.API_VERSIONS.items():
                low, high = theirs.get(api_key, (0, ours))
                self.versions[api_key] = max(low, min(ours, high))

    async def _write(self, stream: trio.SocketStream, first: m.RaftMessage) -> None:
        message = first
        while True:
            version = self.versions[message.api_key]
            header = RequestHeader(message.api_key, version, message.correlation_id, self.client_id)
            frame = encode_request(header, message.body)
            self.pending[message.correlation_id] = (message, version)
            try:
                await stream.send_all(frame)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            message = await self.queue.receive()

    async def _read(self, stream: trio.SocketStream, splitter: FrameSplitter, scope: trio.CancelScope) -> None:
        try:
            while (frame := await receive_frame(stream, splitter)) is not None:
                (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
                sent = self.pending.pop(correlation_id, None)
                if sent is None:
                    raise ProtocolError(f"response #{correlation_id} from node {self.peer_id} answers no request")
                request, version = sent
                _, body = decode_response(request.api_key, version, frame)
                self.channels.received(
                    m.RaftMessage(self.peer_id, request.source, request.api_key, correlation_id, body, True)
                )
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError) as exc:
            log.debug("connection to node %d ended: %s", self.peer_id, exc)
        finally:
            scope.cancel()

    def _fail_pending(self) -> None:
        pending, self.pending = self.pending, {}
        for request, _ in pending.values():
            self.channels._answer(error_answer(request, ErrorCode.BROKER_NOT_AVAILABLE))
